-- three sources joined, then aggregated per order
select
    o.order_id,
    o.status,
    c.region,
    count(*) as payments,
    sum(p.paid_amount) as paid,
    max(p.method) as last_method
from {{ ref('stg_payments') }} as p
join {{ ref('stg_orders') }} as o on p.order_id = o.order_id
join {{ ref('stg_customers') }} as c on o.customer_id = c.customer_id
group by o.order_id, o.status, c.region
