-- orders and payments in one ledger: a union of two sources
select 'order' as kind, id, amount from {{ source('raw', 'orders') }}
union all
select 'payment' as kind, id, amount from {{ source('raw', 'payments') }}
