"""The watchdog: the daemon's direct child for each HOL server and Holmake run.

A parent-death signal reaches only the daemon's direct child, and a `hol`
that is a wrapper script runs the real server as *its* child; a server
that ignores SIGTERM and end of input would outlive the daemon.  So the
direct child is this small program, stdlib only, run by path
(`python -I -S watchdog.py DAEMON_PID COMMAND...`, see `command`).  It starts
COMMAND in its own process group (which the daemon made, the watchdog
leading it), handing it its stdin, stdout and stderr as they are: the
server's pipes reach the server directly and nothing is copied.  Then it
only waits, for one of:

- COMMAND exits: the watchdog exits with the same status (dying of the same
  signal), so the daemon's exit watch, stop escalation and messages see the
  server's own end.
- The daemon dies (the parent-death signal `DEATH_SIGNAL` the daemon armed,
  or, checked every `POLL_S`, a parent that is no longer the daemon): it
  sends SIGTERM to the whole group, gives it `GRACE_S`, then SIGKILLs the
  group, itself included.

SIGTERM to the group (the daemon stopping a server) is the server's to obey;
the watchdog ignores it and keeps waiting, so it never leaves first.
"""

from __future__ import annotations

import os
import signal
import sys
import time

DEATH_SIGNAL = signal.SIGUSR1  # the parent-death signal the daemon arms in the watchdog
GRACE_S = 1.0  # between SIGTERM and SIGKILL of the group, once the daemon is gone
POLL_S = 1.0  # how often the parent is looked at, should the death signal be missed
_WAKE = frozenset({signal.SIGCHLD, DEATH_SIGNAL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
# Python ignores these; an ignored signal stays ignored across exec, so the
# command gets them back at their defaults (as subprocess's restore_signals does).
_RESTORE = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, name))


def command(argv: list[str], daemon_pid: int | None = None) -> list[str]:
    """The argv that runs `argv` under a watchdog of the daemon `daemon_pid` (default: this process)."""
    pid = os.getpid() if daemon_pid is None else daemon_pid
    return [sys.executable, "-I", "-S", os.path.abspath(__file__), str(pid), *argv]


def main(args: list[str]) -> int:
    if len(args) < 2 or not args[0].isdigit():
        os.write(2, b"usage: watchdog.py DAEMON_PID COMMAND [ARG...]\n")
        return 2
    daemon, argv = int(args[0]), args[1:]
    # Blocked, these signals wait for `sigtimedwait` below instead of acting.
    signal.pthread_sigmask(signal.SIG_BLOCK, _WAKE)
    if os.getppid() != daemon:
        return 1  # the daemon died before we were ready: start nothing
    try:
        child = os.posix_spawnp(argv[0], argv, os.environ, setsigmask=(), setsigdef=_RESTORE)
    except OSError as err:
        os.write(2, f"holsrv watchdog: could not start {argv[0]}: {err}\n".encode())
        return 127
    # The child has the pipes; our copies of stdin and stdout only wait here.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    while True:
        pid, status = os.waitpid(child, os.WNOHANG)
        if pid == child:
            return _exit_like(status)
        if os.getppid() != daemon:
            _end_group(child)
        signal.sigtimedwait(_WAKE, POLL_S)


def _end_group(child: int) -> None:
    """The daemon is gone: SIGTERM the group, a grace for the server, SIGKILL the group and us."""
    os.killpg(0, signal.SIGTERM)  # blocked here: it reaches everyone else
    deadline = time.monotonic() + GRACE_S
    while (left := deadline - time.monotonic()) > 0 and os.waitpid(child, os.WNOHANG)[0] != child:
        signal.sigtimedwait({signal.SIGCHLD}, left)
    os.killpg(0, signal.SIGKILL)


def _exit_like(status: int) -> int:
    """Exit as the child did: with its code, or of its signal."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
        os.kill(os.getpid(), sig)
        return 128 + sig  # a signal that does not end a process (SIGCHLD, ...)
    return os.waitstatus_to_exitcode(status)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
