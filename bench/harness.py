"""What every benchmark section uses: daemons and echo servers as processes,
their CPU and memory from /proc, timing helpers, and the one results table.

Every process the benchmark starts runs in a scratch directory on its own
socket (never the user's daemon) and is stopped by its pid.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from holsrv.errors import HolsrvError
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages as m

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FAKE_HOL = ROOT / "tests" / "fake_hol" / "fake_hol_lsp.py"
READY_TIMEOUT_S = 30.0
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# -- processes ----------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """CPU time of process `pid`, all its threads, in seconds.

    From each thread's schedstat (nanoseconds) where the kernel keeps it; the
    process's stat counts in clock ticks (10 ms), too coarse for one call.
    """
    try:
        total = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/schedstat") as schedstat:
                total += int(schedstat.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS  # utime, stime


def rss_mb(pid: int) -> float:
    """Resident memory of process `pid`, MB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _ready_process(argv: list[str], env: dict[str, str], log: Path, what: str) -> subprocess.Popen:
    """Start `argv` with a `--ready-fd` and wait until it says ready."""
    read_fd, write_fd = os.pipe()
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [*argv, "--ready-fd", str(write_fd)], stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
            pass_fds=(write_fd,), start_new_session=True,
        )
    os.close(write_fd)
    try:
        ready = select.select([read_fd], [], [], READY_TIMEOUT_S)[0] and os.read(read_fd, 64)
    finally:
        os.close(read_fd)
    if not ready or not ready.startswith(b"ready"):
        _end(proc)
        raise RuntimeError(f"{what} did not get ready; its log:\n{tail(log)}")
    return proc


def _end(proc: subprocess.Popen) -> None:
    """End a process this benchmark started (and only it), by its pid."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(15)


def tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Daemon:
    """A `holsrv` daemon as a subprocess, on a socket of its own in `scratch`."""

    def __init__(self, scratch: Path, name: str, hol: str, env: dict[str, str] | None = None) -> None:
        self.socket = scratch / f"{name}.sock"
        self.log = scratch / f"{name}.log"
        self.env = dict(os.environ, HOL_BIN=hol, **(env or {}))
        self.proc: subprocess.Popen | None = None
        self.start_s = 0.0

    def start(self) -> Daemon:
        began = time.perf_counter()
        self.proc = _ready_process(
            [sys.executable, "-m", "holsrv", "--socket", str(self.socket)], self.env, self.log, "the daemon"
        )
        self.start_s = time.perf_counter() - began
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu_s(self) -> float:
        return cpu_seconds(self.pid)

    def rss_mb(self) -> float:
        return rss_mb(self.pid)

    def client(self, name: str = "bench") -> rpc_client.Client:
        """A persistent connection, handshake done."""
        return rpc_client.connect(self.socket, name=name, autostart=False)

    def call(self, request, timeout: float = 300.0):
        with self.client() as conn:
            return conn.call(request, timeout)

    def stop(self) -> None:
        """Ask it to shut down; if it will not, end it by its pid."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.call(m.Shutdown(), 30)
            self.proc.wait(60)
        except (HolsrvError, OSError, subprocess.TimeoutExpired) as err:
            print(f"bench: shutdown of daemon pid {self.proc.pid} failed ({err}); terminating it", file=sys.stderr)
            _end(self.proc)


class Echo:
    """`bench/echo.py`: the daemon's framing and loop, answering with a captured reply frame."""

    def __init__(self, scratch: Path, reply_frame: bytes) -> None:
        self.socket = scratch / "echo.sock"
        self.log = scratch / "echo.log"
        self.reply_file = scratch / "echo-reply.bin"
        self.reply_file.write_bytes(reply_frame)
        self.proc: subprocess.Popen | None = None

    def start(self) -> Echo:
        self.proc = _ready_process(
            [sys.executable, str(HERE / "echo.py"), str(self.socket), str(self.reply_file)],
            dict(os.environ), self.log, "the echo server",
        )
        return self

    def client(self, name: str = "bench") -> rpc_client.Client:
        return rpc_client.connect(self.socket, name=name, autostart=False)

    def stop(self) -> None:
        if self.proc is not None:
            _end(self.proc)


