{#- Passes when the model's table equals its SQL recomputed now: both directions of
    EXCEPT ALL, floats compared to 9 significant digits, and identical column types. -#}

{% test ivm_consistent(model) %}
  {%- if execute -%}
    {%- set response = dbt_duckstream.duckstream_call('duckstream_consistency_sql', {
          'relation': dbt_duckstream.duckstream_relation(model),
        }) -%}
    {{ response['sql'] }}
  {%- else -%}
    select 1 as _side where false
  {%- endif -%}
{% endtest %}
