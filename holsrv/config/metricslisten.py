"""Where the metrics endpoint listens (`metrics_listen`): off, a loopback address, or a Unix socket.

A value is `HOST:PORT` (`127.0.0.1:9464`, `[::1]:9464`, `localhost:9464`), a
Unix socket path (starting with `/`), or empty (off, the default).  The
metrics say which files' servers run and how busy the daemon is, which is no
business of another machine's, so an address that is not loopback is refused
unless the value ends with `!` (`0.0.0.0:9464!`): the operator saying, in the
one value, that listening beyond this machine is meant (a pod's metrics port
scraped by the cluster's Prometheus).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

# What an operator writes to listen beyond loopback, at the end of the value.
ANY_MARK = "!"
LOOPBACK_NAMES = ("localhost",)


@dataclass(frozen=True)
class Listen:
    """A TCP address (`host`, `port`) or a Unix socket (`path`)."""

    host: str = ""
    port: int = 0
    path: Path | None = None

    def __str__(self) -> str:
        if self.path is not None:
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"


def parse(raw: str) -> Listen | None:
    """The endpoint `raw` names, None for off; ValueError saying what is wrong."""
    value = raw.strip()
    if not value:
        return None
    if value.startswith("/"):
        return Listen(path=Path(value))
    meant = value.endswith(ANY_MARK)
    value = value.removesuffix(ANY_MARK)
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"metrics_listen={raw!r} is neither HOST:PORT (127.0.0.1:9464) nor a Unix socket path "
                         "(starting with /)")
    host = host.removeprefix("[").removesuffix("]")
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"metrics_listen={raw!r}: the port {port_text!r} is not a number") from None
    if not 0 <= port < 65536:  # 0: a free port the system picks (the log says which)
        raise ValueError(f"metrics_listen={raw!r}: the port {port} is not between 0 and 65535")
    if not meant and not _loopback(host):
        raise ValueError(
            f"metrics_listen={raw!r} would serve the daemon's metrics beyond this machine: use a loopback "
            f"address (127.0.0.1:{port}) or a Unix socket path, or end the value with {ANY_MARK!r} "
            f"({host}:{port}{ANY_MARK}) to say that other machines may read them")
    return Listen(host=host, port=port)


def _loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve anywhere
