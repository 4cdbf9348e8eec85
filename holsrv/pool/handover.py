"""The handover document: what a daemon passes to itself across `exec` to keep its HOL servers.

`holctl restart-daemon` (or SIGHUP) makes the daemon drain, write this
document into an unlinked temporary file whose descriptor survives `exec`,
and `exec` itself (`holsrv.daemon`, docs/design.md "Handover").  The
successor, the same process running the code now on disk, reads it before
serving and adopts each server it can: the process (still its child), the
pipes (inherited descriptors), and what the predecessor knew of it, as each
class that owns a part of it `export`s it and `adopt`s it back.

The document is versioned: a successor that does not know its version (newer
code handing over to older, or a changed format) adopts nothing and starts
every file's server fresh, with one log line; a malformed entry, or a server
that died meanwhile, is killed (its process group: it is our child) and
started fresh, the file's next answer saying why.  Never half-adopted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import psutil

from holsrv.pool.history import History
from holsrv.server.session import Session

if TYPE_CHECKING:
    from holsrv.pool.pool import Pool

log = logging.getLogger(__name__)

# The format this code writes and reads; a document of another version adopts nothing.
VERSION = 1
# The document's bound: the texts of the files dominate (two copies each, at most a few MB a script).
MAX_BYTES = 512 * 1024 * 1024
# For tests only: write this version instead of VERSION (an incompatible successor).
VERSION_ENV = "HOLSRV_TEST_HANDOVER_VERSION"
# For tests only: SIGKILL the server of the file of this name after the document is written, before
# `exec` (a server that died during the handover).
KILL_ENV = "HOLSRV_TEST_HANDOVER_KILL"


class Document(msgspec.Struct, forbid_unknown_fields=False):
    """What the predecessor passes.  Each server entry is a `Session.handover` (plain data)."""

    handover: int
    daemon_version: str
    written_at: float  # wall clock, for status
    began: float  # monotonic, when the restart was asked: how long the handover took
    # The daemon's own descriptors, read whatever the version (every version keeps these three and
    # `began` and `restarts`): the listening socket, whether systemd made it, and the lock file
    # (flocked: held across `exec`).
    listener: int | None = None
    systemd: bool = False
    lock: int | None = None
    servers: list[dict[str, Any]] = []
    # Files whose servers could not be handed over, and why: their next answer says so.
    fresh: dict[str, str] = {}
    history: dict[str, dict] = {}
    restarts: int = 0  # how many restarts this daemon process has been through, this one included


@dataclass
class Adoption:
    """What the successor made of a document."""

    adopted: list[Session] = field(default_factory=list)
    notes: dict[Path, str] = field(default_factory=dict)  # file -> why its server starts fresh
    from_version: str = ""


def write(document: Document) -> int:
    """The document in an unlinked temporary file; its descriptor, inheritable, at offset 0."""
    data = msgspec.msgpack.encode(document)
    if len(data) > MAX_BYTES:
        raise OSError(f"the handover document would take {len(data)} bytes, over its bound of {MAX_BYTES}")
    with tempfile.TemporaryFile() as held:
        fd = os.dup(held.fileno())
    try:
        view, written = memoryview(data), 0
        while written < len(data):  # os.write may write less than asked
            written += os.write(fd, view[written:])
        os.lseek(fd, 0, os.SEEK_SET)
        os.set_inheritable(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


@dataclass
class Inherited:
    """The daemon's own descriptors a document names (see `Document`): read even from one of an
    unknown version, so that a successor that adopts no server still keeps the socket and the lock."""

    listener: int | None = None
    systemd: bool = False
    lock: int | None = None
    restarts: int = 0  # counted on, and the restart timed, whatever the version
    began: float | None = None
    files: list[str] = field(default_factory=list)  # the files of the servers, as far as they can be read


def read(fd: int) -> tuple[Document | None, str, Inherited]:
    """The document in `fd` (then closed), or None and why it cannot be adopted; the daemon's descriptors."""
    document, why, raw = _read(fd)
    inherited = Inherited()
    if isinstance(raw, dict):
        for name in ("listener", "lock"):
            if isinstance(raw.get(name), int) and not isinstance(raw.get(name), bool):
                setattr(inherited, name, raw[name])
        inherited.systemd = raw.get("systemd") is True
        if isinstance(raw.get("restarts"), int):
            inherited.restarts = raw["restarts"]
        if isinstance(raw.get("began"), float):
            inherited.began = raw["began"]
        servers = raw.get("servers")
        for entry in servers if isinstance(servers, list) else ():
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                inherited.files.append(entry["path"])
    return document, why, inherited


