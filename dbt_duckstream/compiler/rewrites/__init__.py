"""The rewrites of a model's SQL, one per module, each ``rule(expression, context) ->
expression`` named after its module; their order is ``pipeline.PHASES``."""
