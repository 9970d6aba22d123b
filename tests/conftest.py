"""What the whole session reports: the broker the Kafka tier will run (the header) and, under
pytest-xdist, the brokers its workers ran (the summary; each worker starts its own). Here, not in
``tests/integration/conftest.py``: an xdist controller collects nothing, so it loads only the
conftest files of the test paths, and this one is among them."""

from __future__ import annotations

import pytest

from streambayes.devtools.broker import describe_choice

_from_workers: list[str] = []


def pytest_report_header(config):
    return describe_choice()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """A pytest-xdist worker ended: keep the broker lines its session handed over."""
    _from_workers.extend(getattr(node, "workeroutput", {}).get("integration_brokers", []))


def pytest_terminal_summary(terminalreporter):
    for line in _from_workers:
        terminalreporter.write_line(f"{line} (a worker's)")