def _read(fd: int) -> tuple[Document | None, str, Any]:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        chunks, size = [], 0
        while size <= MAX_BYTES and (chunk := os.read(fd, 1 << 20)):
            chunks.append(chunk)
            size += len(chunk)
    except OSError as err:
        return None, f"cannot read the handover document: {err}", None
    finally:
        with contextlib.suppress(OSError):
            os.close(fd)
    if size > MAX_BYTES:
        return None, f"the handover document is over its bound of {MAX_BYTES} bytes", None
    raw = None
    try:
        raw = msgspec.msgpack.decode(b"".join(chunks))
        version = raw.get("handover") if isinstance(raw, dict) else None
        if version != VERSION:
            return None, (f"the handover document is version {version!r}, and this daemon reads version "
                          f"{VERSION} only"), raw
        return msgspec.convert(raw, Document), "", raw
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        return None, f"the handover document is malformed: {err}", raw


def document(sessions: Iterable[Session], history: History, fresh: dict[str, str], version: str,
             began: float, inherited: Inherited, restarts: int) -> tuple[Document, list[Session]]:
    """The document for the servers of `sessions` that can be handed over now, and those handed
    over (paused: `Session.handover`); the others go in `fresh` with why."""
    entries, handed = [], []
    for session in sessions:
        entry = session.handover()
        if entry is None:
            fresh.setdefault(str(session.path), "it was busy with a request to HOL when the daemon restarted")
            continue
        entries.append(entry)
        handed.append(session)
    written = int(os.environ.get(VERSION_ENV) or VERSION)
    return Document(written, version, time.time(), began, inherited.listener, inherited.systemd, inherited.lock,
                    entries, fresh, history.export(), restarts=restarts), handed


# For tests only: the daemon stops itself (SIGSTOP) at this point of the handover, for a test to SIGKILL
# it there: "before-exec" (the document written, the servers paused) or "before-adoption" (the successor
# running, nothing adopted yet).
STOP_ENV = "HOLSRV_TEST_HANDOVER_STOP"


def test_stop(point: str) -> None:
    if os.environ.get(STOP_ENV) == point:
        os.kill(os.getpid(), signal.SIGSTOP)


# For tests only: the `exec` fails (as an OSError from execv would), after the document is written.
EXEC_FAIL_ENV = "HOLSRV_TEST_HANDOVER_EXEC_FAILS"


def test_exec_fails() -> None:
    if os.environ.get(EXEC_FAIL_ENV):
        raise OSError(f"execv failed ({EXEC_FAIL_ENV} is set)")


def test_kill(document: Document) -> None:
    """For tests (KILL_ENV): kill a handed-over server between the document and the `exec`."""
    name = os.environ.get(KILL_ENV)
    for entry in document.servers if name else ():
        if Path(entry["path"]).name == name:
            with contextlib.suppress(OSError):
                os.killpg(int(entry["process"]["pid"]), signal.SIGKILL)


def kill(pid: int, why: str) -> None:
    """End a server we cannot adopt: its process group, then reap its watchdog (our child)."""
    log.warning("killing the HOL server pid %d handed over by the previous daemon: %s", pid, why)
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:  # a SIGKILLed process is a zombie within moments
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        except ChildProcessError:
            return
        time.sleep(0.01)


def kill_strays(adopted: set[int]) -> int:
    """Kill every child of this process but the `adopted` servers: what the predecessor handed over
    and was not adopted (an unknown document's servers, those killed at the `exec`), read from the
    process table whatever the document said.  Run before this process starts any child.  How many."""
    try:
        children = psutil.Process().children()
    except psutil.Error:
        return 0
    strays = [child.pid for child in children if child.pid not in adopted]
    for pid in strays:
        kill(pid, "the daemon restarted and did not adopt it")
    return len(strays)


def close_fds(entry: dict) -> None:
    """Close the inherited pipe ends of an entry not adopted."""
    with contextlib.suppress(Exception):
        for fd in entry["process"]["fds"]:
            with contextlib.suppress(OSError):
                os.close(int(fd))


def still_ours(entry: dict) -> str:
    """Why the entry's process cannot be adopted ("" if it can): it must be our child, alive."""
    pid = int(entry["process"]["pid"])
    try:
        proc = psutil.Process(pid)
        if proc.ppid() != os.getpid():
            return f"its pid {pid} is no longer this daemon's child"
        if proc.status() == psutil.STATUS_ZOMBIE:
            return f"it (pid {pid}) exited during the handover"
    except psutil.NoSuchProcess:
        return f"it (pid {pid}) exited during the handover"
    except psutil.Error as err:
        return f"cannot look at pid {pid}: {err}"
    return ""


