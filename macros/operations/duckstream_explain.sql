{#- dbt run-operation duckstream_explain --args '{model: name}'
    Prints the SQL that builds and maintains the model, one named CTE per operator. -#}

{% macro duckstream_explain(model) %}
  {%- set found = graph.nodes.values() | selectattr('resource_type', 'equalto', 'model')
        | selectattr('name', 'equalto', model) | list -%}
  {%- if not found -%}
    {%- do exceptions.raise_compiler_error('dbt-duckstream: no model named ' ~ model) -%}
  {%- endif -%}
  {%- set node = found[0] -%}
  {%- set relation = api.Relation.create(database=node.database, schema=node.schema, identifier=node.alias) -%}
  {%- set response = dbt_duckstream.duckstream_call('duckstream_explain', {
        'relation': dbt_duckstream.duckstream_relation(relation),
        'sql': render(node.raw_code),
        'stored_inputs': node.config.get('ivm_stored_inputs'),
      }) -%}
  {%- do print(response['text']) -%}
{% endmacro %}
