"""No client can starve, stall or lock out another: pipelining, slow readers, stalled frames, idle hogs.

The concurrency test at the end drives everything at once and checks that
no reply is lost, crossed or duplicated.  Its long form (`make stress`)
also reports how much slower the well-behaved clients got.
"""

from __future__ import annotations

import asyncio
import random
import re
import select
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

import pytest
from test_fuzz import daemon_process

from holsrv import errors
from holsrv.disk import files
from holsrv.rpc import client as rpc_client
from holsrv.rpc import framing
from holsrv.rpc import messages as m
from holsrv.rpc.aclient import AsyncClient

from conftest import GOOD_SCRIPT, wait_until

LOOPING = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")


def test_a_pipelining_client_does_not_hold_the_loop_until_its_burst_ends(daemon):
    burst = 10_000
    with _hello(daemon) as piper, _hello(daemon) as other:
        received = _Counter()
        reader = threading.Thread(target=_read_replies, args=(piper, burst, received))
        reader.start()
        # Requests the daemon answers at once with a short reply, each naming its own file.
        frames = b"".join(framing.encode(m.Diagnostics(f"/nonexistent/p{i}Script.sml")) for i in range(burst))
        writer = threading.Thread(target=piper.sendall, args=(frames,))
        writer.start()
        wait_until(lambda: received.count > 0, what="the burst to begin")
        before = received.count
        other.sendall(framing.encode(m.Status()))
        assert isinstance(_reply(other), m.StatusResult)
        during = received.count - before
        writer.join(60)
        reader.join(60)
    assert received.replies == [f"p{i}Script.sml" for i in range(burst)], "pipelined replies lost or out of order"
    assert before < burst / 2, "the burst was over before the other client asked: make it longer"
    # One request of the burst per turn of the loop: the other client is
    # answered after a handful of them, not after the rest of what was buffered.
    assert during < 200, f"{during} pipelined requests were answered while another client waited for one"


def test_a_connection_cannot_queue_unbounded_input_behind_a_slow_request(daemon, write_script):
    path = write_script(LOOPING)
    with _hello(daemon) as sock:
        sock.sendall(framing.encode(m.Diagnostics(str(path), wait=30)))  # busy for 30 s
        sock.setblocking(False)
        frame = framing.encode(m.Status())
        accepted = 0
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # bounded: the old daemon took 32 MiB and more
            try:
                accepted += sock.send(frame * 4096)
            except BlockingIOError:
                if _stays_blocked(sock):
                    break
        else:
            pytest.fail(f"the daemon kept reading: {accepted} bytes queued behind one request")
    # The stream's buffer plus the kernel's socket buffers, both ways.
    assert accepted < 4 * 1024 * 1024, f"{accepted} bytes were queued behind one request"


def test_a_client_that_never_reads_its_replies_is_dropped_and_others_are_served(daemon_factory):
    daemon = daemon_factory(send_timeout_s=0.5)
    with _hello(daemon) as reader_never:
        reader_never.settimeout(1)
        frame = framing.encode(m.Status()) * 64
        dropped = False
        deadline = time.monotonic() + 30
        while not dropped and time.monotonic() < deadline:
            try:
                reader_never.sendall(frame)
            except TimeoutError:
                assert isinstance(daemon.call(m.Status(), timeout=10), m.StatusResult)
            except (BrokenPipeError, ConnectionResetError):
                dropped = True
        assert dropped, "a client that never reads its replies was kept for good"
    assert isinstance(daemon.call(m.Status(), timeout=10), m.StatusResult)


def test_at_the_connection_limit_the_oldest_idle_connection_makes_room_and_is_told_why(daemon_factory):
    daemon = daemon_factory(max_connections=4)
    idle = [_open_hello(daemon) for _ in range(4)]
    try:
        assert isinstance(daemon.call(m.Status(), timeout=10), m.StatusResult)  # a fifth gets in
        reply = _reply(idle[0])
        assert isinstance(reply, m.ErrorReply) and reply.code == "connection_closed"
        assert "to make room" in reply.message and "open a new connection" in reply.message
        assert framing.recv_body(idle[0]) is None
        idle[1].sendall(framing.encode(m.Status()))  # the younger ones still work
        assert isinstance(_reply(idle[1]), m.StatusResult)
    finally:
        for sock in idle:
            sock.close()


