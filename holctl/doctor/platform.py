"""The `platform` check of `holctl doctor`: which facility each platform concern uses on this machine.

A report from a Mac (or from a run with `HOLSRV_PORTABLE=1`) then says what
ran: `file watching: stat poll (every 0.5s)`, `parent death: polling`.  Advice
only: every fallback works, some with less (a stat poll's delay, no peer check).
"""

from __future__ import annotations

from holctl.doctor.report import Check, Status
from holsrv import facilities


def platform() -> Check:
    used = facilities.described()
    said = "; ".join(f"{concern}: {facility}" for concern, facility in used.items())
    if facilities.linux():
        return Check("platform", Status.OK, False, said)
    return Check("platform", Status.OK, False, said + " (portable fallbacks: see docs/operations.md)")
