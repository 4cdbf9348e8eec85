"""`holctl doctor`: check, one line each with the fix, what the main job needs and what is advice.

Light at import, as all of holctl: the checks (`holctl.doctor`) and what they
need (the settings, asyncio for the handshake) are imported when it runs.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from holctl.calls import Target
from holctl.options import Seconds, json_option

DOCTOR_EXIT = """\b
Exit status:
  0  every needed check passed (warnings are advice)
  1  a needed check failed: hol, proof_server, holmake, settings, daemon or memory
"""


@click.command("doctor", epilog=DOCTOR_EXIT)
@click.option("--hol-timeout", type=Seconds(), default=60.0, show_default=True,
              help="Seconds the `hol lsp` handshake may take (a heap loads in seconds to a minute).")
@json_option
@click.pass_obj
def doctor(target: Target, hol_timeout: float, as_json: bool) -> None:
    """Check HOL, its proof-checking server, Holmake, this directory's scripts, the daemon, the memory
    budget, systemd and the agent hosts' registrations; say how to fix what is wrong.

    Never starts the daemon; the only process it starts is a short `hol lsp --lsp-check-proofs`
    handshake, stopped before it ends. Reads the hosts' configuration files, never changes them.
    """
    import msgspec

    from holctl.doctor import checks, report
    from holsrv import __version__

    found = report.report(checks.run(target.socket, Path.cwd(), os.environ, hol_timeout), __version__)
    if as_json:
        click.echo(msgspec.json.format(msgspec.json.encode(found), indent=2).decode())
    else:
        click.echo(report.text(found))
    if not found.ok:
        raise SystemExit(1)


COMMANDS = [doctor]
