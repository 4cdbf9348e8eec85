"""Warm against cold: what a warm holsrv daemon saves over starting HOL afresh.

Starts a real daemon as a subprocess on a temporary socket, with the fake HOL
server (made to load its "heap" slowly) or, with --real, the HOL4 that
HOL_BIN / HOLDIR / PATH names.  Times each kind of call over a few
repetitions, prints medians and their ratio to the cold call measured in the
same run, and writes the samples as JSON to bench/results/.  Never asserts a
time: the numbers are for reading.

    python bench/warm_vs_cold.py [--reps 5] [--startup-ms 1500] [--real]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import select
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from holsrv.config.settings import Settings
from holsrv.errors import HolNotFound, HolsrvError
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages as m

HERE = Path(__file__).resolve().parent
FAKE_HOL = HERE.parent / "tests" / "fake_hol" / "fake_hol_lsp.py"
READY_TIMEOUT_S = 30.0
# Long enough for a real HOL to load its heap and replay a few proofs.
SETTLE_WAIT_S = 300.0

SCRIPT = """\
Theory bench
Ancestors arithmetic

Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem conj_comm:
  !p q. p /\\ q ==> q /\\ p
Proof
  rpt strip_tac >> simp[]
QED

Theorem mul1:
  !n:num. n * 1 = n
Proof
  gen_tac >> simp[]
QED

Theorem edited:
  !m n:num. m + n = n + m
Proof
  rpt gen_tac >> simp[] (* revision 0 *)
QED
"""


@dataclass
class Measurement:
    name: str
    samples: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


class Bench:
    """One daemon, one scratch directory, and the measurements taken against them."""

    def __init__(self, args: argparse.Namespace, hol: str, scratch: Path) -> None:
        self.args = args
        self.hol = hol
        self.scratch = scratch
        self.socket = scratch / "b.sock"
        self.proc: subprocess.Popen | None = None
        self.results: dict[str, Measurement] = {}

    # -- the daemon ------------------------------------------------------------

    def start_daemon(self) -> float:
        """Spawn `python -m holsrv` and wait for its ready line; return the seconds it took."""
        env = dict(os.environ, HOL_BIN=self.hol, HOLSRV_MAX_SERVERS=str(self.args.reps + 1))
        if not self.args.real:
            env["FAKE_HOL_STARTUP_MS"] = str(self.args.startup_ms)
        read_fd, write_fd = os.pipe()
        began = time.perf_counter()
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "holsrv", "--socket", str(self.socket), "--ready-fd", str(write_fd)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                pass_fds=(write_fd,), start_new_session=True,
            )
        os.close(write_fd)
        try:
            ready = select.select([read_fd], [], [], READY_TIMEOUT_S)[0] and os.read(read_fd, 64)
        finally:
            os.close(read_fd)
        if not ready or not ready.startswith(b"ready"):
            raise RuntimeError(f"the daemon did not get ready; its log:\n{self.log_tail()}")
        return time.perf_counter() - began

    def stop_daemon(self) -> None:
        """Ask the daemon to shut down; if it will not, end it (and only it) by pid."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            with rpc_client.connect(self.socket, name="bench", autostart=False) as conn:
                conn.call(m.Shutdown(), 30)
            self.proc.wait(60)
        except (HolsrvError, OSError, subprocess.TimeoutExpired) as err:
            # The bench must never leave a daemon behind.
            print(f"bench: shutdown failed ({err}); terminating pid {self.proc.pid}", file=sys.stderr)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(15)

    @property
    def log(self) -> Path:
        return self.scratch / "daemon.log"

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def call(self, request, timeout: float = SETTLE_WAIT_S + 60):
        with rpc_client.connect(self.socket, name="bench", autostart=False) as conn:
            return conn.call(request, timeout)

    def timed(self, name: str, request, check=None):
        """Time one request on a fresh connection (as holctl makes it) and record it."""
        began = time.perf_counter()
        reply = self.call(request)
        elapsed = time.perf_counter() - began
        measurement = self.results.setdefault(name, Measurement(name))
        measurement.samples.append(elapsed)
        note = check(reply) if check else None
        if note and note not in measurement.notes:
            measurement.notes.append(note)
        return reply

    # -- the measurements ------------------------------------------------------

    def script(self, index: int) -> Path:
        path = self.scratch / f"s{index}" / "benchScript.sml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(SCRIPT, encoding="utf-8")
        return path

    def run(self) -> None:
        reps = self.args.reps
        files = [self.script(i) for i in range(reps)]
        for path in files:
            self.timed("cold diagnostics", m.Diagnostics(str(path), wait=SETTLE_WAIT_S), _expect_settled(cached=False))
        main = files[0]
        for _ in range(reps):
            self.timed("warm cached diagnostics", m.Diagnostics(str(main), wait=SETTLE_WAIT_S), _expect_settled(cached=True))
        for revision in range(1, reps + 1):
            main.write_text(SCRIPT.replace("revision 0", f"revision {revision}"), encoding="utf-8")
            self.timed("warm diagnostics after an edit", m.Diagnostics(str(main), wait=SETTLE_WAIT_S),
                       _expect_settled(cached=False))
        self.goal_states(main)
        self.status_round_trips()
        for _ in range(reps):
            self.timed("restart request", m.Restart(str(main)))
            self.timed("diagnostics after restart", m.Diagnostics(str(main), wait=SETTLE_WAIT_S),
                       _expect_settled(cached=False))

    def goal_states(self, path: Path) -> None:
        # Distinct positions, so each first ask reaches the server; asking
        # again at the same position is answered from the cache.
        for line, col in _tactic_positions(SCRIPT, self.args.reps):
            self.timed("warm goalState", m.GoalState(str(path), line, col, wait=SETTLE_WAIT_S), _expect_goals(cached=False))
            self.timed("warm cached goalState", m.GoalState(str(path), line, col, wait=SETTLE_WAIT_S), _expect_goals(cached=True))

    def status_round_trips(self) -> None:
        command = _holctl_command() + ["--socket", str(self.socket), "--no-start", "status"]
        for _ in range(self.args.reps):
            self.timed("status, direct client call", m.Status())
            began = time.perf_counter()
            done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
            self.results.setdefault("status, holctl process", Measurement("status, holctl process")).samples.append(
                time.perf_counter() - began
            )
            if done.returncode != 0:
                raise RuntimeError(f"holctl status failed ({done.returncode}): {done.stderr.strip()}")


