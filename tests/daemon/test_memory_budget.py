"""The fleet's memory budget: what servers use (measured, or expected for a new
one) adds up to at most it; idle servers make room; busy ones are named in a
`memory_budget` refusal.  FAKE_HOL_FOOTPRINT_MB=200 makes each fake ~220 MB."""

from __future__ import annotations

import os

import pytest

from holsrv import errors
from holsrv.config.settings import Settings, _total_memory_mb
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, measured_warm, pid_alive, wait_until

BUSY = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")  # checking until edited


def running(daemon) -> dict[str, m.SessionStatus]:
    return {os.path.basename(s.file): s for s in daemon.call(m.Status()).sessions
            if s.state not in ("stopping", "stopped", "dead")}


def test_the_default_budget_leaves_a_quarter_of_the_machine_free():
    budget = Settings().memory_budget_mb
    assert 0 < budget <= _total_memory_mb() * 3 // 4
    assert Settings.from_env({"HOLSRV_MEMORY_BUDGET_MB": "5000"}).memory_budget_mb == 5000


def checking(daemon, path) -> None:
    """Start `path`'s server and return once its LOOP_TAC proof is checking (a ~220 MB fake takes a moment)."""
    daemon.call(m.Diagnostics(str(path), wait=0.5))
    wait_until(lambda: running(daemon)[path.name].tally.checking > 0, 30, "the LOOP_TAC proof to be checking")


@pytest.fixture
def heavy(monkeypatch):
    monkeypatch.setenv("FAKE_HOL_FOOTPRINT_MB", "200")


def test_a_server_past_the_budget_is_refused_naming_the_busy_servers_and_the_ways_out(
    daemon_factory, write_script, heavy
):
    daemon = daemon_factory(memory_budget_mb=300, max_heap_mb=2048, start_footprint_mb=250)
    busy = write_script(BUSY, "busyScript.sml")
    checking(daemon, busy)
    with pytest.raises(errors.MemoryBudget) as refused:
        daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "otherScript.sml")), wait=20))
    message = str(refused.value)
    assert refused.value.code == "memory_budget"
    assert str(busy) in message and "memory budget of 300 MB" in message
    assert "stop FILE" in message and "HOLSRV_MEMORY_BUDGET_MB" in message
    assert list(running(daemon)) == ["busyScript.sml"]  # nothing was stopped for nothing


def test_idle_servers_are_stopped_to_make_memory_room(daemon_factory, write_script, heavy):
    daemon = daemon_factory(memory_budget_mb=300, max_heap_mb=2048, start_footprint_mb=250)
    idle = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "idleScript.sml")), wait=20)).server.pid
    reply = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "newScript.sml")), wait=20))
    assert reply.verdict == "OK"
    wait_until(lambda: not pid_alive(idle), what="the idle server to be stopped for memory")
    assert list(running(daemon)) == ["newScript.sml"]


def test_a_footprint_larger_than_the_cap_counts_against_the_budget(daemon_factory, write_script):
    # Caps of 1 MB would fit ten times over; the fake's real footprint does not.
    daemon = daemon_factory(memory_budget_mb=5, max_heap_mb=1)
    daemon.call(m.Diagnostics(str(write_script(BUSY, "busyScript.sml")), wait=0.5))
    wait_until(lambda: (running(daemon)["busyScript.sml"].footprint_mb or 0) > 5, what="a footprint sample")
    with pytest.raises(errors.MemoryBudget):
        daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "otherScript.sml")), wait=20))


def test_stopping_the_busy_server_makes_room_as_the_refusal_says(daemon_factory, write_script, heavy):
    daemon = daemon_factory(memory_budget_mb=300, max_heap_mb=2048, start_footprint_mb=250)
    busy = write_script(BUSY, "busyScript.sml")
    other = write_script(GOOD_SCRIPT, "otherScript.sml")
    checking(daemon, busy)
    with pytest.raises(errors.MemoryBudget):
        daemon.call(m.Diagnostics(str(other), wait=20))
    daemon.call(m.Stop(str(busy)))
    assert daemon.call(m.Diagnostics(str(other), wait=20)).verdict == "OK"
    assert set(running(daemon)) == {"otherScript.sml"}


def test_status_shows_the_budget_and_what_the_servers_use(daemon_factory, write_script):
    daemon = daemon_factory(memory_budget_mb=3000, max_heap_mb=2048)
    assert daemon.call(m.Status()).memory_used_mb == 0
    daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20))
    measured_warm(daemon)  # until then it counts as at least start_footprint_mb (still loading)
    status = daemon.call(m.Status())
    assert status.memory_budget_mb == 3000
    assert status.memory_used_mb == running(daemon)["demoScript.sml"].footprint_mb  # measured, not its cap
    assert running(daemon)["demoScript.sml"].counted_mb is None  # warm: counted as measured


def test_a_server_still_loading_counts_as_what_a_server_is_expected_to_use(daemon_factory, write_script, monkeypatch):
    # A sample taken before HOL's first compile completes is of a heap still loading (the
    # ~20 MB fake, while real HOL grows to hundreds): it must not let a second server in.
    monkeypatch.setenv("FAKE_HOL_DECL_MS", "2500")  # a compile of several seconds: the test runs inside it
    daemon = daemon_factory(memory_budget_mb=300, max_heap_mb=2048, start_footprint_mb=250)
    slow = write_script(GOOD_SCRIPT, "slowScript.sml")
    daemon.call(m.Diagnostics(str(slow), wait=0.1))
    wait_until(lambda: (running(daemon)["slowScript.sml"].footprint_mb or 0) > 0, 30, "a sample of the loading server")
    row = running(daemon)["slowScript.sml"]
    assert row.footprint_mb < 100 and row.counted_mb == 250  # the sample itself is small; status says so
    with pytest.raises(errors.MemoryBudget):
        daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "otherScript.sml")), wait=20))
