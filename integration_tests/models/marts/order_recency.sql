-- current_date cannot be maintained: this model rebuilds on every run, and says so
{{ config(ivm_fallback='rebuild') }}
select order_id, ordered_at, ordered_at >= current_date - 30 as is_recent
from {{ ref('stg_orders') }}
