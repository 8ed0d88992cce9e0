"""Qualified SQL lowered to a tree of operators: SELECT blocks, their subqueries, windows and
grouping sets."""
