"""systemd's user manager, and holsrv's units in it (`holctl install-service`).

Advice only: without systemd the first call starts a daemon on demand.
"""

from __future__ import annotations

from collections.abc import Mapping

from holctl import service
from holctl.doctor.report import Check, Status


def user_manager(environ: Mapping[str, str]) -> tuple[Check, str | None]:
    """Whether `systemctl --user` answers; the systemctl to use if it does."""
    try:
        tool = service.user_manager(service.systemctl(environ))
    except service.ServiceError as err:
        message = str(err).split(" Without systemd")[0].split("; nothing was installed")[0]
        return Check("systemd", Status.WARN, False, f"{message}: the daemon starts on demand instead.",
                     "nothing, unless you want a service: then log in to a session with a systemd user "
                     "manager (`loginctl enable-linger` keeps one running)"), None
    return Check("systemd", Status.OK, False, f"the user manager answers `{tool} --user`."), tool


def units(environ: Mapping[str, str], tool: str | None) -> tuple[Check, str]:
    """Whether holsrv's units are installed and listening; when systemd would start the
    daemon on the first connection, a sentence saying so (doctor must not connect then)."""
    where = service.unit_dir(environ)
    if not service.installed(environ):
        status = Status.OK if tool is None else Status.WARN
        return Check("units", status, False, f"not installed in {where}: the daemon starts on demand.",
                     "" if tool is None else "optional: `holctl install-service` for a systemd user service"), ""
    if tool is None:
        return Check("units", Status.WARN, False, f"installed in {where}, but no user manager runs them.",
                     "`holctl uninstall-service`, or use a session with systemd"), ""
    listening = _active(tool, service.SOCKET_UNIT)
    running = _active(tool, service.SERVICE_UNIT)
    if not listening:
        return Check("units", Status.WARN, False, f"installed in {where}, but {service.SOCKET_UNIT} is not active.",
                     f"`systemctl --user enable --now {service.SOCKET_UNIT}`"), ""
    said = "holsrv.service is running" if running else "holsrv.service starts on the first connection"
    check = Check("units", Status.OK, False, f"installed in {where}; {service.SOCKET_UNIT} listens, {said}.")
    starts = f"systemd listens on the socket ({service.SOCKET_UNIT}) and starts it on the first call."
    return check, "" if running else starts


def _active(tool: str, unit: str) -> bool:
    try:
        return service.run([tool, "--user", "is-active", "--quiet", unit]).returncode == 0
    except service.ServiceError:
        return False
