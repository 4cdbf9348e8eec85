"""Shared fixtures: the fake HOL server, scripts on disk, and a daemon in a thread.

The daemon fixture runs the real `Daemon` on a real Unix socket, in a thread
with its own event loop (uvloop or plain asyncio, by its file or a marker:
see `pytest_generate_tests`),
so tests talk to it exactly as holctl and holmcp do.  Its HOL servers are the
fake (`tests/fake_hol/fake_hol_lsp.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import uvloop

from holsrv.config.settings import Settings
from holsrv.daemon import Daemon
from holsrv.errors import HolsrvError
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages

# Test modules import helpers from one another by module name (`from test_fairness
# import _open_hello`), as pytest's default ("prepend") import mode lets the modules
# of one folder do; the tests live in a folder per kind, so each kind's folder is
# on the path for the others.
for _kind in ("unit", "daemon", "clients", "ops", "real_hol"):
    if str(Path(__file__).parent / _kind) not in sys.path:
        sys.path.append(str(Path(__file__).parent / _kind))

FAKE_HOL = Path(__file__).parent / "fake_hol" / "fake_hol_lsp.py"
# The fake lets go of a looping check 1.9 s after an edit reaches it, as the
# recorded HOL did; most tests need not wait that long (a test that is about
# the delay sets its own).
os.environ.setdefault("FAKE_HOL_STOP_MS", "200")
START_DEADLINE_S = 20.0

# A script in the shape of docs/protocol.md#scenarios' example: two good proofs.
GOOD_SCRIPT = """\
Theory demo
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
"""

# One proved theorem and one whose proof fails at a known step.
FAILING_SCRIPT = """\
Theory demo
Ancestors arithmetic

Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem wrong:
  !p q. p /\\ q ==> q
Proof
  rpt strip_tac >> FAIL_TAC "nope"