def test_at_the_connection_limit_with_every_connection_busy_a_newcomer_gets_servers_busy(
    daemon_factory, write_script
):
    daemon = daemon_factory(max_connections=2)
    path = write_script(LOOPING)
    busy = [_open_hello(daemon) for _ in range(2)]
    try:
        for sock in busy:
            sock.sendall(framing.encode(m.Diagnostics(str(path), wait=30)))
        # Both requests read and being answered (a connection still idle would be closed for room).
        connections = daemon.daemon.connections._open.values
        wait_until(lambda: [c.idle_since for c in connections()] == [None, None], what="both calls to be read")
        with pytest.raises(errors.ServerBusy, match="2 connections open .HOLSRV_MAX_CONNECTIONS=2., all busy"):
            daemon.call(m.Status(), timeout=10)
    finally:
        for sock in busy:
            sock.close()


@pytest.mark.asyncio
async def test_holmcps_pooled_connection_closed_for_room_is_replaced_without_an_error(daemon_factory):
    daemon = daemon_factory(max_connections=2)
    client = AsyncClient(daemon.socket, name="holmcp", autostart=False)
    try:
        await client.call(m.Status())  # its connection now waits in the idle pool
        newcomers = [await asyncio.to_thread(_open_hello, daemon) for _ in range(2)]  # the pooled one makes room
        result, _ = await client.call(m.Status())
        assert isinstance(result, m.StatusResult)
        for sock in newcomers:
            sock.close()
    finally:
        await client.aclose()


def test_partial_frames_cannot_hold_more_than_the_frame_budget(daemon_factory):
    daemon = daemon_factory(frame_budget_mb=1, frame_timeout_s=30)
    big = 700 * 1024
    with _hello(daemon) as holder, _hello(daemon) as second:
        holder.sendall(big.to_bytes(4, "big") + b"\x00" * 1000)  # and then nothing
        wait_until(lambda: daemon.daemon.connections._frames.held >= big, what="the first frame to be begun")
        second.sendall(big.to_bytes(4, "big"))
        reply = _reply(second)
        assert isinstance(reply, m.ErrorReply) and reply.code == "bad_frame"
        assert "cannot be received now" in reply.message and "send it again shortly" in reply.message
    wait_until(lambda: daemon.daemon.connections._frames.held == 0, what="the abandoned frame to be let go")
    assert isinstance(daemon.call(m.Status(), timeout=10), m.StatusResult)


# -- everything at once --------------------------------------------------------


@dataclass
class Load:
    """The shape of the concurrency run."""

    clients: int
    requests: int
    scripts: int
    pipelined: int


FAST = Load(clients=16, requests=12, scripts=3, pipelined=300)
LONG = Load(clients=100, requests=50, scripts=4, pipelined=5_000)


def test_many_clients_with_hostile_ones_lose_cross_and_duplicate_no_reply(daemon_factory, write_script):
    # Every client here is a thread of this one process (agents would be
    # processes of their own), so the per-process idle bound is lifted.
    daemon = daemon_factory(send_timeout_s=1.0, frame_timeout_s=1.0, max_servers=4, max_idle_per_peer=1000)
    report = run_load(daemon, write_script, FAST)
    assert report.problems == [], report.problems[:10]
    assert report.answered == FAST.clients * FAST.requests + FAST.pipelined


@pytest.mark.stress
def test_stress_100_clients_by_50_requests_with_hostile_ones_stay_correct_and_fast(
    short_tmp, write_script, monkeypatch
):
    # MAX_IDLE_PER_PEER: the 100 clients are threads of this one process.
    limits = {"SEND_TIMEOUT_S": "5", "FRAME_TIMEOUT_S": "2", "MAX_SERVERS": "4", "QUIET_S": "0.3",
              "MAX_HEAP_MB": "1024", "MAX_IDLE_PER_PEER": "1000"}
    for name, value in limits.items():
        monkeypatch.setenv(f"HOLSRV_{name}", value)
    # The daemon in its own process, so the 100 client threads here do not share its GIL.
    with daemon_process(short_tmp / "c.sock", short_tmp / "c.log", monkeypatch):
        report = run_load(_Remote(short_tmp / "c.sock"), write_script, LONG)
    print(f"\n{report.summary()}")
    assert report.problems == [], report.problems[:10]
    assert report.answered == LONG.clients * LONG.requests + LONG.pipelined
    # Generous: 100 clients share one event loop, so a round trip may queue
    # behind ~100 others; the point is that no client waits for a whole burst.
    assert report.worst_s < max(0.5, 200 * report.unloaded_s), report.summary()


