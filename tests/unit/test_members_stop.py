"""The kill harnesses' :class:`~streambayes.devtools.group_kills.Members`: SIGTERM only once a
member listens for it, and a member that does not stop is made to say where it hangs."""

from __future__ import annotations

import sys

import pytest

from streambayes.devtools.group_kills import Members

LISTENS = ("import signal, sys, time\n"
           "signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))\n"
           "time.sleep(0.5)\n"  # SIGTERM comes only now, once the handler is in
           "print('up', flush=True)\n"
           "time.sleep(120)\n")
DEAF = ("import signal, time\n"
        "signal.signal(signal.SIGTERM, lambda *a: None)\n"
        "def stuck_here():\n"
        "    time.sleep(120)\n"
        "stuck_here()\n")


def test_a_member_that_listens_stops_with_status_0(tmp_path):
    group = Members([sys.executable, "-c", LISTENS], {}, tmp_path / "log")
    group.start()
    group.stop(60)  # raises on a non-zero status
    assert group.live == []


def test_a_member_that_does_not_stop_dumps_its_stack(tmp_path):
    group = Members([sys.executable, "-c", DEAF], {}, tmp_path / "log")
    group.start()
    with pytest.raises(RuntimeError, match="did not stop within 1 s of SIGTERM") as caught:
        group.stop(1)
    assert "stuck_here" in str(caught.value)  # faulthandler's dump, shown in the error
    group.close()


def test_a_member_that_never_listens_is_found_hung_with_its_stack(tmp_path):
    """SIGTERM ignored (no handler is ever installed): after the timeout it is sent anyway,
    then SIGABRT, and the error still carries the stack."""
    deaf = DEAF.replace("lambda *a: None", "signal.SIG_IGN")
    group = Members([sys.executable, "-c", deaf], {}, tmp_path / "log")
    group.start()
    with pytest.raises(RuntimeError, match="did not stop within 1 s") as caught:
        group.stop(1)
    assert "stuck_here" in str(caught.value)
    assert group.live == []