QED
"""


DAEMON_LOOPS = {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}

_PYTHON_ON_PATH = pytest.StashKey[Path]()


def pytest_configure(config):
    """Spare the suite's hundreds of Python starts work that is the same each time.

    The fake HOL is executed directly, as a real `hol` is, so its
    `#!/usr/bin/env python3` looks `python3` up on PATH; where that is a
    version manager's shim (pyenv's is a shell script that runs several more)
    each server start paid ~0.2 s for it: this interpreter goes first
    on PATH instead.  With PYTHONDONTWRITEBYTECODE set, pytest rewrote and
    compiled every test module afresh in each process (each xdist worker
    imports them all), some 9 s of CPU apiece: their caches go to
    tests/__pycache__, which git ignores.
    """
    config.addinivalue_line(
        "markers", "daemon_loop(name): the event loop ('asyncio' or 'uvloop') this test's daemons run on")
    sys.dont_write_bytecode = False
    bin_dir = Path(tempfile.mkdtemp(prefix="hs-bin-"))
    (bin_dir / "python3").symlink_to(sys.executable)
    os.environ["PATH"] = os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])
    config.stash[_PYTHON_ON_PATH] = bin_dir


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (`make test`): two workers a core, since the suite mostly waits on the processes it starts."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(2, min(2 * cores, 16))


def pytest_unconfigure(config):
    bin_dir = config.stash.get(_PYTHON_ON_PATH, None)
    if bin_dir is not None:
        shutil.rmtree(bin_dir, ignore_errors=True)


def pytest_asyncio_loop_factories(config, item):
    """Every async test runs on both loops the daemon may use."""
    return DAEMON_LOOPS


def pytest_generate_tests(metafunc):
    """Give each test that starts a daemon the event loop its daemon runs on.

    Running every daemon test on both loops nearly doubles the suite (on a
    2-core machine 105 s became 195 s, and later 205 s became 364 s), far past
    its 180 s budget.  So each test gets one loop: the one its `daemon_loop`
    marker names (on the test, its class, or its module's `pytestmark`), else
    the one a stable hash of its file's name picks.  Renaming a test, or moving
    its file to another folder, does not switch its loop; each loop serves
    about half the files.  The loop is in the test id (`[daemon-uvloop]`,
    `[daemon-asyncio]`).
    """
    if "daemon_loop" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("daemon_loop")
        if marker is not None:
            name = marker.args[0]
            if name not in DAEMON_LOOPS:
                raise pytest.UsageError(f"daemon_loop({name!r}): the loops are {sorted(DAEMON_LOOPS)}")
        else:
            name = sorted(DAEMON_LOOPS)[zlib.crc32(metafunc.definition.path.name.encode()) % len(DAEMON_LOOPS)]
        metafunc.parametrize("daemon_loop", [name], indirect=True, ids=lambda loop: f"daemon-{loop}")


@pytest.fixture
def daemon_loop(request) -> str:
    """The event loop ("asyncio" or "uvloop") this test's daemons run on."""
    return request.param


@pytest.fixture
def short_tmp():
    """A short temporary directory: Unix socket paths are limited to ~100 bytes."""
    path = Path(tempfile.mkdtemp(prefix="hs-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def write_script(tmp_path):
    """`write_script(text, name="demoScript.sml", dir=None) -> Path`."""

    def write(text: str, name: str = "demoScript.sml", dir: Path | None = None) -> Path:
        path = (dir or tmp_path) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return path

    return write


def fake_settings(socket: Path, **overrides) -> Settings:
    """Settings for a daemon under test: the fake HOL and short waits."""
    values = dict(
        socket=socket,
        hol_bin=str(FAKE_HOL),
        quiet_s=0.3,
        start_timeout_s=20.0,
        request_timeout_s=20.0,
        stop_timeout_s=2.0,
        memory_sample_s=0.2,
        restart_backoff_s=0.5,
        max_servers=4,
        max_heap_mb=2048,
    )
    values.update(overrides)
    return Settings(**values)



@dataclass
class RunningDaemon:
    """A daemon serving in a background thread."""

    socket: Path
    settings: Settings
    daemon: Daemon
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    clients: list = field(default_factory=list)

    def client(self, name: str = "test") -> rpc_client.Client:
        client = rpc_client.connect(self.socket, name=name, autostart=False)
        self.clients.append(client)
        return client

    def call(self, request, timeout: float = 60.0, name: str = "test"):
        """One request on a fresh connection, as holctl makes it."""
        with rpc_client.connect(self.socket, name=name, autostart=False) as client:
            return client.call(request, timeout)

    def run(self, coro, timeout: float = 30.0):
        """Run `coro` on the daemon's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        if self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.daemon.stopping.set)
            self.thread.join(30)
            if self.thread.is_alive():
                pytest.fail("the test daemon did not stop within 30s")


@pytest.fixture
def daemon_factory(short_tmp, daemon_loop):
    running: list[RunningDaemon] = []

    def make(**overrides) -> RunningDaemon:
        settings = fake_settings(overrides.pop("socket", short_tmp / f"d{len(running)}.sock"), **overrides)
        daemon = _start_in_thread(settings, daemon_loop)
        running.append(daemon)
        return daemon

    yield make
    for daemon in running:
        daemon.stop()


@pytest.fixture
def daemon(daemon_factory) -> RunningDaemon:
    return daemon_factory()


def _start_in_thread(settings: Settings, loop_name: str) -> RunningDaemon:
    """Start a daemon in a thread with its own `loop_name` event loop; return once it listens."""
    ready = threading.Event()
    box: dict = {}

    def serve() -> None:
        loop = DAEMON_LOOPS[loop_name]()
        asyncio.set_event_loop(loop)
        daemon = Daemon(settings)
        box.update(loop=loop, daemon=daemon)

        async def main() -> None:
            try:
                await daemon.start()
            except BaseException as err:
                box["error"] = err
                ready.set()
                return
            ready.set()
            await daemon.stopping.wait()
            await daemon.close()

        try:
            loop.run_until_complete(main())
        finally:
            loop.close()

    thread = threading.Thread(target=serve, name="holsrv-test-daemon", daemon=True)
    thread.start()
    if not ready.wait(START_DEADLINE_S):
        raise RuntimeError("the test daemon did not start")
    if "error" in box:
        raise box["error"]
    return RunningDaemon(settings.socket, settings, box["daemon"], box["loop"], thread)


def client_messages(log: Path, *methods: str) -> list[dict]:
    """The messages the daemon sent the fake HOL (its `FAKE_HOL_LOG` wire log), in order; only those
    of `methods` if any are named; none if the log is not there yet."""
    if not log.exists():
        return []
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return [e["msg"] for e in entries
            if e.get("dir") == "C->S" and (not methods or e["msg"].get("method") in methods)]


def goal_lines(log: Path) -> list[int]:
    """The line (1-based) of each goal-state request the daemon sent HOL, in order."""
    return [msg["params"]["position"]["line"] + 1 for msg in client_messages(log, "$/hol/goalState")]


def measured_warm(daemon: RunningDaemon, timeout: float = 30.0) -> None:
    """Wait (bounded) until the pool has sampled every running server after its first compile:
    until then a server counts against the memory budget as at least what a new one would
    (its status row's `counted_mb`)."""

    def warm() -> bool:
        rows = [s for s in daemon.call(messages.Status()).sessions if s.state not in ("stopping", "stopped", "dead")]
        return bool(rows) and all(s.footprint_mb is not None and s.counted_mb is None for s in rows)

    wait_until(warm, timeout, "every server's memory sample after its first compile")


def stepped(steps):
    """Take `steps` (see `holsrv.text.stepping`) to the end: (their result, how many steps yielded)."""
    taken = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value, taken
        taken += 1


def wait_until(predicate, timeout: float = 30.0, what: str = "condition") -> None:
    """Re-check `predicate` until it holds; fail after `timeout` seconds.

    For conditions only observable from outside (a process's death, a call
    reaching the daemon); everything else waits on events.  The default is a
    bound for a loaded machine (CI runs two suites side by side), not a speed:
    it costs nothing unless the condition never comes.
    """
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        pause.wait(0.02)


def waiting_call(daemon, request, name: str = "test") -> tuple[threading.Thread, dict]:
    """Send `request` from another thread; return once the daemon has it waiting.

    The outcome dict gets "reply" or "error" when the call ends.
    """
    outcome: dict = {}

    def call() -> None:
        try:
            outcome["reply"] = daemon.call(request, name=name)
        except HolsrvError as err:
            outcome["error"] = err

    thread = threading.Thread(target=call)
    thread.start()
    wait_until(
        lambda: any(s.waiting_calls for s in daemon.call(messages.Status()).sessions),
        what="the call to reach the daemon and wait",
    )
    return thread, outcome


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def living(procs: list) -> list:
    """Those of `procs` (psutil processes) still running (a zombie is dead; a reused pid is another process)."""
    import psutil

    alive = []
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
    return alive


# What systemd does before it execs a socket-activated service: the socket as fd 3,
# LISTEN_FDS=1, LISTEN_PID the service's own pid (known only in the child, hence a
# wrapper that execs holsrv in place).  argv: the socket's fd, then holsrv's arguments.
SYSTEMD_ACTIVATE = (
    "import os, sys\n"
    "fd = int(sys.argv[1])\n"
    "if fd != 3:\n"
    "    os.dup2(fd, 3); os.close(fd)\n"
    "os.environ.update(LISTEN_FDS='1', LISTEN_PID=str(os.getpid()))\n"
    "os.execv(sys.executable, [sys.executable, '-m', 'holsrv', *sys.argv[2:]])\n"
)


def find_real_hol() -> str:
    """The real `hol` command, or skip the test saying how to provide one."""
    from holsrv import errors

    try:
        hol = Settings().hol_command()
    except errors.HolNotFound as err:
        pytest.skip(f"no HOL4 found: set HOL_BIN or HOLDIR (or put HOL's bin/ on PATH) to run these tests ({err.code})")
    resolved = Path(hol).resolve()
    if resolved.parent == FAKE_HOL.resolve().parent or resolved.name == FAKE_HOL.name:
        pytest.skip(f"the HOL found ({hol}) is the test fake, not a real HOL4: set HOL_BIN or HOLDIR to a real one")
    return hol
