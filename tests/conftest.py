"""Project-wide pytest configuration.

With HITL_REQUIRE_SERVICES=1 (set by .ci/run) a skipped test or a skipped test module fails
the run instead: CI must never silently skip the tests that need PostgreSQL, a broker or a
browser. Expected failures (xfail) are left alone.
"""

import os
from collections.abc import Callable, Iterator

import pytest

REQUIRE_SERVICES = os.environ.get("HITL_REQUIRE_SERVICES") == "1"


def _skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2])
    return str(longrepr)


def _fail_skip(report: pytest.TestReport | pytest.CollectReport) -> None:
    reason = _skip_reason(report)
    report.outcome = "failed"
    report.longrepr = (
        "HITL_REQUIRE_SERVICES=1: skipped tests fail the run (services must be available).\n"
        f"Skip reason: {reason}"
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> pytest.TestReport:
    report = yield
    if REQUIRE_SERVICES and report.skipped and not hasattr(report, "wasxfail"):
        _fail_skip(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> pytest.CollectReport:
    report = yield
    if REQUIRE_SERVICES and report.skipped:
        _fail_skip(report)
    return report


@pytest.fixture
def register_workflow() -> Iterator[Callable[..., object]]:
    """Register workflows for one test (`register_workflow(workflow)` returns it); they
    are unregistered afterwards."""
    from workflows.registry import registry

    names: list[str] = []

    def register(workflow: object) -> object:
        registry.register(workflow)
        names.append(workflow.name)
        return workflow

    yield register
    for name in names:
        registry.unregister(name)
