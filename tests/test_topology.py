"""The multi-machine topology: a PostgreSQL catalog, data files in S3-compatible storage, the
Spark writer in one process and `dbt run` in another.

Both run here: PostgreSQL on a private server, S3 as moto's server on the loopback interface,
Spark in ``local[2]`` mode (``tests/spark_batches.py``, one Spark application for both of its
batches), and dbt on the integration project with the profile the README gives for this
topology. Nothing of the lake is on the local disk: its metadata is in PostgreSQL, its files
in the bucket.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("pyspark")
boto3 = pytest.importorskip("boto3")  # moto's

from dbt_duckstream.runtime.lake import attach_lake  # noqa: E402
from dbt_duckstream.spark.storage import Storage  # noqa: E402

from .dbt_project import FALLBACK_MODELS, REPOSITORY, Project  # noqa: E402
from .lake_project import assert_equals_reference  # noqa: E402
from .postgres import create_database, free_port, postgres_server, wait_until_ready  # noqa: E402

pytestmark = pytest.mark.xdist_group("spark")

BUCKET = "lake"
DATA_PATH = f"s3://{BUCKET}/data/"
KEY, SECRET, REGION = "duckstream", "duckstream-secret", "us-east-1"

#: the profile of the integration project in this topology (the README shows the same)
PROFILE = """\
integration_tests:
  target: lake
  outputs:
    lake: &lake
      type: duckdb
      path: ":memory:"
      plugins:
        - module: dbt_duckstream.plugin
          config:
            secrets:
              - type: s3
                key_id: "{{ env_var('AWS_ACCESS_KEY_ID') }}"
                secret: "{{ env_var('AWS_SECRET_ACCESS_KEY') }}"
                region: "{{ env_var('AWS_REGION') }}"
                endpoint: "{{ env_var('DUCKSTREAM_S3_ENDPOINT') }}"
                url_style: path
                use_ssl: false
      attach:
        - path: "ducklake:postgres:{{ env_var('DUCKSTREAM_CATALOG_DSN') }}"
          alias: lake
          options:
            data_path: "s3://lake/data/"
      database: lake
      schema: main
      threads: 4
    reference:
      <<: *lake
      schema: reference
"""


@contextmanager
def s3_server() -> Iterator[str]:
    """moto's S3 server on a free loopback port, with an empty bucket; yields its endpoint."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_ready(port)
        endpoint = f"127.0.0.1:{port}"
        client = boto3.client(
            "s3",
            endpoint_url=f"http://{endpoint}",
            aws_access_key_id=KEY,
            aws_secret_access_key=SECRET,
            region_name=REGION,
        )
        client.create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        process.terminate()
        process.wait(timeout=30)


class TopologyProject(Project):
    """The integration project with a PostgreSQL catalog and its data in S3."""

    def __init__(self, directory: Path, dsn: str, endpoint: str) -> None:
        super().__init__(directory)
        (directory / "profiles.yml").write_text(PROFILE)
        shutil.rmtree(self.lake)  # nothing of the lake is local
        self.catalog = f"postgres:{dsn}"
        self.storage = Storage(
            {
                "s3_endpoint": endpoint,
                "s3_region": REGION,
                "s3_access_key_id": KEY,
                "s3_secret_access_key": SECRET,
                "s3_url_style": "path",
                "s3_use_ssl": "false",
            }
        )
        self.env.update(
            {
                "AWS_ACCESS_KEY_ID": KEY,
                "AWS_SECRET_ACCESS_KEY": SECRET,
                "AWS_REGION": REGION,
                "DUCKSTREAM_S3_ENDPOINT": endpoint,
                "DUCKSTREAM_CATALOG_DSN": dsn,
            }
        )

    @contextmanager
    def connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        con = duckdb.connect()
        try:
            self.storage.configure(con)
            attach_lake(con, self.catalog, data_path=DATA_PATH)
            yield con
        finally:
            con.close()

    def spark_arguments(self) -> list[str]:
        return [
            "--catalog",
            self.catalog,
            "--data-path",
            DATA_PATH,
            *[
                argument
                for name, value in self.storage.s3.items()
                for argument in (f"--{name.replace('_', '-')}", value)
            ],
        ]


class SparkApplication:
    """``tests.spark_batches`` in its own process, landing a batch when asked."""

    def __init__(self, project: TopologyProject) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.spark_batches", *project.spark_arguments()],
            cwd=REPOSITORY,
            env={k: v for k, v in project.env.items() if not k.startswith("AWS_")},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.expect("ready")

    def expect(self, prefix: str) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith(prefix):
            self.process.kill()
            _, errors = self.process.communicate()
            raise AssertionError(f"the Spark application said {line!r}:\n{errors[-5000:]}")
        return line

    def land(self, batch: int) -> int:
        """Land a batch; the rows of raw.orders afterwards, as Spark reads them."""
        assert self.process.stdin is not None
        self.process.stdin.write(f"{batch}\n")
        self.process.stdin.flush()
        return int(self.expect(f"done {batch}").split()[2])

    def stop(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def bucket_files(endpoint: str) -> list[str]:
    client = boto3.client(
        "s3",
        endpoint_url=f"http://{endpoint}",
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        region_name=REGION,
    )
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def test_spark_lands_in_s3_and_dbt_maintains_from_another_process(tmp_path: Path) -> None:
    started = time.monotonic()
    with postgres_server() as server, s3_server() as endpoint:
        dsn = create_database(server, f"lake_{uuid.uuid4().hex[:12]}")
        project = TopologyProject(tmp_path / "project", dsn, endpoint)
        project.dbt("deps")
        spark = SparkApplication(project)
        try:
            orders = spark.land(1)
            assert orders == 300
            run = project.dbt("run")
            assert set(run.strategies().values()) <= {"initial", "rebuild"}
            tested = project.dbt("test")
            assert {r["status"] for r in tested.results.values()} == {"pass"}

            orders = spark.land(2)
            assert orders == 325
            run = project.dbt("run")
            strategies = run.strategies()
            assert strategies["stg_orders"] == "incremental", run.response("stg_orders")
            assert strategies["stg_payments"] == "incremental", run.response("stg_payments")
            assert {s for m, s in strategies.items() if m not in FALLBACK_MODELS} <= {
                "incremental",
                "unchanged",
            }
        finally:
            spark.stop()
        tested = project.dbt("test")
        assert {r["status"] for r in tested.results.values()} == {"pass"}
        assert_equals_reference(project)

        with project.connect() as con:
            count = con.execute("SELECT count(*) FROM lake.raw.orders").fetchone()
            assert count == (325,)
            paths = con.execute(
                "SELECT path FROM __ducklake_metadata_lake.ducklake_data_file"
            ).fetchall()
        files = bucket_files(endpoint)
        assert any(f.startswith("data/raw/orders/ducklake-spark-") for f in files)
        assert any(f.startswith("data/main/") for f in files)  # the models' own files
        # no partial file, no change set left staged (the empty staging "directory" may stay)
        staged = [f for f in files if "/.tmp-" in f or "_duckstream_staging/" in f.rstrip("/")]
        assert not staged, staged
        assert paths and all(not str(p).startswith("/") for (p,) in paths)
        assert not any(project.directory.rglob("*.parquet"))
    print(f"\ntopology test: {time.monotonic() - started:.0f}s")
