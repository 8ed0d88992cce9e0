SELECT
    s_name,
    count(*) AS numwait
FROM
    {{ source('tpch', 'supplier') }},
    {{ source('tpch', 'lineitem') }} l1,
    {{ source('tpch', 'orders') }},
    {{ source('tpch', 'nation') }}
WHERE
    s_suppkey = l1.l_suppkey
    AND o_orderkey = l1.l_orderkey
    AND o_orderstatus = 'F'
    AND l1.l_receiptdate > l1.l_commitdate
    AND EXISTS (
        SELECT
            *
        FROM
            {{ source('tpch', 'lineitem') }} l2
        WHERE
            l2.l_orderkey = l1.l_orderkey
            AND l2.l_suppkey <> l1.l_suppkey)
    AND NOT EXISTS (
        SELECT
            *
        FROM
            {{ source('tpch', 'lineitem') }} l3
        WHERE
            l3.l_orderkey = l1.l_orderkey
            AND l3.l_suppkey <> l1.l_suppkey
            AND l3.l_receiptdate > l3.l_commitdate)
    AND s_nationkey = n_nationkey
    AND n_name = 'SAUDI ARABIA'
GROUP BY
    s_name
