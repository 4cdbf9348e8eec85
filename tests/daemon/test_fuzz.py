"""Random and mutated frames against a live daemon: it stays up, stays flat, and still answers.

The daemon runs as its own process (`python -m holsrv`), so its memory and
open files are measured alone.  `make test` sends 1,000 frames; the long
form (`make stress`) 10,000.
"""

from __future__ import annotations

import contextlib
import math
import os
import random
import select
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import psutil
import pytest

from holsrv.errors import HolsrvError
from holsrv.rpc import client as rpc_client
from holsrv.rpc import framing
from holsrv.rpc import messages as m

from conftest import FAKE_HOL, GOOD_SCRIPT, wait_until

# RSS may grow this much over the run (allocator arenas settle, caches fill).
RSS_SLACK_MB = 40


@dataclass
class Fuzzed:
    frames: int = 0
    connections: int = 0
    replies: int = 0
    codes: dict[str, int] = field(default_factory=dict)


def test_a_thousand_fuzzed_frames_leave_the_daemon_up_flat_and_answering(fuzz_daemon):
    report = _fuzz(fuzz_daemon, frames=1_000, seed=12)
    assert report.codes.get("bad_frame", 0) > 0 and report.replies > 0, report


@pytest.mark.stress
def test_stress_ten_thousand_fuzzed_frames_leave_the_daemon_up_flat_and_answering(fuzz_daemon):
    report = _fuzz(fuzz_daemon, frames=10_000, seed=1012)
    print(f"\nfuzzed {report.frames} frames over {report.connections} connections; "
          f"{report.replies} replies: {dict(sorted(report.codes.items()))}; {fuzz_daemon.figures}")


@dataclass
class FuzzDaemon:
    socket: Path
    script: Path
    log: Path
    process: psutil.Process
    figures: str = ""

    def call(self, request, timeout: float = 60):
        with rpc_client.connect(self.socket, name="fuzz-check", autostart=False) as client:
            return client.call(request, timeout)


@pytest.fixture
def fuzz_daemon(short_tmp, tmp_path, monkeypatch):
    script = tmp_path / "fuzzScript.sml"
    script.write_text(GOOD_SCRIPT, encoding="utf-8")
    with daemon_process(short_tmp / "f.sock", tmp_path / "holsrv.log", monkeypatch) as (proc, log):
        daemon = FuzzDaemon(short_tmp / "f.sock", script, log, proc)
        assert daemon.call(m.Diagnostics(str(script), wait=30)).verdict == "OK"
        yield daemon


