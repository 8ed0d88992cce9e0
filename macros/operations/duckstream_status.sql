{#- dbt run-operation duckstream_status [--args '{schema: marts}']
    Prints each incremental_ivm model of the schema (default: the target's): its last run's
    strategy and reason, rows, duration and time, and how many snapshots changed its sources
    since. -#}

{% macro duckstream_status(schema=none, database=none) %}
  {%- set response = dbt_duckstream.duckstream_call('duckstream_status', {
        'database': database or target.database,
        'schema': schema or target.schema,
      }) -%}
  {%- do print(response['text']) -%}
{% endmacro %}
