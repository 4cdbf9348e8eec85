"""The handover document and the successor's command line (`holsrv.pool.handover`), without a daemon."""

from __future__ import annotations

import os
import sys
import tempfile

import msgspec
import pytest

from holsrv.pool import handover


@pytest.mark.parametrize(("started", "successor"), [
    # A daemon started on demand: not forked again, its ready fd not written again, its idle exit kept.
    (["-m", "holsrv", "--detach", "--ready-fd", "5", "--socket", "s"],
     ["-m", "holsrv", "--socket", "s", "--idle-exit=3600", "--handover-fd", "9"]),
    # Restarted before: the old document's fd is not named again; an idle exit given is kept as given.
    (["-m", "holsrv", "--ready-fd=5", "--handover-fd", "4", "--idle-exit", "7"],
     ["-m", "holsrv", "--idle-exit", "7", "--handover-fd", "9"]),
    (["-X", "dev", "/venv/bin/holsrv", "--detach", "--idle-exit=0"],
     ["-X", "dev", "/venv/bin/holsrv", "--idle-exit=0", "--handover-fd", "9"]),
])
def test_the_successor_runs_the_command_line_that_started_the_daemon_less_what_it_must_not_repeat(
    monkeypatch, started, successor
):
    monkeypatch.setattr(sys, "orig_argv", ["python", *started])
    assert handover.successor_argv(9, 3600.0) == [sys.executable, *successor]


def _document(**changes) -> handover.Document:
    base = handover.Document(handover.VERSION, "0.1.0", 1.0, 2.0, listener=5, systemd=True, lock=6,
                             servers=[{"path": "/p/aScript.sml"}], restarts=2)
    return msgspec.structs.replace(base, **changes)


def test_a_document_reads_back_as_written_and_its_fd_is_closed_after():
    fd = handover.write(_document())
    assert os.get_inheritable(fd)  # it must survive the exec
    document, why, inherited = handover.read(fd)
    assert why == "" and document == _document()
    assert (inherited.listener, inherited.systemd, inherited.lock, inherited.restarts) == (5, True, 6, 2)
    with pytest.raises(OSError):
        os.fstat(fd)


def test_a_document_of_another_version_adopts_nothing_but_keeps_the_socket_the_lock_and_the_files():
    document, why, inherited = handover.read(handover.write(_document(handover=handover.VERSION + 1)))
    assert document is None and f"version {handover.VERSION + 1}" in why
    assert (inherited.listener, inherited.lock, inherited.files) == (5, 6, ["/p/aScript.sml"])


def test_a_malformed_document_adopts_nothing_and_says_why():
    with tempfile.TemporaryFile() as held:
        held.write(b"\xc1 not msgpack")
        held.flush()
        fd = os.dup(held.fileno())
    document, why, inherited = handover.read(fd)
    assert document is None and "malformed" in why and inherited.listener is None
