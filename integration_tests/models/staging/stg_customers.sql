-- renames, a derived column and a filter
select
    id as customer_id,
    upper(name) as customer_name,
    coalesce(region, 'unknown') as region,
    tier,
    tier = 'gold' as is_gold
from {{ source('raw', 'customers') }}
where id is not null
