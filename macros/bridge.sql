{#- Thin glue to the Python package: the plugin (dbt_duckstream.plugin) registers DuckDB
    functions that take a JSON request and return a JSON response. -#}

{% macro duckstream_call(function, request) -%}
  {%- set modules = (target.get('plugins') or []) | map(attribute='module') | list -%}
  {%- if 'dbt_duckstream.plugin' not in modules -%}
    {%- do exceptions.raise_compiler_error(
          "dbt-duckstream: the profile's output '" ~ target.name ~ "' does not load the plugin; "
          ~ "add `plugins: [{module: dbt_duckstream.plugin}]` to it") -%}
  {%- endif -%}
  {%- set payload = tojson(request) -%}
  {#- qualified: an unqualified name is looked up in the default catalog first, and when that
      is a DuckLake on SQLite the lookup holds a read lock on the catalog for the whole call,
      which no run inside it can commit past ("database is locked") -#}
  {%- set result = run_query("select system.main." ~ function ~ "('" ~ adapter.escape_sql_string(payload) ~ "')") -%}
  {%- set response = fromjson(result.columns[0].values()[0]) -%}
  {%- if response.get('error') and response.get('database') -%}
    {#- the database failed (a catalog contended past every retry): not the model's SQL -#}
    {%- do exceptions.raise_database_error('dbt-duckstream: ' ~ response['error']) -%}
  {%- elif response.get('error') -%}
    {%- do exceptions.raise_compiler_error('dbt-duckstream: ' ~ response['error']) -%}
  {%- endif -%}
  {{- return(response) -}}
{%- endmacro %}


{% macro duckstream_relation(relation) -%}
  {{- return({'database': relation.database, 'schema': relation.schema, 'identifier': relation.identifier}) -}}
{%- endmacro %}
