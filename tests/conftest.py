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
