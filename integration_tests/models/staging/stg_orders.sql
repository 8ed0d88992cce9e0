-- test orders are not real orders
select
    id as order_id,
    customer_id,
    status,
    amount,
    ordered_at,
    date_trunc('month', ordered_at) as order_month
from {{ source('raw', 'orders') }}
where status <> 'test'
