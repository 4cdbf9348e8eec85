"""How much memory a process tree holds: resident plus swapped, as the kernel counts it cheaply."""

from __future__ import annotations

import contextlib

import psutil


def footprint_mb(pid: int) -> float | None:
    """Resident plus swapped memory of process `pid` and its descendants, MB (None if it is gone)."""
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error, OSError):
            total += proc.memory_info().rss + swapped(proc.pid)
    return total / (1024 * 1024)


def swapped(pid: int) -> int:
    """Bytes of `pid` swapped out, from /proc/PID/status (0 where there is none).

    Not psutil's `memory_full_info`, whose swap figure comes from
    /proc/PID/smaps_rollup: the kernel walks the process's page tables for
    it, some 15 ms for a 1.5 GB HOL heap, on the event loop at every sample.
    VmSwap is a counter the kernel keeps.
    """
    with open(f"/proc/{pid}/status", "rb") as status:
        for line in status:
            if line.startswith(b"VmSwap:"):
                return int(line.split()[1]) * 1024
    return 0
