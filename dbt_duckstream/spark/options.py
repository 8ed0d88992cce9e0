"""The options of ``format("ducklake")``, checked on the driver before any task runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from ..errors import ConfigurationError
from ..runtime.lake import attach_lake, describe
from ..sql import TableRef
from .storage import Storage, is_object_store

ALIAS = "lake"


@dataclass(frozen=True)
class LakeOptions:
    """Where the table is: catalog (DuckDB file, ``sqlite:<file>``, ``postgres:<dsn>``), and
    the object storage settings when its data path is in S3 (see ``storage``)."""

    catalog: str
    data_path: str | None
    table: TableRef
    merge_on: tuple[str, ...] = ()
    op_column: str = "_op"
    snapshot: int | None = None
    partitions: int | None = None
    storage: Storage = field(default_factory=Storage)
    #: record the rows a merge or an overwrite ends in the table's change table
    capture: bool = True

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> LakeOptions:
        catalog = options.get("catalog")
        table = options.get("table") or options.get("path")
        if not catalog or not table:
            raise ConfigurationError(
                'format("ducklake") needs .option("catalog", <metadata file, sqlite:<file> or '
                'postgres:<dsn>>) and .option("table", "<schema>.<table>")'
            )
        parts = table.split(".")
        if len(parts) > 2:
            raise ConfigurationError(f"table {table!r}: use <table> or <schema>.<table>")
        schema, name = parts if len(parts) == 2 else ["main", parts[0]]
        merge_on = tuple(k.strip() for k in options.get("merge_on", "").split(",") if k.strip())
        snapshot = options.get("snapshot")
        partitions = options.get("partitions")
        return cls(
            catalog=catalog,
            data_path=options.get("data_path"),
            table=TableRef(ALIAS, schema, name),
            merge_on=merge_on,
            op_column=options.get("op_column", "_op"),
            snapshot=int(snapshot) if snapshot is not None else None,
            partitions=int(partitions) if partitions is not None else None,
            storage=Storage.parse(options),
            capture=_flag(options.get("capture_preimages", "true"), "capture_preimages"),
        )

    def connect(self, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        location = self.catalog.removeprefix("ducklake:").removeprefix("sqlite:")
        if self.data_path and not read_only and not location.startswith("postgres:"):
            # a new lake: its catalog file's directory is created like its data path
            Path(location).parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect()
        try:
            remote = is_object_store(self.data_path or "")
            if remote:
                self.storage.configure(con)
            attach_lake(
                con, self.catalog, alias=ALIAS, data_path=self.data_path, read_only=read_only
            )
            if not remote and is_object_store(self._data_path(con)):
                self.storage.configure(con)  # a lake in S3, opened without its data path
        except duckdb.Error as error:
            con.close()
            raise ConfigurationError(
                f"cannot open the DuckLake catalog {self.catalog}: {error}"
            ) from error
        return con

    def table_columns(self, con: duckdb.DuckDBPyConnection) -> dict[str, str] | None:
        """The table's columns and types, or None when it does not exist."""
        row = con.execute(
            "SELECT count(*) FROM duckdb_tables() "
            "WHERE database_name = ? AND schema_name = ? AND table_name = ?",
            [ALIAS, self.table.schema, self.table.name],
        ).fetchone()
        if not row or not row[0]:
            return None
        return dict(describe(con, self.table.sql()))

    def data_directory(self, con: duckdb.DuckDBPyConnection) -> str:
        """Where the table's new Parquet files go: beside DuckLake's own."""
        data_path = self._data_path(con)
        if not data_path:
            raise ConfigurationError(f"the DuckLake {self.catalog} has no data_path")
        return f"{data_path.rstrip('/')}/{self.table.schema}/{self.table.name}"

    def _data_path(self, con: duckdb.DuckDBPyConnection) -> str:
        row = con.execute(
            f"SELECT value FROM {ALIAS}.options() WHERE option_name = 'data_path'"
        ).fetchone()
        return str(row[0]) if row and row[0] else ""


def _flag(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ConfigurationError(f"option {name} must be true or false, not {value!r}")
    return lowered == "true"
