{#- Builds the model on its first run, then applies only what changed in its sources.
    The run itself (pin, decide, maintain or rebuild, advance the cursors, commit) is one
    DuckLake transaction in Python; this materialization runs the hooks and reports. -#}

{% materialization incremental_ivm, adapter='duckdb' %}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set contract_config = config.get('contract') -%}
  {%- if contract_config and contract_config.enforced -%}
    {{ get_assert_columns_equivalent(compiled_code) }}
  {%- endif -%}

  {#- guarded: a macro's first call in an invocation compiles its template (a few ms, paid by
      the first model), and most models have no hooks and persist no docs -#}
  {%- if pre_hooks -%}
    {{ run_hooks(pre_hooks, inside_transaction=False) }}
    {{ run_hooks(pre_hooks, inside_transaction=True) }}
  {%- endif -%}

  {%- set result = dbt_duckstream.duckstream_call('duckstream_run', {
        'relation': dbt_duckstream.duckstream_relation(target_relation),
        'sql': compiled_code,
        'full_refresh': should_full_refresh(),
        'empty': flags.EMPTY is true,
        'fallback': config.get('ivm_fallback'),
        'rebuild_above': config.get('ivm_rebuild_above'),
        'stored_inputs': config.get('ivm_stored_inputs'),
      }) -%}
  {{ log(target_relation ~ ': ' ~ result['summary'], info=(result['strategy'] == 'rebuild')) }}
  {%- do store_raw_result(
        'main',
        message=result['summary'],
        code=result['strategy'],
        rows_affected=result['rows_inserted'] + result['rows_deleted'],
      ) -%}

  {%- if post_hooks -%}
    {{ run_hooks(post_hooks, inside_transaction=True) }}
  {%- endif -%}
  {%- if config.persist_relation_docs() or config.persist_column_docs() -%}
    {%- do persist_docs(target_relation, model) -%}
  {%- endif -%}
  {{ adapter.commit() }}
  {%- if post_hooks -%}
    {{ run_hooks(post_hooks, inside_transaction=False) }}
  {%- endif -%}

  {{ return({'relations': [target_relation]}) }}
{% endmaterialization %}
