-- each customer's three largest orders (top-N per group)
select customer_id, order_id, amount
from {{ ref('stg_orders') }}
qualify row_number() over (
    partition by customer_id order by amount desc nulls last, order_id
) <= 3
