"""Where a lake's data files live: a local (or shared) directory, or S3-compatible storage.

Executors write Parquet through pyarrow's filesystems, so the same code writes to a directory
and to a bucket, without Hadoop's S3 connector; the driver's DuckDB reads the same files through
the ``httpfs`` extension (loaded from its wheel) and an S3 secret made from the same settings.

S3 settings come from the data source's options, named like DuckDB's own settings
(``s3_endpoint``, ``s3_region``, ``s3_access_key_id``, ``s3_secret_access_key``,
``s3_session_token``, ``s3_url_style`` = ``path``/``vhost``, ``s3_use_ssl`` = ``true``/``false``),
or else from the usual AWS environment variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

import duckdb
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..runtime.lake import load_extension
from ..sql import literal

#: URL schemes of object stores that DuckDB's httpfs reads and pyarrow writes
OBJECT_STORE_SCHEMES = ("s3://", "s3a://", "s3n://")

#: S3 settings: data source option -> AWS environment variable it falls back to
S3_SETTINGS = {
    "s3_endpoint": "AWS_ENDPOINT_URL",
    "s3_region": "AWS_REGION",
    "s3_access_key_id": "AWS_ACCESS_KEY_ID",
    "s3_secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "s3_session_token": "AWS_SESSION_TOKEN",
    "s3_url_style": "",
    "s3_use_ssl": "",
}


def is_object_store(path: str) -> bool:
    return path.lower().startswith(OBJECT_STORE_SCHEMES)


@dataclass(frozen=True)
class Storage:
    """The S3 settings of a data source (empty for a lake on a filesystem)."""

    s3: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Storage:
        settings = {}
        for name, variable in S3_SETTINGS.items():
            value = options.get(name) or (os.environ.get(variable) if variable else None)
            if not value and name == "s3_region":
                value = os.environ.get("AWS_DEFAULT_REGION")
            if value:
                settings[name] = value
        return cls(settings)

    # -- DuckDB, on the driver and in readers -------------------------------------------------

    def configure(self, con: duckdb.DuckDBPyConnection) -> None:
        """Load httpfs from its wheel and create the S3 secret, for a lake in object storage."""
        load_extension(con, "httpfs")
        if not self.s3:
            return
        endpoint, use_ssl = self._endpoint()
        fields = {
            "KEY_ID": self.s3.get("s3_access_key_id"),
            "SECRET": self.s3.get("s3_secret_access_key"),
            "SESSION_TOKEN": self.s3.get("s3_session_token"),
            "REGION": self.s3.get("s3_region"),
            "ENDPOINT": endpoint,
            "URL_STYLE": self.s3.get("s3_url_style") or ("path" if endpoint else None),
        }
        options = [f"{k} {literal(v)}" for k, v in fields.items() if v]
        options.append(f"USE_SSL {'true' if use_ssl else 'false'}")
        con.execute(f"CREATE OR REPLACE SECRET duckstream_s3 (TYPE s3, {', '.join(options)})")

    def _endpoint(self) -> tuple[str | None, bool]:
        """The endpoint as DuckDB wants it (``host:port``) and whether to use TLS."""
        endpoint = self.s3.get("s3_endpoint")
        use_ssl = self.s3.get("s3_use_ssl", "").lower() not in ("false", "0", "no")
        if endpoint and "://" in endpoint:
            scheme, endpoint = endpoint.split("://", 1)
            use_ssl = use_ssl and scheme.lower() == "https"
        return (endpoint.rstrip("/") if endpoint else None), use_ssl

    # -- files, on the executors and the driver -----------------------------------------------

    def filesystem(self, path: str) -> tuple[pafs.FileSystem, str]:
        """A pyarrow filesystem for ``path``, and the path as that filesystem names it."""
        if not is_object_store(path):
            return pafs.LocalFileSystem(), path
        endpoint, use_ssl = self._endpoint()
        s3 = pafs.S3FileSystem(
            access_key=self.s3.get("s3_access_key_id"),
            secret_key=self.s3.get("s3_secret_access_key"),
            session_token=self.s3.get("s3_session_token"),
            region=self.s3.get("s3_region"),
            endpoint_override=endpoint,
            scheme="https" if use_ssl else "http",
            force_virtual_addressing=self.s3.get("s3_url_style") == "vhost",
        )
        return s3, path.split("://", 1)[1]

    def make_directory(self, path: str) -> None:
        """A directory for new files (object stores have none to make)."""
        if not is_object_store(path):
            os.makedirs(path, exist_ok=True)

    def parquet_writer(self, path: str, schema: pa.Schema) -> pq.ParquetWriter:
        fs, name = self.filesystem(path)
        return pq.ParquetWriter(name, schema, filesystem=fs)

    def move(self, source: str, target: str) -> None:
        """Rename a finished file into place (on S3: copy, then delete the source)."""
        fs, name = self.filesystem(source)
        fs.move(name, self.filesystem(target)[1])

    def remove(self, paths: list[str]) -> None:
        """Remove the files that exist among ``paths``."""
        for path in paths:
            fs, name = self.filesystem(path)
            if fs.get_file_info(name).type == pafs.FileType.File:
                fs.delete_file(name)

    def list_files(self, directory: str, prefix: str) -> list[str]:
        """The files directly in ``directory`` whose names start with ``prefix``."""
        fs, name = self.filesystem(directory)
        if fs.get_file_info(name).type != pafs.FileType.Directory and not is_object_store(
            directory
        ):
            return []
        found = fs.get_file_info(pafs.FileSelector(name, allow_not_found=True))
        scheme = directory.split("://", 1)[0] + "://" if is_object_store(directory) else ""
        return [
            f"{scheme}{info.path}"
            for info in found
            if info.type == pafs.FileType.File and info.base_name.startswith(prefix)
        ]

    def remove_empty_directory(self, path: str) -> None:
        """Remove a directory with nothing in it (in S3: the marker pyarrow leaves behind)."""
        if not is_object_store(path):
            if os.path.isdir(path) and not os.listdir(path):
                os.rmdir(path)
            return
        fs, name = self.filesystem(path)
        if fs.get_file_info(name).type != pafs.FileType.Directory:
            return
        if not fs.get_file_info(pafs.FileSelector(name, recursive=True)):
            fs.delete_dir(name)
