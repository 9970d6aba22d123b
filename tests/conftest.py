"""What the whole session reports: the broker the Kafka tier will run (the header) and, under
pytest-xdist, the brokers its workers ran (the summary; each worker starts its own). Here, not in
``tests/integration/conftest.py``: an xdist controller collects nothing, so it loads only the
conftest files of the test paths, and this one is among them.

And the order of the tests: the long ones (``LONG``) first, and under pytest-xdist handed out one
at a time (``--maxschedchunk=1`` unless given), so that two workers share them rather than one of
them finishing a long test alone at the end. xdist's first hand-out is two tests per worker, so
the second and third longest trade places: the two longest go to different workers. The tests
and their results are the same in any order; only the wall time of the tier changes.
"""

from __future__ import annotations

import pytest

from streambayes.devtools.broker import describe_choice

_from_workers: list[str] = []

# Tests of 10 s or more on a 2-core machine (seconds measured there; a node id containing the key).
# Longest first; every test not listed keeps its place after them.
LONG = {
    "test_broker_faults.py::test_learners_ride_out_broker_restarts_and_a_stall": 80,
    "test_learn_letters.py::test_kill_9_exactly_one_dead_letter_per_bad_record": 25,
    "test_crash.py::test_kill_9_mid_stream_loses_and_doubles_nothing": 27,
    "test_river_conformance.py::test_river_check_estimator_passes": 12,
    "test_perkey_memory.py::test_many_keys_keep_the_live_learners": 14,
    "test_exactly_once.py::test_kill_9_exactly_once_posteriors": 18,
    "test_group_learn.py::test_three_learners_killed_and_started_equal_one_learner": 20,
    "test_backends.py::test_a_source_waits_while_the_broker_is_down_and_reconnects": 17,
    "test_local_broker.py::test_the_same_broker_restarts_after_sigkill_on_its_port": 17,
    "test_backends.py::test_a_kafka_python_member_left_without_partitions": 15,
    "test_backends.py::test_a_kafka_python_group_assigned_without_metadata_joins_again": 11,
    "test_pipeline.py::test_replay_from_topic_by_offsets_and_time": 10,
    "test_kafka_python_join.py::test_a_static_member_is_not_checked": 9,
    "test_bounds.py::test_many_distinct_field_names_cost_memory_in_proportion": 9,
}


def _seconds(item) -> float:
    return next((s for key, s in LONG.items() if key in item.nodeid), 0.0)


def pytest_configure(config):
    if getattr(config.option, "maxschedchunk", "absent") is None:  # pytest-xdist's, not set
        config.option.maxschedchunk = 1


def pytest_collection_modifyitems(items):
    items.sort(key=_seconds, reverse=True)  # stable: the rest keep their order
    if len(items) > 2 and _seconds(items[2]):
        items[1], items[2] = items[2], items[1]


def pytest_report_header(config):
    return describe_choice()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """A pytest-xdist worker ended: keep the broker lines its session handed over."""
    _from_workers.extend(getattr(node, "workeroutput", {}).get("integration_brokers", []))


def pytest_terminal_summary(terminalreporter):
    for line in _from_workers:
        terminalreporter.write_line(f"{line} (a worker's)")
