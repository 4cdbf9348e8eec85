"""`restart-daemon` against a real HOL4: HOL's own rich_listScript.sml is answered at once after it.

Runs only where a real HOL4 is found (HOL_BIN, $HOLDIR/bin/hol, or `hol` on
PATH) with its sources beside it, and is skipped otherwise.  The daemon is a
process of its own (its `exec` would replace pytest); it and every process it
started are killed by pid at the end, should they survive.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from holsrv import errors
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages as m

from conftest import find_real_hol, wait_until

# A cold check of rich_list takes 10 s and more (a heap load, then 563 proofs); minutes on a slow machine.
FIRST_WAIT_S = 1800.0
# After the restart the answer must come from what the adopted server had said: an answer that
# had to wait for a re-check would not be complete within this.
AFTER_WAIT_S = 1.0


@pytest.fixture
def rich_list(tmp_path) -> tuple[str, Path]:
    """The real `hol` and a copy of HOL's rich_listScript.sml, or skip saying what is missing."""
    hol = find_real_hol()
    resolved = Path(hol).resolve()
    source = resolved.parent.parent / "src" / "list" / "src" / "rich_listScript.sml"
    if not source.exists():
        pytest.skip(f"no {source}: the HOL found has no sources beside it")
    path = tmp_path / "rich_list" / "rich_listScript.sml"
    path.parent.mkdir()
    shutil.copyfile(source, path)
    return hol, path


def test_rich_list_is_answered_from_the_adopted_server_right_after_restart_daemon(rich_list, short_tmp):
    hol, path = rich_list
    sock = short_tmp / "r.sock"
    read_fd, write_fd = os.pipe()
    daemon = subprocess.Popen(
        [sys.executable, "-m", "holsrv", "--socket", str(sock), "--ready-fd", str(write_fd),
         "--log-file", str(short_tmp / "daemon.log")],
        pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env={**os.environ, "HOL_BIN": hol},
    )
    os.close(write_fd)
    tree: list[psutil.Process] = []

    def call(request: m.Request, timeout: float = FIRST_WAIT_S + 120):
        with rpc_client.connect(sock, name="test", autostart=False) as client:
            return client.call(request, timeout)

    try:
        with os.fdopen(read_fd, "rb") as ready:
            assert select.select([ready], [], [], 60)[0], "the daemon never said it was ready"
        first = call(m.Diagnostics(str(path), wait=FIRST_WAIT_S))
        if not first.complete:
            pytest.skip(f"rich_list's first check did not settle within {FIRST_WAIT_S:g}s: {first.headline}")
        tree = psutil.Process(daemon.pid).children(recursive=True)
        asked = call(m.RestartDaemon(), 120)
        assert asked.servers == 1

        def restarted() -> bool:
            try:
                return call(m.Status(), 60).restarts == 1
            except (errors.HolsrvError, OSError):
                return False  # the switch

        wait_until(restarted, timeout=120, what="the daemon to answer as restarted")
        after = call(m.Diagnostics(str(path), wait=AFTER_WAIT_S), 60)
        assert after.complete, f"answered as if rich_list were checked again: {after.headline}"
        assert (after.server.pid, after.server.start) == (first.server.pid, "warm")
        assert (after.verdict, after.tally, after.content_hash) == (first.verdict, first.tally, first.content_hash)
    finally:
        with contextlib.suppress(psutil.Error):
            tree += psutil.Process(daemon.pid).children(recursive=True)
        if daemon.poll() is None:
            daemon.kill()
        daemon.wait(60)
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                proc.kill()
