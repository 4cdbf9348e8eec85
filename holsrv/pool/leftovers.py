"""Leftovers of a dead daemon: the record of the servers a daemon runs, and
killing, at the next daemon's start, the ones provably left behind.

The record (`paths.servers_record`, private to the user) holds each live
server's pid, start time and owner marker; a pid alone proves nothing once
its process is gone, since pids are reused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from holsrv.process import process
from holsrv.rpc import paths
from holsrv.server.session import Session

log = logging.getLogger(__name__)


class ServerRecord:
    """The file where a daemon records its servers for the next one."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, sessions: Iterable[Session]) -> None:
        """Record `sessions`' pids, start times and owner marker (those not yet spawned are skipped)."""
        owner = process.owner_marker()
        entries = []
        for session in sessions:
            created = session.proc.create_time()
            if created is not None:
                entries.append({"pid": session.pid, "create_time": created, "owner": owner})
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            fd = paths.open_private(tmp, os.O_WRONLY | os.O_TRUNC)
            with os.fdopen(fd, "w") as out:
                out.write(json.dumps(entries))
            os.replace(tmp, self.path)
        except OSError as err:
            log.warning("cannot record the HOL servers in %s: %s", self.path, err)

    def read(self) -> list:
        try:
            fd = paths.open_private(self.path, os.O_RDONLY)
            with os.fdopen(fd, "rb") as record:
                entries = json.loads(record.read(1 << 20) or b"[]")
        except (OSError, ValueError) as err:
            log.warning("ignoring the leftover record %s: %s", self.path, err)
            return []
        return entries if isinstance(entries, list) else []


def reap_leftovers(record: ServerRecord) -> int:
    """Kill the servers a previous daemon on this socket left behind; returns how many.

    Only what is provably one of them: the recorded pid with its recorded
    start time, or a member of its process group or session, carrying the
    recorded owner marker in its environment, of a daemon no longer running.
    A planted or stale entry names no such process, and nothing is signalled.
    """
    entries = record.read()
    table = _process_table({e.get("pid") for e in entries if isinstance(e, dict)}) if entries else []
    return sum(_reap(entry, table) for entry in entries)


def _reap(entry: Any, table: list[_Proc]) -> bool:
    """Kill what `entry` provably names; whether it named anything."""
    try:
        leader, created, owner = int(entry["pid"]), float(entry["create_time"]), str(entry["owner"])
    except (KeyError, TypeError, ValueError):
        log.info("not stopping leftover %r: an entry without pid, start time and owner proves nothing", entry)
        return False
    if process.owner_running(owner):
        log.info("not stopping pid %d: the daemon that started it (%s) still runs", leader, owner)
        return False
    ours = [p for p in table if p.owner == owner and p.in_group_of(leader, created)]
    if not ours:
        return False
    log.warning("stopping HOL server pid %d left by a previous daemon (%d processes: %s)",
                leader, len(ours), ", ".join(str(p.pid) for p in ours))
    for sig_target in ours:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(sig_target.pid, signal.SIGKILL)
    if any(p.pgid == leader for p in ours):
        # The group still has a proven member, so its id cannot have
        # been reused: everything in it descends from our server.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(leader, signal.SIGKILL)
    return True


@dataclass
class _Proc:
    """One process as leftover reaping sees it."""

    pid: int
    pgid: int
    sid: int
    created: float
    owner: str | None  # its OWNER_ENV

    def in_group_of(self, leader: int, created: float) -> bool:
        """The recorded server itself (same start time), or a process of its group or session."""
        if self.pid == leader:
            return abs(self.created - created) <= 0.01  # a reused pid has another start time
        return leader in (self.pgid, self.sid)


def _process_table(leaders: set) -> list[_Proc]:
    """The processes that are, or share a group or session with, one of `leaders`."""
    table = []
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            pgid, sid = os.getpgid(proc.pid), os.getsid(proc.pid)
            if leaders.isdisjoint((proc.pid, pgid, sid)):
                continue  # only candidates have their environment read
            table.append(_Proc(proc.pid, pgid, sid, proc.create_time(), proc.environ().get(process.OWNER_ENV)))
    return table