@contextlib.contextmanager
def daemon_process(sock: Path, log: Path, monkeypatch, *flags: str):
    """A real daemon, `python -m holsrv`, on `sock` with the fake HOL; yields its psutil.Process and log."""
    monkeypatch.setenv("HOL_BIN", str(FAKE_HOL))
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "holsrv", "--socket", str(sock), "--ready-fd", str(write_fd), "--log-file", str(log),
         *flags],
        pass_fds=(write_fd,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    try:
        with os.fdopen(read_fd, "rb") as ready:
            assert select.select([ready], [], [], 30)[0], "the daemon never said it was ready"
            assert ready.readline().startswith(b"ready")
        yield psutil.Process(proc.pid), log
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _fuzz(daemon: FuzzDaemon, frames: int, seed: int) -> Fuzzed:
    rng = random.Random(seed)
    corpus = _corpus(daemon.script)
    report = Fuzzed()
    _send_frames(daemon, rng, corpus, min(200, frames // 5), report)  # warm up what a run allocates
    wait_until(lambda: _connections(daemon) == 0, what="the warm-up connections to close")
    rss, fds = daemon.process.memory_info().rss, daemon.process.num_fds()
    _send_frames(daemon, rng, corpus, frames - report.frames, report)
    wait_until(lambda: _connections(daemon) == 0, what="the fuzz connections to close")
    assert daemon.process.is_running() and daemon.process.status() != psutil.STATUS_ZOMBIE, "the daemon died"
    grown_mb = (daemon.process.memory_info().rss - rss) / 2**20
    wait_until(lambda: daemon.process.num_fds() <= fds, what=f"the daemon's open files to fall back to {fds}")
    daemon.figures = f"RSS {rss / 2**20:.1f} MB, grew {grown_mb:+.1f} MB; open fds {fds} before, " \
                     f"{daemon.process.num_fds()} after"
    assert grown_mb < RSS_SLACK_MB, daemon.figures
    # Still answering, about the same file, as it did before the fuzz.
    assert daemon.call(m.Diagnostics(str(daemon.script), wait=30)).verdict == "OK"
    assert isinstance(daemon.call(m.Status()), m.StatusResult)
    log = daemon.log.read_text(errors="replace")
    assert "Traceback" not in log, log[log.find("Traceback") - 500:][:3000]
    assert log.count(" WARNING ") <= report.connections, "more than one WARNING line per connection"
    return report


def _connections(daemon: FuzzDaemon) -> int:
    return sum(1 for c in daemon.process.net_connections(kind="unix") if c.status == psutil.CONN_ESTABLISHED)


def _send_frames(daemon: FuzzDaemon, rng: random.Random, corpus: list[bytes], count: int, report: Fuzzed) -> None:
    while count > 0:
        batch = [_mutant(rng, corpus) for _ in range(min(count, rng.randint(1, 30)))]
        # Frames whose length prefix is true first: one that lies ends the
        # connection, so the frames after it would reach nothing.
        batch.sort(key=lambda frame: len(frame) < 4 or int.from_bytes(frame[:4], "big") != len(frame) - 4)
        count -= len(batch)
        report.frames += len(batch)
        report.connections += 1
        with socket.socket(socket.AF_UNIX) as sock:
            sock.settimeout(60)
            sock.connect(str(daemon.socket))
            roll = rng.random()
            if roll < 0.85:
                sock.sendall(framing.encode(rpc_client.hello("fuzzer")))
            elif roll < 0.95:
                sock.sendall(_mutate(rng, framing.encode(rpc_client.hello("fuzzer"))))
            with _suppress_broken():
                sock.sendall(b"".join(batch))
                sock.shutdown(socket.SHUT_WR)
            _read_until_closed(sock, report)


def _read_until_closed(sock: socket.socket, report: Fuzzed) -> None:
    """Every reply the daemon sends on this connection, until it closes it (it must: we said all we had)."""
    with _suppress_broken():
        while (body := framing.recv_body(sock)) is not None:
            reply = framing.decode(framing.reply_decoder, body)
            report.replies += 1
            code = reply.code if isinstance(reply, m.ErrorReply) else type(reply).__name__
            report.codes[code] = report.codes.get(code, 0) + 1


class _suppress_broken:
    """A daemon may close a connection whose framing broke while we still send: that is its right."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, value, tb) -> bool:
        if kind is TimeoutError:
            return False  # a daemon that neither answers nor closes: a hang, and a failure
        return kind is not None and issubclass(kind, (BrokenPipeError, ConnectionResetError, framing.FrameError))


def _corpus(script: Path) -> list[bytes]:
    """Well-formed frames the mutations start from: questions answered at once about a settled file."""
    f = str(script)
    requests = [
        m.Status(), m.Diagnostics(f, wait=0), m.GoalState(f, 7, 3, wait=0), m.GoalState(f, 13, 1, wait=0),
        m.Hover(f, 7, 3, wait=0), m.Completion(f, 7, 5, wait=0), m.DocumentSymbol(f, wait=0),
        m.Diagnostics(f + ".missing.sml", wait=0), m.Hover("relativeScript.sml", 1, 1),
    ]
    return [framing.encode(r) for r in requests]


# Values a field may be swapped for: wrong types, edges, and the inputs every bad-input test names.
_ODD_VALUES = [
    None, True, -1, 0, 2**63, 2**64 - 1, -(2**63), math.nan, math.inf, -math.inf, 1e308, "", "x" * 5000,
    "/a\x00b.sml", "/" + "n" * 300 + ".sml", [], {}, [1, [2, [3]]], {"op": "status"}, b"\xff\xfe",
]


def _mutant(rng: random.Random, corpus: list[bytes]) -> bytes:
    frame = rng.choice(corpus)
    kind = rng.random()
    if kind < 0.1:
        return frame
    if kind < 0.25:
        body = rng.randbytes(rng.randint(0, 64))
        return len(body).to_bytes(4, "big") + body
    if kind < 0.55:
        return _with_odd_field(rng, frame)
    return _mutate(rng, frame)


def _with_odd_field(rng: random.Random, frame: bytes) -> bytes:
    fields = msgspec.msgpack.decode(frame[4:])
    if rng.random() < 0.2:
        fields["op"] = rng.choice(["diagnostics", "goalState", "hover", "status", "frobnicate", 7, None])
    else:
        fields[rng.choice([*fields, "extra"])] = rng.choice(_ODD_VALUES)
    if fields.get("op") in ("shutdown", "stop", "restart", "eval", "retryCompile"):
        fields["op"] = "status"  # never ask the daemon to act: only to answer
    body = msgspec.msgpack.encode(fields)
    return len(body).to_bytes(4, "big") + body


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    for _ in range(rng.randint(1, 4)):
        how = rng.random()
        at = rng.randrange(len(data)) if data else 0
        if how < 0.35 and data:
            data[at] = rng.randrange(256)
        elif how < 0.5 and data:
            data[at] ^= 1 << rng.randrange(8)
        elif how < 0.6:
            data[at:at] = rng.randbytes(rng.randint(1, 8))
        elif how < 0.7 and data:
            del data[at:at + rng.randint(1, 8)]
        elif how < 0.8:
            data = data[: rng.randint(0, len(data))]  # cut short
        elif how < 0.9:
            # A length prefix that lies, up to far past the limit.
            lie = rng.choice([0, 1, len(data), len(data) + 50, 2**20, framing.MAX_FRAME + 1, 2**32 - 1])
            data[0:4] = lie.to_bytes(4, "big")
        else:
            data += rng.randbytes(rng.randint(1, 16))  # trailing junk: the start of another frame
    return bytes(data)


def test_the_fuzzer_corpus_is_answered_normally_when_unmutated(fuzz_daemon):
    # The mutations start from frames the daemon answers: a broken corpus would fuzz nothing.
    with rpc_client.connect(fuzz_daemon.socket, name="fuzz-corpus", autostart=False) as conn:
        for frame in _corpus(fuzz_daemon.script):
            request = framing.decode(framing.request_decoder, frame[4:])
            try:
                conn.call(request, 30)
            except HolsrvError as err:  # coded errors are answers too (a missing file, a relative path)
                assert err.code in {"file_not_found", "bad_request"}, err
