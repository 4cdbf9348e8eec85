"""The one seam to the platform: which Linux-only facility is used, and the portable fallback of each.

holsrv leans on facilities only Linux has.  Each place that uses one asks
here first, and takes its fallback when the answer is no:

| concern           | Linux                     | fallback (macOS, BSD, `HOLSRV_PORTABLE=1`)                 |
|-------------------|---------------------------|------------------------------------------------------------|
| file watching     | inotify                   | a stat poll every `STAT_POLL_S` (`disk/statpoll.py`)        |
| process footprint | /proc status and children | psutil (resident memory, descendants by scan)               |
| exit watch        | pidfd_open                | polling the child's return code                             |
| parent death      | PR_SET_PDEATHSIG          | the watchdog polls its parent (`os.getppid()` changes)      |
| peer credentials  | SO_PEERCRED               | LOCAL_PEERCRED; else none: the private socket directory guards |
| memory budget     | cgroup v2 limits          | the machine's memory (psutil)                               |
| socket path       | 107 bytes (`sun_path`)    | 103 bytes, macOS's (`socket_path_max`)                      |
| service manager   | systemd                   | launchd on macOS; else none: started on demand (by platform, |
|                   |                           | not by portable mode: `service_manager`)                    |

`HOLSRV_PORTABLE=1` (read once, when this module is first imported) turns
every Linux-only facility off, so the fallbacks run, and are tested, on
Linux.  It is a testing and diagnostic knob, not a setting: nothing is
gained by it on a machine that has the facilities.  Tests that need one
fallback in a process that did not start portable set `PORTABLE`.

Light at import (stdlib only), and below every other layer: psutil is
imported by the one fallback that needs it.  The watchdog needs no switch of
its own: it polls its parent always, and the death signal is armed or not
by the daemon that starts it (`process.py`).
"""

from __future__ import annotations

import os
import socket
import struct
import sys

PORTABLE_ENV = "HOLSRV_PORTABLE"
PORTABLE = os.environ.get(PORTABLE_ENV, "").strip() not in ("", "0")
PLATFORM = sys.platform  # what `service_manager` goes by (tests set "darwin")
LINUX = sys.platform.startswith("linux")
# The stat poll's interval, where there is no inotify: how late a write with
# no call (sync on write, a rebuilt ancestor) is noticed.  A call looks at once.
STAT_POLL_S = 0.5


def linux() -> bool:
    """Whether the Linux-only facilities may be used: on Linux, and not in portable mode."""
    return LINUX and not PORTABLE


def inotify() -> bool:
    return linux()


def proc_counters() -> bool:
    """/proc/PID/status's counters and /proc/PID/task/TID/children lists."""
    return linux() and os.path.exists(f"/proc/self/task/{os.getpid()}/children")


def pidfd() -> bool:
    return linux() and hasattr(os, "pidfd_open")


def death_signal() -> bool:
    """PR_SET_PDEATHSIG, armed in the watchdog; without it the watchdog's parent poll alone notices."""
    return linux()


def cgroups() -> bool:
    return linux()


# The size of a Unix socket address's path (`sun_path`): 108 bytes on Linux,
# 104 on macOS and the BSDs.  A path must leave room for its closing NUL.
SUN_PATH_LINUX, SUN_PATH_PORTABLE = 108, 104


def socket_path_max() -> int:
    """The longest Unix socket path, in bytes, a daemon may listen on here (macOS's in portable
    mode, so a path that would not fit on a Mac is caught on Linux too)."""
    return (SUN_PATH_LINUX if linux() else SUN_PATH_PORTABLE) - 1


def peer_credentials(sock: socket.socket) -> tuple[int | None, int] | None:
    """(pid, uid) of the process at the other end of the Unix socket `sock`; pid None where the
    system does not say it; None where no check is possible."""
    option = getattr(socket, "SO_PEERCRED", None)
    if linux() and option is not None:
        try:
            pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
        except OSError:
            return None
        return pid, uid
    local = getattr(socket, "LOCAL_PEERCRED", None)
    if local is not None:  # macOS and the BSDs: struct xucred (version, uid, ngroups, groups[16])
        try:
            raw = sock.getsockopt(getattr(socket, "SOL_LOCAL", 0), local, struct.calcsize("2Ih16I"))
            _version, uid = struct.unpack_from("2I", raw)
        except (OSError, struct.error):
            return None
        return None, uid
    return None


def peer_check() -> str:
    """How a client's user is checked here (for `status` and `holctl doctor`)."""
    if linux() and hasattr(socket, "SO_PEERCRED"):
        return "SO_PEERCRED"
    if hasattr(socket, "LOCAL_PEERCRED"):
        return "LOCAL_PEERCRED"
    return "no check possible: the private socket directory is the guard"


def service_manager() -> str:
    """What `holctl install-service` installs holsrv with: "systemd" on Linux, "launchd" on
    macOS, "none" elsewhere (the daemon starts on demand).  By platform, not by portable mode:
    it is a choice of what to write, not a facility the daemon uses."""
    if PLATFORM == "darwin":
        return "launchd"
    return "systemd" if PLATFORM.startswith("linux") else "none"


def machine_bytes() -> int:
    """The machine's memory, however the system tells it."""
    import psutil  # not at import: the watchdog-side and stdlib-only readers never need it

    return int(psutil.virtual_memory().total)


def described() -> dict[str, str]:
    """Each concern and the facility used for it on this machine, now."""
    return {
        "file watching": "inotify" if inotify() else f"stat poll (every {STAT_POLL_S:g}s)",
        "process footprint": "/proc" if proc_counters() else "psutil",
        "exit watch": "pidfd" if pidfd() else "polling",
        "parent death": "PR_SET_PDEATHSIG and polling" if death_signal() else "polling",
        "peer credentials": peer_check(),
        "memory budget": "cgroup v2 limits and machine memory" if cgroups() else "machine memory",
        "socket path": f"at most {socket_path_max()} bytes",
        "service manager": service_manager(),
        "portable mode": "on" if PORTABLE else "off",
    }
