"""``duckstream``: a model's plan and where models stand, outside a dbt run.

``duckstream explain <sql or file>`` prints the SQL that builds and maintains a model. A dbt
model file (with Jinja) is explained through its project, by ``dbt run-operation
duckstream_explain``; plain SQL is compiled here, against a DuckLake when ``--lake`` names one
(exact source columns and output types), or from the SQL alone.

``duckstream status --lake <metadata>`` lists each maintained model of a schema with its last
run and how many snapshots changed its sources since (also ``dbt run-operation
duckstream_status``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import duckdb

from .compiler import compile_ivm
from .errors import ConfigurationError, DuckstreamError
from .runtime import prepare
from .runtime.lake import attach_lake
from .runtime.status import format_status, status
from .sql import TableRef


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return args.handler(args)
    except DuckstreamError as error:
        print(f"duckstream: {error}", file=sys.stderr)
        return 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="duckstream", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(required=True, metavar="command")
    explain = commands.add_parser("explain", help="print the SQL that builds and maintains a model")
    explain.add_argument("model", help="model SQL, a .sql file, or a dbt model file")
    explain.add_argument("--lake", help="DuckLake metadata file (or ducklake: URI) to read")
    explain.add_argument("--data-path", help="the DuckLake's data path, when not the default")
    explain.add_argument("--catalog", default="lake", help="the DuckLake's alias (default: lake)")
    explain.add_argument("--schema", default="main", help="the model's schema (default: main)")
    explain.add_argument("--name", help="the model's table name (default: the file's name)")
    explain.add_argument(
        "--stored-input",
        action="append",
        default=[],
        dest="stored_inputs",
        help="a source whose rows the model's joins keep (ivm_stored_inputs; repeatable)",
    )
    explain.add_argument("--profiles-dir", help="dbt: where profiles.yml is")
    explain.add_argument("--target", help="dbt: the profile target to use")
    explain.set_defaults(handler=_explain)
    state = commands.add_parser("status", help="each maintained model's last run and lag")
    state.add_argument("--lake", required=True, help="DuckLake metadata file (or ducklake: URI)")
    state.add_argument("--data-path", help="the DuckLake's data path, when not the default")
    state.add_argument("--catalog", default="lake", help="the DuckLake's alias (default: lake)")
    state.add_argument("--schema", default="main", help="the models' schema (default: main)")
    state.set_defaults(handler=_status)
    return parser


def _status(args: argparse.Namespace) -> int:
    con = duckdb.connect()
    attach_lake(con, args.lake, alias=args.catalog, data_path=args.data_path, read_only=True)
    rows = status(con, args.catalog, args.schema)
    print(format_status(rows) if rows else "no incremental_ivm model has run here")
    return 0


def _explain(args: argparse.Namespace) -> int:
    path = Path(args.model)
    is_file = path.suffix == ".sql" and path.is_file()
    sql = path.read_text() if is_file else args.model
    if is_file and ("{{" in sql or "{%" in sql):
        return _explain_dbt_model(path, args)
    name = args.name or (path.stem if is_file else "model")
    target = TableRef(args.catalog, args.schema, name)
    if args.lake:
        con = duckdb.connect()
        attach_lake(con, args.lake, alias=args.catalog, data_path=args.data_path)
        plan = prepare(
            con,
            sql,
            target,
            catalog=args.catalog,
            db=args.schema,
            stored_inputs=tuple(args.stored_inputs),
        )
    else:
        try:
            plan = compile_ivm(
                sql,
                target=target,
                schema={},
                catalog=args.catalog,
                db=args.schema,
                stored_inputs=tuple(args.stored_inputs),
            )
        except ConfigurationError as error:
            raise ConfigurationError(
                f"{error}; pass --lake <DuckLake metadata file> to read the sources' columns"
            ) from error
    print(plan.explain())
    return 0


def _explain_dbt_model(path: Path, args: argparse.Namespace) -> int:
    """A model with Jinja needs its project to render: ask dbt to explain it."""
    from dbt.cli.main import dbtRunner

    project = next((p for p in path.resolve().parents if (p / "dbt_project.yml").is_file()), None)
    if project is None:
        raise DuckstreamError(f"{path} has Jinja but is not inside a dbt project")
    command = ["run-operation", "duckstream_explain", "--project-dir", str(project)]
    command += ["--args", json.dumps({"model": path.stem}), "--quiet"]
    if args.profiles_dir:
        command += ["--profiles-dir", args.profiles_dir]
    if args.target:
        command += ["--target", args.target]
    return 0 if dbtRunner().invoke(command).success else 1


if __name__ == "__main__":
    sys.exit(main())
