-- an aggregate three models down the chain, with HAVING and FILTER
select
    region,
    count(*) as orders,
    sum(amount) as revenue,
    avg(amount) as avg_amount,
    min(amount) as smallest,
    max(amount) as largest,
    count(*) filter (where status = 'returned') as returned,
    count(distinct customer_id) as customers
from {{ ref('orders_enriched') }}
group by region
having count(*) > 0