@dataclass
class Report:
    unloaded_s: float = 0.0
    latencies: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    answered: int = 0
    hostile: dict[str, str] = field(default_factory=dict)

    @property
    def worst_s(self) -> float:
        return max(self.latencies)

    def summary(self) -> str:
        lat = sorted(self.latencies)
        return (
            f"{len(lat)} well-behaved round trips + pipelined; answered {self.answered}, problems "
            f"{len(self.problems)}; unloaded worst {self.unloaded_s * 1000:.1f} ms; loaded median "
            f"{statistics.median(lat) * 1000:.1f} ms, p99 {lat[int(len(lat) * 0.99)] * 1000:.1f} ms, worst "
            f"{self.worst_s * 1000:.1f} ms ({self.worst_s / self.unloaded_s:.1f}x unloaded); hostile: {self.hostile}"
        )


def run_load(daemon, write_script, load: Load) -> Report:
    """Well-behaved clients, a pipelining client, a slow reader, a half-frame staller and an editor at once."""
    scripts = [write_script(GOOD_SCRIPT, name=f"s{k}Script.sml") for k in range(load.scripts)]
    positions = _positions(GOOD_SCRIPT)
    for path in scripts:
        assert daemon.call(m.Diagnostics(str(path), wait=30), timeout=60).verdict == "OK"
    report = Report()
    unloaded = []
    with daemon.client("unloaded") as client:
        for i in range(30):
            path, (line, col) = scripts[i % len(scripts)], positions[i % len(positions)]
            start = time.monotonic()
            _check(client.call(m.GoalState(str(path), line, col, wait=30), 60), path, line, col, report.problems)
            unloaded.append(time.monotonic() - start)
    report.unloaded_s = max(unloaded)
    stop = threading.Event()
    hostile = [
        threading.Thread(target=_slow_reader, args=(daemon, stop, report)),
        threading.Thread(target=_staller, args=(daemon, stop, report)),
        threading.Thread(target=_editor, args=(scripts[-1], stop, report)),
    ]
    for thread in hostile:
        thread.start()
    lock = threading.Lock()

    def well_behaved(n: int) -> None:
        rng = random.Random(n)
        with daemon.client(f"client-{n}") as client:
            for j in range(load.requests):
                path = scripts[rng.randrange(len(scripts))]
                line, col = positions[rng.randrange(len(positions))]
                start = time.monotonic()
                try:
                    if j % 5 == 4:
                        reply = client.call(m.Diagnostics(str(path), wait=30), 60)
                        ok = reply.file == str(path)
                        problem = None if ok else f"client {n}: diagnostics of {path} answered for {reply.file}"
                    else:
                        reply = client.call(m.GoalState(str(path), line, col, wait=30), 60)
                        problem = _mismatch(reply, path, line, col)
                except errors.HolsrvError as err:
                    problem = f"client {n} request {j}: {err.code}: {err}"
                elapsed = time.monotonic() - start
                with lock:
                    if path != scripts[-1]:  # the editor's file waits on its recompiles, fairly
                        report.latencies.append(elapsed)
                    report.answered += problem is None
                    if problem:
                        report.problems.append(problem)

    piper = threading.Thread(target=_pipeliner, args=(daemon, scripts, positions, load.pipelined, report, lock))
    piper.start()
    clients = [threading.Thread(target=well_behaved, args=(n,)) for n in range(load.clients)]
    for thread in clients:
        thread.start()
    for thread in [*clients, piper]:
        thread.join(600)
    stop.set()
    for thread in hostile:
        thread.join(60)
    return report


def _pipeliner(daemon, scripts, positions, count, report, lock) -> None:
    """Every request sent before any reply is read; replies must come back whole and in order."""
    asked = [(scripts[i % len(scripts)], *positions[i % len(positions)]) for i in range(count)]
    frames = b"".join(framing.encode(m.GoalState(str(p), line, col, wait=30)) for p, line, col in asked)
    with _hello(daemon) as sock:
        sock.settimeout(120)
        sender = threading.Thread(target=sock.sendall, args=(frames,))
        sender.start()
        for n, (path, line, col) in enumerate(asked):
            problem = _mismatch(_reply(sock), path, line, col)
            with lock:
                report.answered += problem is None
                if problem:
                    report.problems.append(f"pipelined {n}: {problem}")
        sender.join(60)
    report.hostile["pipelined"] = f"{count} requests in one burst"


