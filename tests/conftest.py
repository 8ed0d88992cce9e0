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
