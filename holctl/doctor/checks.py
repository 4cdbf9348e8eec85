"""Every check of `holctl doctor`, in the order a new user would fix them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from holctl.doctor import daemon, hol, hosts, launchd, platform, scripts, systemd
from holctl.doctor.report import Check
from holsrv import facilities
from holsrv.rpc import paths


def run(socket: Path | None, cwd: Path, environ: Mapping[str, str], hol_timeout_s: float) -> list[Check]:
    """The checks' results; needed ones first (see `report.Check.needed`)."""
    found, settings = daemon.settings(environ)
    which, command = hol.which_hol(settings, environ)
    server, probed, info = hol.handshake(settings, command, hol_timeout_s)
    results = [found, which, server, probed, hol.holmake(settings, command, environ)]
    if facilities.service_manager() == "launchd":  # macOS: holsrv's agent, not systemd's units
        service, via_systemd = [launchd.agent(environ)], ""
    else:
        manager, tool = systemd.user_manager(environ)
        units, via_systemd = systemd.units(environ, tool)
        service = [manager, units]
    # systemd listens on the socket the units name: the default one, not a --socket given here.
    sock = socket or settings.socket or paths.default_socket()
    running, status = daemon.daemon(sock, via_systemd if socket is None else "")
    results += [running, daemon.memory(settings, status)]
    holdir = info.holdir if info is not None and info.holdir else environ.get("HOLDIR") or hol.holdir_of(command)
    results += [scripts.heap(cwd, holdir), scripts.ancestors(cwd, holdir), platform.platform(), *service]
    home = Path(environ.get("HOME") or Path.home())
    return results + hosts.checks(home, cwd, environ)