def _slow_reader(daemon, stop, report) -> None:
    """Asks and never reads; the daemon drops it after its send deadline."""
    drops = 0
    while not stop.is_set():
        with _hello(daemon) as sock:
            sock.settimeout(0.5)
            while not stop.is_set():
                try:
                    sock.sendall(framing.encode(m.Status()) * 32)
                except TimeoutError:
                    continue  # the daemon stopped reading: it is stuck writing to us
                except (BrokenPipeError, ConnectionResetError):
                    drops += 1
                    break
    report.hostile["slow reader dropped"] = f"{drops} times"


def _staller(daemon, stop, report) -> None:
    """Sends half a frame and stalls; the daemon drops it after its frame deadline."""
    drops = 0
    while not stop.is_set():
        with _hello(daemon) as sock:
            sock.settimeout(10)
            sock.sendall(framing.encode(m.Status())[:3])
            try:
                reply = _reply(sock)
                drops += reply.code == "bad_frame"
            except (AssertionError, OSError):
                pass
    report.hostile["half-frame staller dropped"] = f"{drops} times"


def _editor(path, stop, report) -> None:
    """Rewrites a script again and again, below its proofs so every position stays where it was."""
    edits = 0
    while not stop.wait(0.05):
        # Written whole and renamed into place, as editors save: a half-written
        # file would rightly be answered about as it was read.
        fresh = path.with_suffix(".tmp")
        fresh.write_text(GOOD_SCRIPT + f"\n(* edit {edits} *)\n", encoding="utf-8")
        fresh.replace(path)
        edits += 1
    report.hostile["editor"] = f"{edits} edits"


def _positions(text: str) -> list[tuple[int, int]]:
    """(line, column) of every character inside the proofs' tactic lines: many distinct questions."""
    lines = text.split("\n")
    return [(n + 1, c + 1) for n, line in enumerate(lines) if line.startswith("  ") and ">>" in line
            for c in range(2, len(line))]


def _mismatch(reply, path, line, col) -> str | None:
    if not isinstance(reply, m.GoalStateResult):
        return f"goalState {path.name}:{line}:{col} answered with {type(reply).__name__}: {reply}"
    if (reply.file, reply.line, reply.column) != (str(path), line, col):
        return f"goalState {path.name}:{line}:{col} answered for {reply.file}:{reply.line}:{reply.column}"
    return None


def _check(reply, path, line, col, problems) -> None:
    problem = _mismatch(reply, path, line, col)
    if problem:
        problems.append(problem)


# -- helpers -------------------------------------------------------------------


class _Counter:
    def __init__(self) -> None:
        self.count = 0
        self.replies: list[str] = []


def _read_replies(sock: socket.socket, count: int, into: _Counter) -> None:
    for _ in range(count):
        named = re.search(r"p\d+Script\.sml", _reply(sock).message)
        into.replies.append(named.group() if named else "")
        into.count += 1


def _open_hello(daemon) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(15)
    sock.connect(str(daemon.socket))
    sock.sendall(framing.encode(m.Hello(m.PROTOCOL_VERSION, "fairness-test")))
    assert isinstance(_reply(sock), m.Welcome)
    return sock


class _hello:
    def __init__(self, daemon) -> None:
        self.sock = _open_hello(daemon)

    def __enter__(self) -> socket.socket:
        return self.sock

    def __exit__(self, *exc) -> None:
        self.sock.close()


def _reply(sock: socket.socket):
    body = framing.recv_body(sock)
    assert body is not None, "the daemon closed the connection without a reply"
    return framing.decode(framing.reply_decoder, body)


def _stays_blocked(sock: socket.socket) -> bool:
    """True if `sock` cannot send for a moment: the daemon stopped reading from it."""
    return not select.select([], [sock], [], 1.0)[1]





# -- a huge script beside cached answers --------------------------------------


def _huge_script(megabytes: float) -> str:
    theorem = (
        "(* lemma {i}: (* nested *) and a \"string\" *)\n"
        "Theorem t{i}:\n  !n:num. n + {i} = {i} + n\nProof\n  gen_tac >> simp[] (* ‘term’ *)\nQED\n\n"
    )
    head = "Theory huge\nAncestors arithmetic\n\n"
    count = int(megabytes * 2**20 / len(theorem.format(i=10_000)))
    return head + "".join(theorem.format(i=i) for i in range(count))


