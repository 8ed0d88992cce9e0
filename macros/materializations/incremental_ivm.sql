{#- Builds the model on its first run, then applies only what changed in its sources.
    The run itself (pin, decide, maintain or rebuild, advance the cursors, commit) is one
    DuckLake transaction in Python; this materialization runs the hooks and reports. -#}

{% materialization incremental_ivm, adapter='duckdb' %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set contract_config = config.get('contract') -%}
  {%- if contract_config and contract_config.enforced -%}
    {{ get_assert_columns_equivalent(compiled_code) }}
  {%- endif -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {%- set result = dbt_duckstream.duckstream_call('duckstream_run', {
        'relation': dbt_duckstream.duckstream_relation(target_relation),
        'sql': compiled_code,
        'full_refresh': should_full_refresh(),
        'fallback': config.get('ivm_fallback'),
        'rebuild_above': config.get('ivm_rebuild_above'),
      }) -%}
  {{ log(target_relation ~ ': ' ~ result['summary'], info=(result['strategy'] == 'rebuild')) }}
  {%- do store_raw_result(
        'main',
        message=result['summary'],
        code=result['strategy'],
        rows_affected=result['rows_inserted'] + result['rows_deleted'],
      ) -%}

  {{ run_hooks(post_hooks, inside_transaction=True) }}
  {%- do persist_docs(target_relation, model) -%}
  {{ adapter.commit() }}
  {{ run_hooks(post_hooks, inside_transaction=False) }}

  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
