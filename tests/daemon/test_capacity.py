"""Capacity: servers admitted on what they use (their measured footprint, or what
the last one with the same heap cap used), idle ones stopped least recently used
first when the fleet nears the budget, a bloated idle one replaced in the
background, and status saying all of it.

The fake's FAKE_HOL_FOOTPRINT_MB gives each server a loaded heap of a chosen
size; GROW_TAC grows one while it checks, and the fake keeps what it grew.
"""

from __future__ import annotations

import os

import pytest

from holsrv.config import memorylimit
from holsrv.config import settings as settings_module
from holsrv.config.settings import Settings
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, measured_warm, pid_alive, wait_until

BUSY = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")  # checking until edited
GROWING = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "GROW_TAC")  # 50 MB/s while it checks
DEADLINE_S = 60.0


def running(daemon) -> dict[str, m.SessionStatus]:
    return {os.path.basename(s.file): s for s in daemon.call(m.Status()).sessions
            if s.state not in ("stopping", "stopped", "dead")}


def measured(daemon, name: str, above: float = 0.0) -> m.SessionStatus:
    """The status row of `name`'s server once a sample of its footprint is past `above` MB."""

    def past() -> bool:
        row = running(daemon).get(name)
        return row is not None and (row.footprint_mb or 0.0) > above

    wait_until(past, DEADLINE_S, f"a footprint sample of {name} past {above} MB")
    return running(daemon)[name]


def test_a_third_and_a_fourth_server_are_admitted_on_what_the_servers_use(
    daemon_factory, write_script, monkeypatch
):
    # Counted at their heap caps (2048 MB each) only one more would fit in 3000 MB.
    monkeypatch.setenv("FAKE_HOL_FOOTPRINT_MB", "100")
    # A floor near a fake's size: until measured warm a server counts as at least the floor.
    daemon = daemon_factory(memory_budget_mb=3000, max_heap_mb=2048, max_servers=4, start_footprint_mb=250)
    names = [f"s{i}Script.sml" for i in range(4)]
    pids = [daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, name)), wait=30)).server.pid for name in names]
    rows = running(daemon)
    assert sorted(rows) == sorted(names)
    assert [rows[name].pid for name in names] == pids and all(pid_alive(p) for p in pids)
    status = daemon.call(m.Status())
    assert status.memory_used_mb <= 1000 and status.max_heap_mb == 2048  # not counted at their caps


def test_idle_servers_are_stopped_least_recently_used_first_when_the_fleet_nears_the_budget_never_a_busy_one(
    daemon_factory, write_script, monkeypatch
):
    monkeypatch.setenv("FAKE_HOL_FOOTPRINT_MB", "200")  # each server ~220 MB
    # 90% of 1100 MB is 990: four servers fit, and GROW_TAC's growth passes it.
    daemon = daemon_factory(memory_budget_mb=1100, memory_pressure_pct=90, max_heap_mb=1500, max_servers=5,
                            soft_footprint_mb=4096, start_footprint_mb=250)  # ~ a fake's, until measured warm
    busy = daemon.call(m.Diagnostics(str(write_script(BUSY, "busyScript.sml")), wait=0.5)).server.pid
    oldest = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "oldScript.sml")), wait=30)).server.pid
    newer = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "newerScript.sml")), wait=30)).server.pid
    measured(daemon, "newerScript.sml", 200)
    daemon.call(m.Diagnostics(str(write_script(GROWING, "growScript.sml")), wait=0.5))
    wait_until(lambda: not pid_alive(oldest), DEADLINE_S, "the least recently used idle server to be stopped")
    # The next stop needs another ~220 MB of growth, some 4 s at 50 MB/s.
    assert pid_alive(newer) and pid_alive(busy)
    wait_until(lambda: not pid_alive(newer), DEADLINE_S, "the next idle server to be stopped")
    assert pid_alive(busy)
    assert set(running(daemon)) == {"busyScript.sml", "growScript.sml"}


def test_a_bloated_idle_server_is_replaced_in_the_background_with_no_answer_lost(
    daemon_factory, write_script, tmp_path, monkeypatch
):
    gate = tmp_path / "gate"
    gate.touch()
    monkeypatch.setenv("FAKE_HOL_START_GATE", str(gate))
    daemon = daemon_factory(soft_footprint_mb=150, memory_budget_mb=0, max_heap_mb=2048)
    path = write_script(GROWING)
    old = daemon.call(m.Diagnostics(str(path), wait=0.5)).server.pid
    measured(daemon, "demoScript.sml", 150)
    gate.unlink()  # the successor waits at its start while we look
    path.write_text(GOOD_SCRIPT, encoding="utf-8")  # the runaway proof is gone; its memory is not
    assert daemon.call(m.Diagnostics(str(path), wait=30)).verdict == "OK"
    wait_until(lambda: running(daemon)["demoScript.sml"].replacing != "", DEADLINE_S,
               "the bloated server's replacement to start")
    row = running(daemon)["demoScript.sml"]
    assert "past the soft footprint limit" in row.replacing and (row.peak_mb or 0) > 150
    during = daemon.call(m.Diagnostics(str(path), wait=30))
    assert (during.verdict, during.server.pid) == ("OK", old)
    assert any(w.startswith("REPLACING: this HOL server grew to") for w in during.warnings), during.warnings
    gate.touch()
    wait_until(lambda: running(daemon)["demoScript.sml"].pid != old, DEADLINE_S, "the fresh server to take over")
    after = daemon.call(m.Diagnostics(str(path), wait=30))
    assert after.verdict == "OK" and after.server.pid != old
    assert not any(w.startswith("REPLACING") for w in after.warnings)
    wait_until(lambda: not pid_alive(old), DEADLINE_S, "the bloated server to be stopped")


