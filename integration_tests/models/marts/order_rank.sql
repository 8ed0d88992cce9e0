-- a window function, maintained: only the customers whose orders changed are ranked again
select
    order_id,
    customer_id,
    row_number() over (partition by customer_id order by amount desc nulls last, order_id) as rank_in_customer
from {{ ref('stg_orders') }}
