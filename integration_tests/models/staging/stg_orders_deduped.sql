-- one row per order id: the pipeline may land an order twice; keep its latest version
select id as order_id, customer_id, status, amount, ordered_at
from {{ source('raw', 'orders') }}
qualify row_number() over (
    partition by id
    order by ordered_at desc, amount desc nulls last, status, customer_id
) = 1