def edit_proof(text: str, theorem: str, revision: int) -> str:
    """`text` with a comment added to the first line after `theorem`'s `Proof` (its first
    tactic, or the `Proof[…]` line itself): an edit inside one proof body."""
    found = re.search(rf"^Theorem {re.escape(theorem)}\s*:", text, flags=re.M)
    if found is None:
        raise ValueError(f"no theorem {theorem} in the text")
    proof = text.index("\nProof", found.start()) + len("\nProof")
    line_end = text.index("\n", proof + 1)
    return text[:line_end] + f" (* edit {revision} *)" + text[line_end:]


# -- timing -------------------------------------------------------------------


def median(samples: list[float]) -> float:
    return statistics.median(samples) if samples else float("nan")


def percentile(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def round_trips(conn: rpc_client.Client, request, count: int, warmup: int = 50) -> list[float]:
    """Seconds per request on one persistent connection."""
    for _ in range(warmup):
        conn.call(request, 60)
    samples = []
    for _ in range(count):
        began = time.perf_counter()
        conn.call(request, 60)
        samples.append(time.perf_counter() - began)
    return samples


def process_times(argv: list[str], count: int, env: dict[str, str] | None = None) -> list[float]:
    """Wall seconds of running `argv` to completion, `count` times (after one warm-up run)."""
    samples = []
    for index in range(count + 1):
        began = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, env=env, timeout=120, check=False)
        elapsed = time.perf_counter() - began
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
        if index:
            samples.append(elapsed)
    return samples


# -- the table ------------------------------------------------------------------


@dataclass
class Row:
    """One figure: its value, the baseline it is compared with, and the goal for value/baseline."""

    section: str
    figure: str
    value: float
    unit: str  # "s", "/s", "MB", "x"
    baseline: float | None = None
    baseline_label: str = ""
    goal: str = ""  # e.g. "<= 2x", ">= 8000/s"
    met: bool | None = None
    notes: list[str] = field(default_factory=list)
    samples: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0) or self.value != self.value:
            return None
        return self.value / self.baseline  # type: ignore[operator]


def show(value: float | None, unit: str) -> str:
    if value is None or value != value:
        return "-"
    if unit == "s":
        if value >= 1:
            return f"{value:.2f} s"
        if value >= 1e-3:
            return f"{value * 1e3:.2f} ms"
        return f"{value * 1e6:.0f} µs"
    if unit == "/s":
        return f"{value:,.0f}/s"
    if unit == "MB":
        return f"{value:.1f} MB"
    if unit == "x":
        return f"{value:.2f}×"
    return f"{value:g} {unit}"


def table(rows: list[Row]) -> str:
    """The rows as one Markdown table (docs/performance.md shows it as printed)."""
    lines = ["| figure | value | baseline | ratio | goal | met |", "|---|---|---|---|---|---|"]
    section = None
    for row in rows:
        if row.section != section:
            section = row.section
            lines.append(f"| **{section}** | | | | | |")
        ratio = row.ratio
        baseline = f"{show(row.baseline, row.unit)} ({row.baseline_label})" if row.baseline is not None else \
            row.baseline_label or "-"
        met = {True: "yes", False: "**no**", None: ""}[row.met]
        lines.append(
            f"| {row.figure} | {show(row.value, row.unit)} | {baseline} | "
            f"{'-' if ratio is None else f'{ratio:.2f}×'} | {row.goal} | {met} |"
        )
    return "\n".join(lines)


@contextlib.contextmanager
def stopping(*procs):
    """Stop every started daemon or echo server on the way out, whatever happens."""
    try:
        yield
    finally:
        for proc in procs:
            proc.stop()
