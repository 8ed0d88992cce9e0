-- a subquery in FROM, aggregated; grouped by a derived key
select order_month, status, count(*) as orders, sum(amount) as amount
from (
    select order_month, case when status = 'returned' then 'lost' else 'kept' end as status, amount
    from {{ ref('stg_orders') }}
) as s
group by all
