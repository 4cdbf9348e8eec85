"""systemd user units for this installation of holsrv, and following the daemon's log.

`holctl install-service` writes `holsrv.socket` and `holsrv.service` into
`$XDG_CONFIG_HOME/systemd/user`, with the `holsrv` of the environment holctl
runs from and the HOL settings of the caller's environment, then has the user
manager listen on the socket.  The systemctl it runs is `$HOLCTL_SYSTEMCTL`
when set (tests point it at a fake), else `systemctl` on PATH.

Standard library only, like the rest of holctl.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

SOCKET_UNIT, SERVICE_UNIT = "holsrv.socket", "holsrv.service"
SYSTEMCTL_ENV = "HOLCTL_SYSTEMCTL"
JOURNALCTL_ENV = "HOLCTL_JOURNALCTL"
SYSTEMCTL_TIMEOUT_S = 30.0
# Besides every HOLSRV_* variable: HOL's own names, and where the config file is.
PASSED_ON = ("HOL_BIN", "HOLDIR", "HOL_LSP_EXTRA_PATH", "HOL_LSP_MCP_MAX_SERVERS", "XDG_CONFIG_HOME")
# The socket unit names the socket; the daemon takes its path from what systemd passes.
NOT_PASSED_ON = ("HOLSRV_SOCKET",)
# On top of the daemon's own shutdown budget (HOLSRV_STOP_TIMEOUT_S, twice:
# the drain and the servers' escalation, then the SIGKILLed ones' reaping).
STOP_MARGIN_S = 10
DEFAULT_SOCKET = "%t/holsrv/holsrv.sock"  # %t: $XDG_RUNTIME_DIR, where the clients look

ON_DEMAND = (
    "Without systemd nothing needs installing: the first holctl or holmcp call that finds no daemon starts "
    "one in the background (it logs to $XDG_STATE_HOME/holsrv/holsrv.log, see `holctl logs --daemon`) and it "
    "exits after an hour with no HOL server and no client."
)


class ServiceError(Exception):
    """What went wrong and what to do instead; holctl prints it and exits 1."""


@dataclass
class Units:
    """The two unit files' text, and what went into them worth telling the user."""

    socket: str
    service: str
    exec_start: list[str]
    environment: dict[str, str]
    notes: list[str] = field(default_factory=list)


def unit_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where user units go: `$XDG_CONFIG_HOME/systemd/user` (default `~/.config`)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "systemd" / "user"


def holsrv_command() -> list[str]:
    """The daemon of the environment holctl runs from: its `holsrv` script, else `python -m holsrv`.

    Not resolved through symlinks: a virtual environment's python is a link
    to the system one, whose bin has no holsrv.
    """
    script = Path(sys.executable).parent / "holsrv"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "holsrv"]


def units(environ: Mapping[str, str] | None = None, stop_timeout_s: float = 10.0,
          exec_start: list[str] | None = None) -> Units:
    """The unit files for `environ`'s HOL settings and this installation's holsrv."""
    env = os.environ if environ is None else environ
    command = exec_start or holsrv_command()
    passed = {k: v for k, v in sorted(env.items())
              if (k.startswith("HOLSRV_") or k in PASSED_ON) and k not in NOT_PASSED_ON and v}
    notes = []
    if not ({"HOL_BIN", "HOLDIR", "HOLSRV_HOL_BIN"} & passed.keys()):
        # The user manager's PATH is not the shell's: pin the `hol` found now.
        found = shutil.which("hol", path=env.get("PATH"))
        if found:
            passed["HOL_BIN"] = found
            notes.append(f"HOL_BIN={found}: the `hol` on your PATH (the user manager's PATH may differ)")
        else:
            notes.append("no HOL_BIN, HOLDIR or `hol` on PATH: set HOL_BIN (or HOLDIR) and run install-service "
                         "again, or set hol_bin in the config file")
    from holsrv.config.settings import CONSTANTS, env_names

    for name in sorted({name for constant in CONSTANTS for name in env_names(constant)} & passed.keys()):
        del passed[name]  # the daemon would only warn at each start that it is fixed
        notes.append(f"{name} left out: it is no longer a setting but a constant (docs/settings.md)")
    for name, value in list(passed.items()):
        if "\n" in value or "\0" in value:
            del passed[name]
            notes.append(f"{name} left out: its value has a line break, which a unit file cannot hold")
    socket_path = env.get("HOLSRV_SOCKET")
    listen = _escape(socket_path) if socket_path else DEFAULT_SOCKET
    stop_s = math.ceil(2 * stop_timeout_s) + STOP_MARGIN_S
    socket_text = f"""\
# Written by `holctl install-service`; `holctl uninstall-service` removes it.
# systemd listens here for holsrv; the first connection starts holsrv.service,
# which takes this socket (no client races another to start the daemon).
[Unit]
Description=holsrv socket: starts the holsrv daemon on the first connection

[Socket]
ListenStream={listen}
SocketMode=0600
DirectoryMode=0700
# One daemon serves every connection.
Accept=no

[Install]
WantedBy=sockets.target
"""
    environment = "".join(f"Environment={_quote(f'{k}={v}')}\n" for k, v in passed.items())
    service_text = f"""\
# Written by `holctl install-service`; `holctl uninstall-service` removes it.
# Started by holsrv.socket.  The HOL settings below are those of the shell
# install-service ran in; $XDG_CONFIG_HOME/holsrv/config.toml is read too.
[Unit]
Description=holsrv: warm HOL4 language servers for agents and holctl
Requires={SOCKET_UNIT}
After={SOCKET_UNIT}

[Service]
Type=simple
ExecStart={" ".join(_quote(part, exec_line=True) for part in command)}
{environment}Restart=on-failure
RestartSec=2
# A bad config file or setting (holsrv exits EX_CONFIG): the next connection
# tries again, after it is fixed, rather than systemd in a loop.
RestartPreventExitStatus=78
# `systemctl --user reload holsrv` restarts the daemon in place, keeping every
# warm HOL server (as `holctl restart-daemon` does); `restart` stops them all.
ExecReload=/bin/kill -HUP $MAINPID
# On SIGTERM the daemon drains its calls and stops every HOL server itself,
# escalating to SIGKILL, within HOLSRV_STOP_TIMEOUT_S ({stop_timeout_s:g}s).  mixed:
# SIGTERM goes to the daemon alone (not racing its shutdown with the servers'),
# and whatever is left in the unit when it is done, or when this timeout
# passes, is SIGKILLed.
KillMode=mixed
TimeoutStopSec={stop_s}

[Install]
Also={SOCKET_UNIT}
"""
    return Units(socket_text, service_text, command, passed, notes)


