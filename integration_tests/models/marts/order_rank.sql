-- a window function cannot be maintained: this model rebuilds on every run, and says so
{{ config(ivm_fallback='rebuild') }}
select
    order_id,
    customer_id,
    row_number() over (partition by customer_id order by amount desc nulls last, order_id) as rank_in_customer
from {{ ref('stg_orders') }}
