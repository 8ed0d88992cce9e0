{#- Seeds land in schema `raw` exactly (the sources), whatever the target schema. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
  {{- custom_schema_name if custom_schema_name is not none else target.schema -}}
{%- endmacro %}