def _expect_settled(cached: bool):
    def check(reply: m.DiagnosticsResult) -> str | None:
        if not reply.complete:
            return f"INCOMPLETE answer ({reply.headline}): the time is not a settled file's"
        if reply.verdict != "OK":
            return f"verdict {reply.verdict}: {reply.headline}"
        if reply.cached != cached:
            return f"expected cached={cached}, got cached={reply.cached}"
        return None

    return check


def _expect_goals(cached: bool):
    def check(reply: m.GoalStateResult) -> str | None:
        if reply.state not in ("goals", "proved_here"):
            return f"state {reply.state}: {reply.message}"
        if reply.cached != cached:
            return f"expected cached={cached}, got cached={reply.cached}"
        return None

    return check


def _tactic_positions(text: str, count: int) -> list[tuple[int, int]]:
    """`count` distinct (line, col) positions on tactic lines (1-based), cycling if few."""
    lines = text.split("\n")
    spots = []
    for number, line in enumerate(lines, 1):
        previous = lines[number - 2] if number > 1 else ""
        if previous == "Proof":
            tactic = line.split("(*")[0].rstrip()
            spots += [(number, col) for col in range(3, len(tactic) + 1) if tactic[col - 1] != " "]
    step = max(1, len(spots) // max(1, count))
    picked = spots[::step]
    return [picked[i % len(picked)] for i in range(count)]


def _holctl_command() -> list[str]:
    # The console script next to this interpreter is what a user runs.
    beside = Path(sys.executable).parent / "holctl"
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "holctl"]


def find_hol(real: bool) -> str:
    if not real:
        return str(FAKE_HOL)
    try:
        hol = Settings().hol_command()
    except HolNotFound as err:
        raise SystemExit(f"bench: --real needs HOL4: {err}") from None
    if Path(hol).resolve() == FAKE_HOL.resolve():
        raise SystemExit("bench: --real found the fake HOL server; point HOL_BIN or HOLDIR at a real HOL4")
    return hol


def report(bench: Bench, daemon_start_s: float) -> dict:
    cold = bench.results["cold diagnostics"].median
    print(f"\nholsrv warm vs cold  ({'real HOL ' + bench.hol if bench.args.real else f'fake HOL, heap load {bench.args.startup_ms} ms'}; "
          f"{bench.args.reps} repetitions; daemon start {daemon_start_s * 1000:.0f} ms)\n")
    width = max(len(name) for name in bench.results)
    print(f"{'measurement':<{width}}  {'median':>10}  {'min':>10}  {'max':>10}  {'x cold':>9}")
    print("-" * (width + 47))
    rows = {}
    for name, meas in bench.results.items():
        ratio = meas.median / cold
        print(f"{name:<{width}}  {_ms(meas.median):>10}  {_ms(min(meas.samples)):>10}  {_ms(max(meas.samples)):>10}  {ratio:>8.4f}x")
        rows[name] = {
            "median_s": meas.median, "min_s": min(meas.samples), "max_s": max(meas.samples),
            "ratio_to_cold": ratio, "samples_s": meas.samples, "notes": meas.notes,
        }
    for name, meas in bench.results.items():
        for note in meas.notes:
            print(f"note: {name}: {note}")
    return rows


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def write_json(bench: Bench, rows: dict, daemon_start_s: float) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%dT%H%M%S")
    out = HERE / "results" / f"{stamp}.json"
    out.parent.mkdir(exist_ok=True)
    document = {
        "timestamp": stamp,
        "hol": "real" if bench.args.real else "fake",
        "hol_command": bench.hol if bench.args.real else "tests/fake_hol/fake_hol_lsp.py",
        "fake_startup_ms": None if bench.args.real else bench.args.startup_ms,
        "reps": bench.args.reps,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "daemon_start_s": daemon_start_s,
        "results": rows,
    }
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5, help="repetitions of each measurement (default 5)")
    parser.add_argument("--startup-ms", type=int, default=1500,
                        help="the fake HOL's heap-load delay before it answers initialize (default 1500)")
    parser.add_argument("--real", action="store_true",
                        help="use the real HOL4 that HOL_BIN, HOLDIR or PATH names instead of the fake")
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error("--reps must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    hol = find_hol(args.real)
    # Short: a Unix socket path must fit in about 100 bytes.
    scratch = Path(tempfile.mkdtemp(prefix="hb-"))
    bench = Bench(args, hol, scratch)
    try:
        daemon_start_s = bench.start_daemon()
        bench.run()
    except Exception:
        print(f"bench: failed; the daemon's log ends:\n{bench.log_tail()}", file=sys.stderr)
        raise
    finally:
        bench.stop_daemon()
        shutil.rmtree(scratch, ignore_errors=True)
    rows = report(bench, daemon_start_s)
    print(f"\nwrote {write_json(bench, rows, daemon_start_s)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
