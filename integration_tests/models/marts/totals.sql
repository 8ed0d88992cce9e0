-- a global aggregate: one row, even when every order is gone
select count(*) as orders, sum(amount) as revenue, count(amount) as priced
from {{ ref('stg_orders') }}
