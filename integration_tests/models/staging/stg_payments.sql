select id as payment_id, order_id, method, amount as paid_amount
from {{ source('raw', 'payments') }}
where amount > 0