def _escape(text: str) -> str:
    """`text` with systemd's specifiers (`%`) escaped."""
    return text.replace("%", "%%")


def _quote(text: str, exec_line: bool = False) -> str:
    """One word of a unit file's value, double-quoted when it must be (systemd.syntax(7))."""
    text = _escape(text)
    if exec_line:
        text = text.replace("$", "$$")  # ExecStart= expands $NAME
    if text and not any(c in text for c in ' \t"\'\\;'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- running systemctl -----------------------------------------------------------


def systemctl(environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    return env.get(SYSTEMCTL_ENV) or shutil.which("systemctl")


def run(command: list[str]) -> subprocess.CompletedProcess:
    """Run one systemctl command, bounded; ServiceError if it cannot run at all."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=SYSTEMCTL_TIMEOUT_S,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise ServiceError(f"could not run {' '.join(command)}: {err}") from None


def user_manager(tool: str | None) -> str:
    """The systemctl to use, once the user's systemd instance answers it; else ServiceError."""
    if tool is None:
        raise ServiceError(f"systemctl is not installed here, so there is no systemd to run holsrv. {ON_DEMAND}")
    probe = run([tool, "--user", "show-environment"])
    if probe.returncode != 0:
        said = (probe.stderr or probe.stdout).strip().splitlines()[:1]
        raise ServiceError(
            f"no systemd user instance answers here ({tool} --user: {said[0] if said else 'failed'}); nothing was "
            f"installed. {ON_DEMAND}"
        )
    return tool


def install(environ: Mapping[str, str], stop_timeout_s: float, say) -> None:
    """Write the units, reload the user manager, enable and start the socket; `say` each step."""
    tool = user_manager(systemctl(environ))
    made = units(environ, stop_timeout_s)
    where = unit_dir(environ)
    again = installed(environ)
    where.mkdir(parents=True, exist_ok=True)
    for name, text in ((SOCKET_UNIT, made.socket), (SERVICE_UNIT, made.service)):
        (where / name).write_text(text, encoding="utf-8")
        say(f"wrote {where / name}")
    say(f"  ExecStart={' '.join(made.exec_start)}")
    for name, value in made.environment.items():
        say(f"  Environment={name}={value}")
    for note in made.notes:
        say(f"  note: {note}")
    steps = [["daemon-reload"], ["enable", "--now", SOCKET_UNIT]]
    if again:
        # A daemon the old units started keeps its old settings: restart it if it runs.
        steps.append(["try-restart", SERVICE_UNIT])
    for args in steps:
        _step([tool, "--user", *args], say)
    say(f"systemd now listens on the socket ({SOCKET_UNIT}); the first holctl or holmcp call starts holsrv. "
        "Logs: `holctl logs --daemon` (journalctl --user -u holsrv). To keep it running after you log out: "
        "`loginctl enable-linger`.")


def uninstall(environ: Mapping[str, str], say) -> None:
    """Stop and disable the units, remove their files, reload; `say` each step."""
    where = unit_dir(environ)
    present = [where / name for name in (SOCKET_UNIT, SERVICE_UNIT) if (where / name).exists()]
    tool = systemctl(environ)
    if tool is not None and present:
        _step([tool, "--user", "disable", "--now", SOCKET_UNIT, SERVICE_UNIT], say)
    for path in present:
        path.unlink()
        say(f"removed {path}")
    if not present:
        say(f"no holsrv units in {where}: nothing to remove")
    elif tool is not None:
        _step([tool, "--user", "daemon-reload"], say)
    say("clients start the daemon on demand from now on.")


def _step(command: list[str], say) -> None:
    done = run(command)
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()
        raise ServiceError(f"`{' '.join(command)}` failed (exit {done.returncode}): {said}")
    say(f"ran {' '.join(command)}")


def installed(environ: Mapping[str, str] | None = None) -> bool:
    return (unit_dir(environ) / SERVICE_UNIT).is_file()


def journal_command(lines: int, follow: bool, environ: Mapping[str, str] | None = None) -> list[str]:
    env = os.environ if environ is None else environ
    tool = env.get(JOURNALCTL_ENV) or "journalctl"
    return [tool, "--user", "-u", "holsrv", "-n", str(lines), "--no-pager", *(["-f"] if follow else [])]
