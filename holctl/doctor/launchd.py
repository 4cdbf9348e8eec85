"""holsrv's launchd agent (`holctl install-service` on macOS), in place of the systemd checks there.

Advice only: without the agent the first call starts a daemon on demand.
Whether launchd has loaded it is launchctl's to say (`launchctl print`):
doctor reads the file, and never runs launchctl.
"""

from __future__ import annotations

import os
import plistlib
from collections.abc import Mapping

from holctl import launchd
from holctl.doctor.report import Check, Status


def agent(environ: Mapping[str, str]) -> Check:
    """Whether the agent's property list is there, and one launchd can read."""
    file = launchd.agent_file(environ)
    if not file.is_file():
        return Check("launchd", Status.OK, False, f"no holsrv agent at {file}: the daemon starts on demand.",
                     "optional: `holctl install-service` for a launchd agent that keeps it running from login")
    try:
        made = plistlib.loads(file.read_bytes())
        program = " ".join(made["ProgramArguments"])
    except (OSError, plistlib.InvalidFileException, KeyError, TypeError, ValueError) as err:
        return Check("launchd", Status.WARN, False, f"{file} is not an agent launchd can run ({err}).",
                     "`holctl install-service` again")
    domain = f"gui/{os.getuid()}"
    return Check("launchd", Status.OK, False,
                 f"agent installed at {file}, running {program}; `launchctl print {domain}/{launchd.LABEL}` "
                 "says whether launchd has it loaded.",
                 "")
