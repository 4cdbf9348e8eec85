"""A launchd LaunchAgent for holsrv on macOS (`holctl install-service` there).

launchd has no user units: a property list in `~/Library/LaunchAgents`,
loaded into the user's GUI domain with `launchctl bootstrap gui/UID FILE`.
The agent runs the `holsrv` of the environment holctl runs from, with the
same HOL settings the systemd units would pass (`service.units`), on the
socket the clients look for.

Keep-alive, not socket activation: launchd's `Sockets` hands the daemon its
listening socket only through `launch_activate_socket` in libSystem, which
the daemon would have to call by ctypes and which cannot be tried off a Mac;
with `RunAtLoad` and `KeepAlive` {SuccessfulExit: false} the daemon binds
its socket itself at login (as a daemon started on demand does), launchd
starts it again after a crash, and after a clean exit (`holctl shutdown`)
the next client starts one on demand.  holctl writes the file and prints the
launchctl line to run: launchd itself has not been tried by these tests.

Standard library only, like the rest of holctl.
"""

from __future__ import annotations

import math
import os
import plistlib
from collections.abc import Mapping
from pathlib import Path

from holctl import service
from holsrv.rpc import paths

LABEL = "local.holsrv"  # `local.`: launchd's prefix for an agent no vendor ships


def agent_file(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get("HOME") or Path.home()) / "Library" / "LaunchAgents" / f"{LABEL}.plist"


def agent(environ: Mapping[str, str], stop_timeout_s: float = 10.0,
          exec_start: list[str] | None = None) -> tuple[dict, list[str]]:
    """The agent's property list, and the notes worth telling the user (`service.units`'s)."""
    made = service.units(environ, stop_timeout_s, exec_start)
    explicit = environ.get(paths.SOCKET_ENV)
    socket = paths.checked_socket(Path(explicit)) if explicit else paths.default_socket()
    log = paths.log_path(socket)  # where `holctl logs --daemon` looks, as for a daemon started on demand
    program = [*made.exec_start, "--socket", str(socket), "--log-file", str(log)]
    return {
        "Label": LABEL,
        "ProgramArguments": program,
        "EnvironmentVariables": made.environment,
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},  # again after a crash, not after `holctl shutdown`
        "ThrottleInterval": 10,  # a bad setting (exit 78) is retried this seldom
        # The daemon's own drain and the servers' escalation, as the systemd unit's TimeoutStopSec.
        "ExitTimeOut": math.ceil(2 * stop_timeout_s) + service.STOP_MARGIN_S,
        "ProcessType": "Background",
        "StandardErrorPath": str(log.with_name("launchd-stderr.log")),  # what comes before the log is open
    }, made.notes


def domain() -> str:
    return f"gui/{os.getuid()}"


def install(environ: Mapping[str, str], stop_timeout_s: float, say) -> None:
    """Write the agent's plist and say the launchctl lines that load it."""
    made, notes = agent(environ, stop_timeout_s)
    where = agent_file(environ)
    again = where.is_file()
    where.parent.mkdir(parents=True, exist_ok=True)
    paths.private_dir(Path(made["StandardErrorPath"]).parent, fix="set XDG_STATE_HOME to a directory of your own")
    where.write_bytes(plistlib.dumps(made))
    say(f"wrote {where}")
    say(f"  ProgramArguments={' '.join(made['ProgramArguments'])}")
    for name, value in made["EnvironmentVariables"].items():
        say(f"  {name}={value}")
    for note in notes:
        say(f"  note: {note}")
    if again:
        say(f"it was there already; unload the old agent first: launchctl bootout {domain()}/{LABEL}")
    say(f"to load it now (and at each login), run: launchctl bootstrap {domain()} {where}")
    say("launchd then keeps holsrv running, starting it again if it crashes; after `holctl shutdown` the next "
        "holctl or holmcp call starts one on demand. Logs: `holctl logs --daemon`.")


def uninstall(environ: Mapping[str, str], say) -> None:
    where = agent_file(environ)
    if not where.is_file():
        say(f"no holsrv agent at {where}: nothing to remove")
        return
    where.unlink()
    say(f"removed {where}")
    say(f"to stop the loaded agent, run: launchctl bootout {domain()}/{LABEL}")
    say("clients start the daemon on demand from now on.")


def installed(environ: Mapping[str, str] | None = None) -> bool:
    return agent_file(environ).is_file()
