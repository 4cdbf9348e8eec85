"""A server whose ancestor was rebuilt is replaced in the background.

The old server answers, every answer marked stale, until its successor has
caught up; then the successor answers unmarked and the old process is gone.
Where the limits cannot hold both, the answer says so and advises restart.
The fake's FAKE_HOL_START_GATE holds a successor's start for as long as a
test looks at the overlap.
"""

from __future__ import annotations

import json
import os
import re

import pytest
import test_real_hol
import test_real_holmake

from holsrv.config.settings import Settings
from holsrv.rpc import messages as m

from conftest import measured_warm, pid_alive, wait_until

# The real HOL4 and its Holmake, or a skip saying how to provide them.
real_hol = test_real_hol.real_hol
holmake = test_real_holmake.holmake

SCRIPT = """\
Theory demo
Ancestors mylib

Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED
"""

GOOD = SCRIPT.replace("Ancestors mylib\n", "")  # another file, needing no build
EDITED = SCRIPT.replace("gen_tac >> simp[]", 'FAIL_TAC "edited"')
SWITCH_DEADLINE_S = 30.0


def stale(reply: m.DiagnosticsResult) -> list[str]:
    return [w for w in reply.warnings if w.startswith(("STALE", "REBUILT"))]


@pytest.fixture
def project(tmp_path, write_script, monkeypatch):
    """The script, its built ancestor mylibTheory.uo, and an open start gate."""
    gate = tmp_path / "gate"
    gate.touch()
    monkeypatch.setenv("FAKE_HOL_START_GATE", str(gate))
    built = tmp_path / "mylibTheory.uo"
    built.write_text("built")
    os.utime(built, (1000, 1000))
    return write_script(SCRIPT), built, gate


def diagnostics(daemon, path, wait: float = 30.0) -> m.DiagnosticsResult:
    return daemon.call(m.Diagnostics(file=str(path), wait=wait))


def rebuild(built) -> None:
    os.utime(built, (2000, 2000))  # what Holmake leaves: a newer artefact


def successor(daemon) -> int:
    """The pid of the server replacing the file's, once it has spawned."""
    wait_until(lambda: daemon.call(m.Status()).sessions[0].replacement_pid is not None, SWITCH_DEADLINE_S,
               "the successor to spawn")
    pid = daemon.call(m.Status()).sessions[0].replacement_pid
    assert pid is not None
    return pid


def switched(daemon, old_pid: int) -> None:
    wait_until(lambda: daemon.call(m.Status()).sessions[0].pid != old_pid, SWITCH_DEADLINE_S,
               "the fresh server to take over")


def test_the_old_server_answers_marked_stale_until_its_successor_takes_over(daemon, project):
    path, built, gate = project
    first = diagnostics(daemon, path)
    assert first.verdict == "OK" and stale(first) == []
    old_pid = first.server.pid

    gate.unlink()  # the successor's start waits here
    rebuild(built)
    during = diagnostics(daemon, path)
    assert during.verdict == "OK" and during.server.pid == old_pid and during.server.start == "warm"
    assert stale(during) == [m for m in during.warnings if m.startswith("STALE: ancestor mylibTheory was rebuilt")]
    assert stale(during) and "in the background and takes over by itself" in stale(during)[0]
    new_pid = successor(daemon)
    row = daemon.call(m.Status()).sessions
    assert len(row) == 1 and row[0].pid == old_pid and new_pid != old_pid
    assert row[0].replacing == "ancestor mylibTheory rebuilt; the new server is starting"
    assert pid_alive(new_pid) and diagnostics(daemon, path).server.pid == old_pid  # still the old one

    gate.touch()
    switched(daemon, old_pid)
    after = diagnostics(daemon, path)
    assert after.server.pid == new_pid and after.verdict == "OK" and stale(after) == []
    wait_until(lambda: not pid_alive(old_pid), SWITCH_DEADLINE_S, "the replaced server to exit")
    status = daemon.call(m.Status()).sessions
    assert [(s.pid, s.replacing) for s in status] == [(new_pid, "")]


