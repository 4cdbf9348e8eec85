"""The portable fallbacks of every Linux-only facility (`holsrv.facilities`), run here on Linux.

Each test turns the Linux facilities off as `HOLSRV_PORTABLE=1` does (the
module's `PORTABLE`, read once at import, set for the test), makes the Linux
way fail loudly where it could still be reached, and checks what a user
relies on: a written script is answered, a server's memory is measured, its
exit is seen, a client is served and told how it is checked, the budget is
the machine's.  The daemon-death case, which needs a daemon process of its
own, is `test_watchdog`'s, run in both modes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import struct
import subprocess
import sys

import psutil
import pytest

from holctl.render import render
from holsrv import facilities
from holsrv.config import memorylimit
from holsrv.disk import files, inotify, statpoll
from holsrv.process import footprint
from holsrv.process.process import ChildProcess, ProcessState
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, client_messages, wait_until

NO_CHECK = "no check possible: the private socket directory is the guard"


@pytest.fixture
def portable(monkeypatch):
    monkeypatch.setattr(facilities, "PORTABLE", True)


def _refuse(what: str):
    def refused(*args, **kwargs):
        raise AssertionError(f"{what} used in portable mode")
    return refused


def test_every_concern_names_its_fallback_in_portable_mode(portable):
    assert facilities.described() == {
        "file watching": f"stat poll (every {facilities.STAT_POLL_S:g}s)",
        "process footprint": "psutil",
        "exit watch": "polling",
        "parent death": "polling",
        "peer credentials": "LOCAL_PEERCRED" if hasattr(socket, "LOCAL_PEERCRED") else NO_CHECK,
        "memory budget": "machine memory",
        "socket path": "at most 103 bytes",
        "service manager": "systemd",
        "portable mode": "on",
    }


def test_without_inotify_a_written_script_reaches_hol_with_no_call_through_the_stat_poll(
    portable, daemon_factory, write_script, monkeypatch, tmp_path
):
    monkeypatch.setattr(inotify.Watcher, "__init__", _refuse("inotify"))
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    daemon = daemon_factory()
    path = write_script(GOOD_SCRIPT)
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "OK"
    broken = GOOD_SCRIPT.replace("gen_tac >> simp[]", 'FAIL_TAC "no"')
    path.write_text(broken, encoding="utf-8")
    wait_until(lambda: broken in _changes(log), 30, "the written text in a didChange, with no call")
    assert daemon.daemon.pool.scriptwatch.syncs == 1
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert after.content_hash == files.content_hash(path.read_bytes()) and after.verdict != "OK"
    assert _changes(log) == [broken]  # the call found it synced: nothing sent twice


def test_the_stat_poll_takes_a_newly_watched_script_in_as_it_is_not_as_a_write(
    portable, daemon_factory, write_script
):
    daemon = daemon_factory()
    path = write_script(GOOD_SCRIPT)
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "OK"
    watch = daemon.daemon.pool.scriptwatch
    assert path.resolve() in daemon.run(_watching(watch))
    rounds = statpoll.shared.rounds
    wait_until(lambda: statpoll.shared.rounds >= rounds + 2, 30, "two looks of the stat poll")
    assert watch._writes == {}  # nothing read again, nothing synced, for a file no one wrote


async def _watching(watch) -> set:
    return watch.watching()


def _changes(log) -> list[str]:
    return [msg["params"]["contentChanges"][0]["text"] for msg in client_messages(log, "textDocument/didChange")]


@pytest.mark.asyncio
async def test_without_proc_the_footprint_of_a_server_and_its_children_comes_from_psutil(
    portable, monkeypatch, tmp_path
):
    monkeypatch.setattr(footprint, "held_bytes", _refuse("/proc/PID/status"))
    monkeypatch.setattr(footprint, "descendants", _refuse("/proc children lists"))
    holding = "held = bytearray(40 << 20); held[::4096] = b'x' * len(held[::4096]); print('ready', flush=True); "
    program = f"import subprocess, sys; {holding}subprocess.run([sys.executable, '-c', \"{holding}input()\"])"
    child = ChildProcess("family", stderr_lines=10, stop_timeout_s=5)
    stdout, stdin = await child.spawn([sys.executable, "-c", program], str(tmp_path), dict(os.environ))
    try:
        for _ in range(2):  # the program, then its child
            assert (await asyncio.wait_for(stdout.readline(), 60)).startswith(b"ready")
        measured = child.footprint_mb()
        assert measured is not None and measured > 80  # both 40 MB, and the watchdog
        members = [psutil.Process(child.pid), *psutil.Process(child.pid).children(recursive=True)]
        assert len(members) == 3
        assert abs(measured - sum(p.memory_info().rss for p in members) / 2**20) < 16
    finally:
        stdin.close()
        await child.stop()
        async with asyncio.timeout(30):
            await stdout.read()


@pytest.mark.asyncio
async def test_without_pidfds_a_watchdog_killed_on_its_own_is_seen_to_exit_while_its_server_holds_the_pipes(
    portable, monkeypatch, tmp_path
):
    monkeypatch.setattr(os, "pidfd_open", _refuse("pidfd_open"), raising=False)
    child = ChildProcess("orphaned", stderr_lines=10, stop_timeout_s=5)
    # The server ignores SIGTERM and keeps stdout: `wait()` would wait for it for ever.
    stdout, _stdin = await child.spawn(
        ["sh", "-c", "trap '' TERM; echo ready; exec sleep 600"], str(tmp_path), dict(os.environ))
    assert (await asyncio.wait_for(stdout.readline(), 60)).startswith(b"ready")
    assert child.pid is not None
    os.kill(child.pid, signal.SIGKILL)  # the watchdog alone
    assert await child.wait_exit(30), "the watchdog's exit was never seen"
    assert child.state is ProcessState.DEAD and "exited" in child.exit_reason
    async with asyncio.timeout(30):  # the server went with its group
        await stdout.read()


def test_without_so_peercred_a_client_is_served_and_status_says_no_check_is_possible(
    portable, daemon, monkeypatch
):
    monkeypatch.delattr(socket, "LOCAL_PEERCRED", raising=False)
    daemon.daemon.connections.owner_uid = os.getuid() + 1  # a check would refuse us
    reply = daemon.call(m.Status())
    assert isinstance(reply, m.StatusResult)
    assert reply.facilities["peer credentials"] == NO_CHECK
    assert f"peer credentials: {NO_CHECK}" in render(reply)  # `holctl status` says it


def test_local_peercred_gives_the_peers_uid_where_the_system_has_it(portable, monkeypatch):
    monkeypatch.setattr(socket, "LOCAL_PEERCRED", 1, raising=False)
    xucred = struct.pack("2Ih16I", 0, 4242, 1, *([20] + [0] * 15))

    class Peer:
        def getsockopt(self, level, option, size):
            assert option == 1 and size >= len(xucred)
            return xucred

    assert facilities.peer_credentials(Peer()) == (None, 4242)  # type: ignore[arg-type]
    assert facilities.peer_check() == "LOCAL_PEERCRED"


def test_without_cgroups_the_memory_budget_is_the_machines_memory(portable, monkeypatch):
    monkeypatch.setattr(memorylimit, "of_box", _refuse("the cgroup tree"))
    monkeypatch.setattr(memorylimit, "cgroup_limits", _refuse("the cgroup tree"))
    memorylimit.here.cache_clear()
    try:
        box = memorylimit.here()
    finally:
        memorylimit.here.cache_clear()
    assert box == memorylimit.MemoryLimit(psutil.virtual_memory().total // 2**20, "machine memory")


def test_the_portable_switch_is_read_from_the_environment():
    said = subprocess.run(
        [sys.executable, "-c", "from holsrv import facilities; print(facilities.described()['parent death'])"],
        env={**os.environ, facilities.PORTABLE_ENV: "1"}, capture_output=True, text=True, timeout=60)
    assert said.stdout.strip() == "polling", said.stderr