def test_a_busy_bloated_server_is_not_replaced(daemon_factory, write_script):
    daemon = daemon_factory(soft_footprint_mb=100, memory_budget_mb=0, max_heap_mb=2048)
    old = daemon.call(m.Diagnostics(str(write_script(GROWING)), wait=0.5)).server.pid
    row = measured(daemon, "demoScript.sml", 150)  # past the soft limit, and still checking GROW_TAC
    assert (row.pid, row.replacing, row.large) == (old, "", True)


@pytest.mark.parametrize(("budget", "fit_before", "fit_after"), [(0, 4, 3), (5000, 4, 3), (400, 0, 2)])
def test_status_says_what_the_fleet_uses_how_many_more_fit_and_each_servers_peak(
    daemon_factory, write_script, monkeypatch, budget, fit_before, fit_after
):
    # 400 MB: no server of the 700 MB floor fits, two more of the ~120 MB measured do.
    monkeypatch.setenv("FAKE_HOL_FOOTPRINT_MB", "100")
    daemon = daemon_factory(memory_budget_mb=budget, max_heap_mb=2048, max_servers=4, start_footprint_mb=700)
    before = daemon.call(m.Status())
    assert (before.memory_used_mb, before.usual_footprint_mb, before.servers_fit) == (0, 700, fit_before)
    assert before.max_heap_mb == 2048 and before.memory_budget_source == "set"
    daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=30))
    row = measured(daemon, "demoScript.sml", 100)
    measured_warm(daemon)  # until then it counts as at least the floor (still loading)
    status = daemon.call(m.Status())
    assert row.peak_mb is not None and row.peak_mb >= row.footprint_mb > 100
    assert 100 < status.memory_used_mb < 700 and 100 < status.usual_footprint_mb < 700  # measured, not the floor
    assert status.servers_fit == fit_after  # max_servers binds before 5000 MB does


def cgroup_tree(root, path: str, limits: dict[str, dict[str, str]]):
    """A cgroup v2 tree under `root` with `limits` ({group: {file: content}}), and a
    /proc/self/cgroup that puts this process in `path`."""
    for group, files in limits.items():
        directory = root.joinpath(*[p for p in group.split("/") if p])
        directory.mkdir(parents=True, exist_ok=True)
        for name, content in files.items():
            (directory / name).write_text(content + "\n")
    proc = root / "proc-self-cgroup"
    proc.write_text(f"1:name=systemd:/legacy\n0::{path}\n")
    return root, proc


MB = 1024 * 1024


def test_the_budget_of_the_box_comes_from_the_tightest_cgroup_limit_over_the_daemon(tmp_path):
    root, proc = cgroup_tree(tmp_path, "/user.slice/holsrv.service", {
        "/": {"memory.max": "max"},  # the root: no limit
        "/user.slice": {"memory.max": str(12288 * MB), "memory.high": "max"},
        "/user.slice/holsrv.service": {"memory.max": str(8192 * MB), "memory.high": str(6144 * MB)},
    })
    box = memorylimit.of_box(root, proc, machine=24576)
    assert box == memorylimit.MemoryLimit(6144, "cgroup memory.high of /user.slice/holsrv.service")
    assert settings_module.default_memory_budget_mb(box.mb) == 4608


def test_without_a_cgroup_limit_the_budget_is_the_machines(tmp_path):
    root, proc = cgroup_tree(tmp_path, "/user.slice", {"/user.slice": {"memory.max": "max"}})
    assert memorylimit.of_box(root, proc, machine=16384) == memorylimit.MemoryLimit(16384, "machine memory")
    assert memorylimit.of_box(tmp_path / "none", tmp_path / "no-proc", machine=16384).source == "machine memory"
    # A limit above the machine's memory does not raise it.
    root, proc = cgroup_tree(tmp_path / "big", "/c", {"/c": {"memory.max": str(65536 * MB)}})
    assert memorylimit.of_box(root, proc, machine=16384).mb == 16384


def test_status_says_where_the_default_budget_came_from():
    box = memorylimit.here()
    assert Settings().budget_source() == f"default: 75% of {box.source} ({box.mb} MB)"
    chosen = Settings.from_env({"HOLSRV_MEMORY_BUDGET_MB": "5000"})
    assert chosen.budget_source() == "environment HOLSRV_MEMORY_BUDGET_MB"


@pytest.mark.parametrize("total_mb", [24576, 16384])
def test_the_defaults_run_max_servers_ordinary_servers_and_a_replacement_on_24_and_at_least_four_on_16_gib(
    total_mb,
):
    servers = settings_module.default_max_servers(total_mb)
    budget = settings_module.default_memory_budget_mb(total_mb)
    floor = Settings().start_footprint_mb  # what a server is counted at before any is measured
    assert (servers + 1) * floor <= budget * Settings().memory_pressure_pct / 100
    assert min(servers, budget // floor) >= 4
    if total_mb == 24576:
        assert servers == 8
