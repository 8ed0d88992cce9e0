-- each customer's running order total, in order date order
select
    customer_id,
    order_id,
    ordered_at,
    amount,
    sum(amount) over (
        partition by customer_id
        order by ordered_at, order_id, amount, status
        rows between unbounded preceding and current row
    ) as running_amount
from {{ ref('stg_orders') }}