def test_a_stale_sentence_says_in_words_that_the_successor_is_still_starting(daemon, project):
    path, built, gate = project
    old_pid = diagnostics(daemon, path).server.pid
    gate.unlink()  # the successor's start waits here
    rebuild(built)
    [said] = stale(diagnostics(daemon, path))
    assert "pid starting" not in said and "pid None" not in said
    assert re.search(r"a fresh server (\(pid \d+\) )?is starting", said), said
    new_pid = successor(daemon)
    [said] = stale(diagnostics(daemon, path))
    assert f"a fresh server (pid {new_pid}) is starting (loading its heap) in the background" in said
    gate.touch()
    switched(daemon, old_pid)


def test_an_edit_during_the_overlap_reaches_both_servers(daemon, project):
    path, built, gate = project
    old_pid = diagnostics(daemon, path).server.pid
    gate.unlink()
    rebuild(built)
    assert stale(diagnostics(daemon, path))  # the successor is starting

    path.write_text(EDITED)
    during = diagnostics(daemon, path)
    assert during.server.pid == old_pid and during.verdict == "FAILED" and stale(during)
    gate.touch()
    switched(daemon, old_pid)
    after = diagnostics(daemon, path)
    assert after.server.pid != old_pid and stale(after) == []
    assert after.verdict == "FAILED" and after.content_hash == during.content_hash


def test_an_edit_while_the_successor_compiles_is_forwarded_to_it(daemon, project, tmp_path, monkeypatch):
    path, built, _ = project
    old_pid = diagnostics(daemon, path).server.pid
    # For the successor only (it reads them when it spawns): its compile waits
    # on `compiling`, and what it is sent goes to `wire`.
    compiling, wire = tmp_path / "compile-gate", tmp_path / "successor.jsonl"
    monkeypatch.setenv("FAKE_HOL_COMPILE_GATE", str(compiling))
    monkeypatch.setenv("FAKE_HOL_LOG", str(wire))
    rebuild(built)
    assert stale(diagnostics(daemon, path, wait=1.0))
    wait_until(lambda: daemon.call(m.Status()).sessions[0].replacing.endswith("catching up"), SWITCH_DEADLINE_S,
               "the successor to open the file")

    path.write_text(EDITED)
    during = diagnostics(daemon, path)
    assert during.server.pid == old_pid and during.verdict == "FAILED" and stale(during)
    wait_until(lambda: wire.exists() and any(_sent_text(line) == EDITED for line in wire.read_text().splitlines()),
               SWITCH_DEADLINE_S, "the edit to reach the successor")
    compiling.touch()
    switched(daemon, old_pid)
    after = diagnostics(daemon, path)
    assert after.verdict == "FAILED" and after.content_hash == during.content_hash and stale(after) == []


def _sent_text(line: str) -> str | None:
    """The text a didChange the fake received carries."""
    entry = json.loads(line)
    msg = entry["msg"]
    if entry["dir"] != "C->S" or msg.get("method") != "textDocument/didChange":
        return None
    return msg["params"]["contentChanges"][0]["text"]


def test_a_rebuild_replaces_the_server_with_no_call_once_the_build_is_left_alone(daemon, project):
    path, built, _ = project
    old_pid = diagnostics(daemon, path).server.pid
    os.utime(built)  # Holmake wrote it just now: it may not have finished
    waiting = diagnostics(daemon, path)
    assert waiting.server.pid == old_pid
    assert [w for w in stale(waiting) if "starts in the background once the build has been left alone" in w]
    # No call from here on: the directory watch and the quiet period do it.
    switched(daemon, old_pid)
    after = diagnostics(daemon, path)
    assert after.server.pid != old_pid and after.verdict == "OK" and stale(after) == []


def test_a_rebuild_is_noticed_through_the_directory_watch_with_no_call(daemon, project):
    path, built, _ = project
    old_pid = diagnostics(daemon, path).server.pid
    rebuild(built)
    switched(daemon, old_pid)  # status only: no call reads the file or its ancestors
    wait_until(lambda: not pid_alive(old_pid), SWITCH_DEADLINE_S, "the replaced server to exit")


def test_a_successor_that_cannot_load_the_build_never_takes_over(daemon, project):
    path, built, gate = project
    old_pid = diagnostics(daemon, path).server.pid
    gate.unlink()
    rebuild(built)
    diagnostics(daemon, path)
    new_pid = successor(daemon)
    built.unlink()  # Holmake is half way: the successor finds no mylibTheory
    gate.touch()
    wait_until(lambda: not pid_alive(new_pid), SWITCH_DEADLINE_S, "the blocked successor to be stopped")
    [row] = daemon.call(m.Status()).sessions
    assert (row.pid, row.replacing, row.last_verdict) == (old_pid, "", "OK")  # the old one keeps its build

    built.write_text("built again")
    os.utime(built, (3000, 3000))  # a new build: worth another try
    assert stale(diagnostics(daemon, path))
    switched(daemon, old_pid)
    assert stale(diagnostics(daemon, path)) == []


