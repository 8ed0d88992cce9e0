import pytest
from hypothesis import HealthCheck, settings

from .budget import EXAMPLES
from .crash_report import attach_worker_output
from .harness import fresh_lake

settings.register_profile(
    "ci",
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=False,
)
settings.load_profile("ci")


@pytest.fixture
def lake():
    with fresh_lake() as con:
        yield con


@pytest.fixture(scope="module")
def postgres():
    """A private PostgreSQL server, shared by a module's tests (it starts in seconds)."""
    from .postgres import postgres_server

    with postgres_server() as dsn:
        yield dsn


@pytest.fixture(scope="module")
def spark():
    """A local Spark session, shared by a module's tests (its JVM starts in seconds)."""
    from dbt_duckstream.spark import spark_session

    session = spark_session("local[2]")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def pytest_configure(config):
    worker = getattr(config, "workerinput", None)
    if worker is not None:
        attach_worker_output(worker["workerid"])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Long tests first: pytest-xdist hands out tests in collection order (each
    ``xdist_group`` as one unit), so a long one collected last keeps one worker busy while
    the other idles. The grouped tests (dbt, Spark, catalogs: the longest) go first, then the
    Hypothesis families, then the short tests that even out the end."""

    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("xdist_group") is not None:
            return 0
        return 1 if getattr(getattr(item, "obj", None), "is_hypothesis_test", False) else 2

    items.sort(key=rank)
