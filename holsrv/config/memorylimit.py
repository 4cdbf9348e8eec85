"""The memory of the box the daemon runs in: the machine's, or less where a
cgroup limits it (a systemd unit with `MemoryMax=`/`MemoryHigh=`, a container).

Only cgroup v2 is read: its `memory.max` and `memory.high` in the daemon's own
cgroup and every cgroup above it (each one's limit binds its descendants),
found through `/proc/self/cgroup`'s `0::/path` line.  Both roots are
parameters, so tests hand it a cgroup tree of their own.  Where there are
no cgroups (macOS, portable mode: `facilities.cgroups`) the machine's memory
is the budget, as psutil tells it.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from holsrv import facilities

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
_MB = 1024 * 1024


@dataclass(frozen=True)
class MemoryLimit:
    """How much memory the daemon's servers may have, and where that figure came from."""

    mb: int
    source: str  # "machine memory" | "cgroup memory.max of /system.slice/x.service" | …


def machine_mb() -> int:
    if not facilities.linux():
        return facilities.machine_bytes() // _MB
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // _MB
    except (ValueError, OSError):
        return 8192


def of_box(root: Path = CGROUP_ROOT, proc_cgroup: Path = PROC_CGROUP, machine: int | None = None) -> MemoryLimit:
    """The tightest of the machine's memory and the cgroup v2 limits over this process."""
    best = MemoryLimit(machine_mb() if machine is None else machine, "machine memory")
    for limit in cgroup_limits(root, proc_cgroup):
        if limit.mb < best.mb:
            best = limit
    return best


@functools.cache
def here() -> MemoryLimit:
    """`of_box()` of this process, read once: the defaults and `status` must agree on it."""
    if not facilities.cgroups():
        return MemoryLimit(machine_mb(), "machine memory")
    return of_box()


def cgroup_limits(root: Path, proc_cgroup: Path) -> list[MemoryLimit]:
    """Every `memory.max`/`memory.high` set on the daemon's cgroup and those above it."""
    path = _own_cgroup(proc_cgroup)
    if path is None:
        return []
    found = []
    parts = [p for p in path.split("/") if p]
    for depth in range(len(parts), -1, -1):
        group = "/" + "/".join(parts[:depth])
        for name in ("memory.max", "memory.high"):
            mb = _limit_mb(root.joinpath(*parts[:depth], name))
            if mb is not None:
                found.append(MemoryLimit(mb, f"cgroup {name} of {group}"))
    return found


def _own_cgroup(proc_cgroup: Path) -> str | None:
    """The cgroup v2 path of this process ("0::/a/b" → "/a/b"), None outside cgroup v2."""
    try:
        lines = proc_cgroup.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return None
    return next((line[3:] for line in lines if line.startswith("0::")), None)


def _limit_mb(path: Path) -> int | None:
    """The limit in a `memory.max`-style file, MB; None for "max", absent or unreadable."""
    try:
        raw = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(raw) // _MB if raw.isdigit() else None