@pytest.mark.parametrize(
    ("limits", "why"),
    [
        (dict(memory_budget_mb=300), "of the memory budget of 300 MB are held"),
        (dict(max_servers=1), "the limit of 1 HOL servers"),
    ],
    ids=["memory-budget", "max-servers"],
)
def test_without_room_for_a_second_server_the_answer_says_why_and_advises_restart(
    daemon_factory, project, limits, why, monkeypatch
):
    path, built, _ = project
    monkeypatch.setenv("FAKE_HOL_FOOTPRINT_MB", "200")  # each server uses ~220 MB: two do not fit in 300
    daemon = daemon_factory(**limits)
    old_pid = diagnostics(daemon, path).server.pid
    # Room is judged on sampled memory: wait (bounded) until the pool has seen this server's ~220 MB
    # (a sample taken while the fake still allocates is smaller).
    wait_until(lambda: (daemon.call(m.Status()).sessions[0].footprint_mb or 0) >= 200, 30,
               "the pool's memory sample of the server's 200 MB")
    rebuild(built)
    reply = diagnostics(daemon, path)
    assert reply.server.pid == old_pid
    [warning] = stale(reply)
    assert warning.startswith("REBUILT: mylibTheory changed after this HOL server loaded it")
    assert "not replaced in the background: no room" in warning and why in warning
    assert warning.endswith("Call restart to use the new build.")
    assert "none is idle to stop: demoScript.sml" in warning  # what holds the room
    assert [(s.pid, s.replacing) for s in daemon.call(m.Status()).sessions] == [(old_pid, "")]


@pytest.mark.parametrize(
    "limits", [dict(max_servers=2), dict(memory_budget_mb=500)], ids=["max-servers", "memory-budget"]
)
def test_a_replacement_makes_room_by_stopping_the_least_recently_used_idle_server(
    daemon_factory, project, write_script, limits, monkeypatch
):
    path, built, _ = project
    monkeypatch.setenv("FAKE_HOL_FOOTPRINT_MB", "200")  # three servers of ~220 MB do not fit in 500
    daemon = daemon_factory(**limits)
    idle = diagnostics(daemon, write_script(GOOD, "idleScript.sml")).server.pid
    old_pid = diagnostics(daemon, path).server.pid
    measured_warm(daemon, SWITCH_DEADLINE_S)  # until then each counts as at least the 1024 MB floor
    rebuild(built)
    assert stale(diagnostics(daemon, path))
    wait_until(lambda: not pid_alive(idle), SWITCH_DEADLINE_S, "the idle server to be stopped for the successor")
    wait_until(lambda: [s.pid for s in daemon.call(m.Status()).sessions if s.file == str(path)] != [old_pid],
               SWITCH_DEADLINE_S, "the fresh server to take over")
    reply = diagnostics(daemon, path)
    assert stale(reply) == [] and reply.server.pid != old_pid and reply.verdict == "OK"


def test_a_successor_takes_over_at_once_when_the_old_server_dies(daemon, project, monkeypatch):
    path, built, _ = project
    old_pid = diagnostics(daemon, path).server.pid
    monkeypatch.setenv("FAKE_HOL_DECL_MS", "60000")  # the successor's compile: it stays catching up
    rebuild(built)
    diagnostics(daemon, path, wait=1.0)
    wait_until(lambda: daemon.call(m.Status()).sessions[0].replacing.endswith("catching up"), SWITCH_DEADLINE_S,
               "the successor to start")
    new_pid = successor(daemon)
    os.kill(old_pid, 9)
    wait_until(lambda: daemon.call(m.Status()).sessions[0].state == "dead", SWITCH_DEADLINE_S,
               "the daemon to see the old server die")
    after = diagnostics(daemon, path, wait=0.5)
    assert after.server.pid == new_pid and "answers now, and may still be catching up" in after.server.note
    assert stale(after) == []
    assert [s.pid for s in daemon.call(m.Status()).sessions] == [new_pid]


