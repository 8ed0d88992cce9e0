-- a join of two aggregated CTEs
with ordered as (
    select customer_id, sum(amount) as ordered, count(*) as orders
    from {{ ref('stg_orders') }}
    where status in ('placed', 'shipped', 'completed')
    group by customer_id
),

paid as (
    select o.customer_id, sum(p.paid_amount) as paid
    from {{ ref('stg_payments') }} as p
    join {{ ref('stg_orders') }} as o on p.order_id = o.order_id
    group by o.customer_id
)

select
    ordered.customer_id,
    ordered.orders,
    ordered.ordered,
    paid.paid,
    ordered.ordered - coalesce(paid.paid, 0) as balance
from ordered
join paid on ordered.customer_id = paid.customer_id