async def adopt(pool: Pool, document: Document | None, why_not: str, inherited: Inherited) -> Adoption:
    """Adopt what `document` hands over into `pool`: each server whose entry this code understands
    and whose process is still our child, alive; every other one killed (`kill_strays`), its file noted."""
    result = Adoption()
    if document is None:
        log.warning("the daemon restarted but adopts no HOL server: %s; every file's server starts fresh",
                    why_not)
        result.notes = {Path(path): why_not for path in inherited.files}
        pool.note_adopted(result.notes)
        return result
    result.from_version = document.daemon_version
    pool.history.adopt(document.history)
    for path, why in document.fresh.items():
        result.notes[Path(path)] = why
    for entry in document.servers:
        adopted_path, why = await _adopt_one(pool, entry, result)
        if why:
            result.notes[adopted_path] = why
            log.warning("the daemon restarted and could not adopt the server of %s (%s): it starts fresh",
                        adopted_path, why)
    pool.note_adopted(result.notes)
    log.info("adopted %d HOL servers from the previous daemon (holsrv %s); %d start fresh",
             len(result.adopted), document.daemon_version, len(result.notes))
    return result


async def _adopt_one(pool: Pool, entry: dict, result: Adoption) -> tuple[Path, str]:
    """Adopt one entry: its file and "" once adopted, or why not (its process then killed)."""
    try:
        path = Path(entry["path"])
        pid = int(entry["process"]["pid"])
    except (KeyError, TypeError, ValueError) as err:
        log.warning("a malformed entry in the handover document (%r): %s", err, str(entry)[:200])
        with contextlib.suppress(Exception):
            kill(int(entry["process"]["pid"]), "its entry is malformed")
        close_fds(entry)
        return Path(str(entry.get("path", "?")) if isinstance(entry, dict) else "?"), "its entry was malformed"
    why = still_ours(entry)
    session: Session | None = None
    if not why:
        try:
            settings, project = pool.projects.settings_for(path, pool.settings)
            session = pool.launcher.session(path, int(entry["max_heap_mb"]), str(entry["hol_cmd"]), settings)
            session.project = project
            await session.adopt(entry)
        except Exception as err:  # noqa: BLE001 - any failure means: not adopted, never half
            log.exception("cannot adopt the HOL server of %s", path)
            why = f"its entry could not be read: {err!r}"
            if session is not None and session.proc.pipes is not None:
                with contextlib.suppress(Exception):
                    await session.proc.kill(why)
                    session.proc.pipes.close()
                kill(pid, why)
                return path, why
        else:
            pool.adopted(session)
            result.adopted.append(session)
            return path, ""
    kill(pid, why)
    close_fds(entry)
    return path, why


# -- the exec --------------------------------------------------------------------

# How long the new code may take to show it can start (an import of the daemon's modules).
CHECK_TIMEOUT_S = 30.0
# For tests only: the new code "cannot start" (its check fails with this text).
BROKEN_ENV = "HOLSRV_TEST_HANDOVER_BROKEN"
# The daemon's options that must not be given again to the successor: it is detached already,
# its ready fd was closed, and the document's fd is new.
_DROPPED = {"--detach": False, "--ready-fd": True, "--handover-fd": True}


def successor_argv(fd: int, idle_exit_s: float) -> list[str]:
    """The command line that started this process (interpreter flags included), less what the
    successor must not repeat, naming the handover document's fd.  A daemon started on demand
    (`--detach`) keeps its `idle_exit_s`, which `--detach` gave it by default."""
    argv, kept, skip = list(sys.orig_argv), [], False
    if "--detach" in argv and not any(arg.split("=", 1)[0] == "--idle-exit" for arg in argv):
        argv.append(f"--idle-exit={idle_exit_s:g}")
    for arg in argv[1:]:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _DROPPED:
            skip = _DROPPED[name] and "=" not in arg
            continue
        kept.append(arg)
    return [sys.executable, *kept, "--handover-fd", str(fd)]


async def check_successor(timeout: float = CHECK_TIMEOUT_S) -> str:
    """The version of the code a successor would run, once it is seen to import; raises
    RuntimeError with why if it cannot (then the running daemon carries on)."""
    # The interpreter and environment the successor gets (not `-I`: a daemon started with PYTHONPATH,
    # as from a checkout, imports its code through it), the new code's modules, its version.
    code = "import holsrv.main, holsrv; print(holsrv.__version__)"
    broken = os.environ.get(BROKEN_ENV)
    if broken:
        code = f"import holsrv.main; raise ImportError({broken!r})"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(timeout):
            out, err = await proc.communicate()
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
        raise RuntimeError(f"the new code did not finish importing within {timeout:g}s") from None
    if proc.returncode != 0:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"status {proc.returncode}"]
        raise RuntimeError(f"the new code cannot start: {last[0][:500]}")
    return out.decode("utf-8", "replace").strip()[:100]
