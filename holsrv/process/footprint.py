"""How much memory a process tree holds: resident plus swapped, as the kernel counts it cheaply.

Read from /proc itself.  A process's VmRSS and VmSwap are counters in
/proc/PID/status, and its children are listed in /proc/PID/task/TID/children,
so a HOL server's tree costs a few small reads (one per Poly/ML thread for the
children).  psutil's `children(recursive=True)` reads the parent of every
process on the machine instead (/proc/*/stat): some 10 ms with a hundred
processes, on the event loop, at every sample of every server; it stays the
way for a kernel that keeps no children lists, and psutil's resident memory
for a system without /proc (`facilities.proc_counters`).  Not psutil's
`memory_full_info` either: its swap figure comes from /proc/PID/smaps_rollup,
for which the kernel walks the page tables, some 15 ms for a 1.5 GB heap.
"""

from __future__ import annotations

import contextlib
import functools
import os

import psutil

from holsrv import facilities

# A HOL server's tree is the server, its watchdog and a helper or two; a larger one is not walked further.
MAX_PROCESSES = 64


def footprint_mb(pid: int) -> float | None:
    """Resident plus swapped memory of process `pid` and its descendants, MB (None if it is gone)."""
    listed = facilities.proc_counters() and children_listed()
    held = held_bytes if listed else _held_bytes_by_psutil
    try:
        total = held(pid)
    except (OSError, psutil.Error):
        return None
    for child in descendants(pid) if listed else _descendants_by_scan(pid):
        with contextlib.suppress(OSError, psutil.Error):  # gone since it was listed
            total += held(child)
    return total / (1024 * 1024)


def held_bytes(pid: int) -> int:
    """Bytes of `pid` resident or swapped out, from the counters in /proc/PID/status."""
    rss = swap = 0
    with open(f"/proc/{pid}/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmRSS:"):
                rss = int(line.split()[1])
            elif line.startswith(b"VmSwap:"):
                swap = int(line.split()[1])
                break  # it comes after VmRSS
    return (rss + swap) * 1024


def _held_bytes_by_psutil(pid: int) -> int:
    """Bytes of `pid` resident, as psutil tells it where there is no /proc (swap is not counted there)."""
    return int(psutil.Process(pid).memory_info().rss)


@functools.cache
def children_listed() -> bool:
    """Whether this kernel keeps each thread's children list (CONFIG_PROC_CHILDREN)."""
    return os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def descendants(pid: int) -> list[int]:
    """`pid`'s descendants, at most MAX_PROCESSES, from the kernel's children lists."""
    found: list[int] = []
    todo = [pid]
    while todo and len(found) < MAX_PROCESSES:
        parent = todo.pop()
        with contextlib.suppress(OSError):  # gone since it was listed
            for tid in os.listdir(f"/proc/{parent}/task"):
                with contextlib.suppress(OSError), open(f"/proc/{parent}/task/{tid}/children", "rb") as listed:
                    children = [int(c) for c in listed.read().split()]
                    found += children
                    todo += children
    return found[:MAX_PROCESSES]


def _descendants_by_scan(pid: int) -> list[int]:
    with contextlib.suppress(psutil.Error):
        return [p.pid for p in psutil.Process(pid).children(recursive=True)][:MAX_PROCESSES]
    return []