def test_restart_during_a_replacement_stops_the_successor_too(daemon, project, tmp_path, monkeypatch):
    path, built, _ = project
    old_pid = diagnostics(daemon, path).server.pid
    monkeypatch.setenv("FAKE_HOL_COMPILE_GATE", str(tmp_path / "shut"))  # the successor stays catching up
    rebuild(built)
    diagnostics(daemon, path, wait=1.0)
    wait_until(lambda: daemon.call(m.Status()).sessions[0].replacing.endswith("catching up"), SWITCH_DEADLINE_S,
               "the successor to open the file")
    new_pid = successor(daemon)
    reply = daemon.call(m.Restart(file=str(path)))
    # A restart is a fresh server, not the successor (with the build it saw when it started).
    assert reply.old_pid == old_pid and reply.new_pid not in (old_pid, new_pid)
    wait_until(lambda: not pid_alive(new_pid) and not pid_alive(old_pid), SWITCH_DEADLINE_S,
               "both earlier servers to exit")
    assert [(s.pid, s.replacing) for s in daemon.call(m.Status()).sessions] == [(reply.new_pid, "")]


# -- against a real HOL4 (skipped without one) -------------------------------

LIB = """\
Theory lib

Theorem lib_thm:
  T
Proof
  simp[]
QED
"""

USER = """\
Theory user
Ancestors lib

Theorem uses_lib:
  T
Proof
  ACCEPT_TAC lib_thm
QED
"""


def test_after_holmake_rebuilds_an_ancestor_the_dependent_scripts_server_is_replaced(
    daemon_factory, tmp_path, real_hol, holmake
):
    daemon = daemon_factory(hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120,
                            stop_timeout_s=10, memory_budget_mb=0)
    (tmp_path / "libScript.sml").write_text(LIB)
    user = tmp_path / "userScript.sml"
    user.write_text(USER)
    assert test_real_holmake._run_holmake(holmake, tmp_path).status == 0
    first = daemon.call(m.Diagnostics(str(user), wait=test_real_hol.WAIT_S), test_real_hol.CALL_TIMEOUT_S)
    assert first.verdict == "OK" and stale(first) == []

    # A second theorem in lib, built: only a new server can use it.
    (tmp_path / "libScript.sml").write_text(LIB + "\nTheorem lib_two:\n  T /\\ T\nProof\n  simp[]\nQED\n")
    assert test_real_holmake._run_holmake(holmake, tmp_path).status == 0
    during = daemon.call(m.Diagnostics(str(user), wait=5.0), test_real_hol.CALL_TIMEOUT_S)
    assert during.server.pid == first.server.pid and any("libTheory" in w for w in stale(during))
    wait_until(lambda: daemon.call(m.Status()).sessions[0].pid != first.server.pid, test_real_hol.CALL_TIMEOUT_S,
               "the fresh server to take over")

    user.write_text(USER + "\nTheorem uses_new:\n  T /\\ T\nProof\n  ACCEPT_TAC lib_two\nQED\n")
    after = daemon.call(m.Diagnostics(str(user), wait=test_real_hol.WAIT_S), test_real_hol.CALL_TIMEOUT_S)
    assert after.server.pid != first.server.pid and stale(after) == []
    assert after.verdict == "OK", after.headline
    wait_until(lambda: not pid_alive(first.server.pid), 60.0, "the replaced server to exit")


def test_on_defaults_a_rebuilt_ancestor_is_replaced_in_the_background_while_another_files_server_stays_warm(
    daemon_factory, project, write_script
):
    path, built, _ = project
    defaults = Settings()  # the heap cap, budget and count this machine gets by default
    daemon = daemon_factory(max_servers=defaults.max_servers, max_heap_mb=defaults.max_heap_mb,
                            memory_budget_mb=defaults.memory_budget_mb)
    warm = diagnostics(daemon, write_script(GOOD, "warmScript.sml")).server.pid
    old_pid = diagnostics(daemon, path).server.pid
    rebuild(built)
    assert stale(diagnostics(daemon, path))
    wait_until(lambda: [s.pid for s in daemon.call(m.Status()).sessions if s.file == str(path)] != [old_pid],
               SWITCH_DEADLINE_S, "the fresh server to take over")
    assert stale(diagnostics(daemon, path)) == []
    again = diagnostics(daemon, write_script(GOOD, "warmScript.sml"))
    assert (again.server.pid, again.server.start) == (warm, "warm")
