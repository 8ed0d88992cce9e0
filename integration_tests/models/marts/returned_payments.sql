{{ config(ivm_stored_inputs=['stg_orders']) }}
-- the payments of returned orders: the few orders returned are kept beside the model, so
-- that a run joins the new payments with them rather than reading every order
select
    p.payment_id,
    p.paid_amount,
    o.order_id,
    o.customer_id
from {{ ref('stg_payments') }} as p
join {{ ref('stg_orders') }} as o on p.order_id = o.order_id
where o.status = 'returned'
