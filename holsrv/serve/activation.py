"""What systemd hands a service: a listening socket (socket activation) and a journal stream.

The protocol is sd_listen_fds(3) and systemd.exec(5)'s JOURNAL_STREAM, read
with the standard library only.
"""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import MutableMapping

# sd_listen_fds(3): passed descriptors start here.
LISTEN_FDS_START = 3
_LISTEN_VARIABLES = ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES")


def listening_socket(environ: MutableMapping[str, str] | None = None) -> socket.socket | None:
    """The Unix stream socket systemd passed us on fd 3, or None when not socket-activated.

    The variables are removed whatever they said, so the HOL servers we start
    never believe systemd passed *them* a socket; LISTEN_PID guards against
    variables inherited from a parent that was activated itself.
    """
    env = os.environ if environ is None else environ
    pid, count = env.get("LISTEN_PID", ""), env.get("LISTEN_FDS", "")
    for name in _LISTEN_VARIABLES:
        env.pop(name, None)
    if not (pid.isdigit() and int(pid) == os.getpid() and count.isdigit() and int(count) >= 1):
        return None
    if int(count) > 1:
        raise OSError(f"systemd passed {count} sockets; holsrv listens on one (ListenStream= once in holsrv.socket)")
    sock = socket.socket(fileno=LISTEN_FDS_START)
    if sock.family != socket.AF_UNIX or sock.type != socket.SOCK_STREAM:
        sock.detach()
        raise OSError("systemd passed a socket that is not a Unix stream socket; holsrv.socket needs ListenStream=PATH")
    os.set_inheritable(sock.fileno(), False)  # systemd clears FD_CLOEXEC; HOL servers must not hold it
    sock.setblocking(False)
    return sock


def under_systemd(environ: MutableMapping[str, str] | None = None) -> bool:
    """True when systemd runs us with stderr going to the journal (or another log it keeps).

    JOURNAL_STREAM names the journal's stream by device and inode: it must be
    stderr itself, since a shell started from a systemd service (a terminal
    emulator's) inherits the variable with a stderr of its own.  Failing
    that, INVOCATION_ID with stderr not a terminal: systemd keeps the output.
    """
    env = os.environ if environ is None else environ
    try:
        info = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    stream = env.get("JOURNAL_STREAM", "")
    if stream:
        device, _, inode = stream.partition(":")
        if device.isdigit() and inode.isdigit() and (info.st_dev, info.st_ino) == (int(device), int(inode)):
            return True
    return bool(env.get("INVOCATION_ID")) and not os.isatty(sys.stderr.fileno())
