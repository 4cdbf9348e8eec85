"""holctl: ask the holsrv daemon one question about a HOL4 script and print the answer.

Stateless and light: it parses arguments, sends one typed request, and prints
the reply as text (holctl.render) or JSON.  All HOL knowledge is in the daemon.
"""

from __future__ import annotations

from pathlib import Path

import click

from holctl.calls import EXIT_CODES, Target
from holctl.commands import doctor, editor, fleet, questions, service, watch
from holsrv import __version__


@click.group(epilog=EXIT_CODES, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--socket",
    type=click.Path(path_type=Path),
    default=None,
    help="The daemon's socket. Default: $HOLSRV_SOCKET, else the per-user default.",
)
@click.option("--no-start", is_flag=True, help="Do not start a daemon if none is running.")
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show what diagnostics, goalState, try and holmake wait for, on stderr. Default: when stderr is a terminal.",
)
@click.option(
    "--expect-hash",
    default="",
    help="The content hash (8+ hex digits) an earlier answer gave: if FILE changed since, the answer says so.",
)
@click.version_option(__version__, prog_name="holctl")
@click.pass_context
def cli(ctx: click.Context, socket: Path | None, no_start: bool, progress: bool | None, expect_hash: str) -> None:
    """Ask the holsrv daemon about a HOL4 script.

    LINE and COLUMN are 1-based; COLUMN counts Unicode characters. FILE may be
    relative to the current directory. A daemon is started if none runs.
    """
    ctx.obj = Target(socket, autostart=not no_start, progress=progress, expect_hash=expect_hash)


for _family in (questions, fleet, service, doctor, watch, editor):
    for _command in _family.COMMANDS:
        cli.add_command(_command)


def main() -> None:
    cli(prog_name="holctl")