# The churning client, in a process of its own: decoding the huge file's
# answers (megabytes each) in a thread of the test's process would hold the
# GIL and delay the measuring thread, not the daemon.  It asks about the
# huge file and for status again and again, the calls that scan its text,
# and edits the file twice: each new text is read, hashed, scanned, sent and
# checked anew.
_CHURN = """
import sys, time
from holsrv import errors
from holsrv.rpc import client, messages as m
sock, huge, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
def call(request):
    with client.connect(sock, name="churn", autostart=False) as c:
        return c.call(request, 120)
start = time.monotonic()
edits = [seconds / 4, seconds / 2]
while time.monotonic() - start < seconds:
    try:
        call(m.Diagnostics(huge, wait=0))
    except errors.HolsrvError:
        pass
    call(m.Status())
    if edits and time.monotonic() - start > edits[0]:
        edits.pop(0)
        with open(huge, "a") as f:
            f.write("\\n(* an edit *)\\n")
"""


@pytest.mark.stress
def test_stress_a_huge_script_in_one_session_does_not_delay_another_clients_cached_answer(
    short_tmp, write_script, monkeypatch
):
    # The daemon in its own process: the test's threads would hold its GIL.
    with daemon_process(short_tmp / "h.sock", short_tmp / "h.log", monkeypatch) as (proc, _):
        daemon = _Remote(short_tmp / "h.sock")
        small = write_script(GOOD_SCRIPT, name="smallScript.sml")
        huge = write_script(_huge_script(4), name="hugeScript.sml")
        line, col = _positions(GOOD_SCRIPT)[0]
        assert daemon.call(m.Diagnostics(str(small), wait=30)).verdict == "OK"
        daemon.call(m.GoalState(str(small), line, col, wait=30))  # now cached
        unloaded = _round_trips(daemon, small, line, col, 50)
        seconds = 12.0
        churn = subprocess.Popen([sys.executable, "-c", _CHURN, str(daemon.socket), str(huge), str(seconds)])
        try:
            # From the huge file's first read (its open, its first scan) to past its second edit.
            loaded = _round_trips(daemon, small, line, col, seconds=seconds * 0.9)
            assert churn.wait(300) == 0
        finally:
            churn.kill()
        last = daemon.call(m.Diagnostics(str(huge), wait=0), 120)
        assert last.content_hash == files.content_hash(huge.read_bytes()), "the huge file's edits were read"
    print(f"\ncached goalState beside a {huge.stat().st_size / 2**20:.1f} MB script, {len(loaded)} calls: "
          f"unloaded worst {max(unloaded) * 1000:.1f} ms, loaded median {statistics.median(loaded) * 1000:.1f} ms, "
          f"99th percentile {statistics.quantiles(loaded, n=100)[98] * 1000:.1f} ms, worst {max(loaded) * 1000:.1f} ms")
    # On two cores shared with the fake HOL checking 30,000 proofs and the
    # churning client, the 99th percentile is some 10-15 ms and the worst
    # 25-55 ms; the text's computation in one go would hold the loop for
    # 300-600 ms, and before its work was sliced the worst was 70-115 ms.
    assert statistics.quantiles(loaded, n=100)[98] < max(0.03, 20 * max(unloaded)), "a huge script held the loop"
    assert max(loaded) < max(0.1, 50 * max(unloaded)), "a huge script held the loop"


class _Remote:
    def __init__(self, socket) -> None:
        self.socket = socket

    def call(self, request, timeout: float = 60.0):
        with rpc_client.connect(self.socket, name="remote", autostart=False) as client:
            return client.call(request, timeout)

    def client(self, name: str):
        return rpc_client.connect(self.socket, name=name, autostart=False)


def _round_trips(daemon, path, line, col, count: int = 0, seconds: float = 0.0) -> list[float]:
    """Cached goalState round trips: `count` of them, or as many as `seconds` allow."""
    times: list[float] = []
    end = time.monotonic() + seconds
    with daemon.client("cached") as client:
        while len(times) < count or time.monotonic() < end:
            start = time.monotonic()
            reply = client.call(m.GoalState(str(path), line, col, wait=30), 60)
            times.append(time.monotonic() - start)
            assert reply.cached and (reply.line, reply.column) == (line, col)
    return times
