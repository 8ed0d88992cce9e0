-- a chain: two incremental_ivm models joined, every order with its customer
select
    o.order_id,
    o.status,
    o.amount,
    o.order_month,
    c.customer_id,
    c.customer_name,
    c.region,
    c.tier
from {{ ref('stg_orders') }} as o
join {{ ref('stg_customers') }} as c on o.customer_id = c.customer_id
