"""What several holctl commands share: FILE, LINE COLUMN, --json, the waits, paging, seconds."""

from __future__ import annotations

import os

import click

from holsrv.rpc import limits


def absolute(file: str) -> str:
    """FILE as the daemon needs it: absolute, relative to the caller's cwd."""
    return os.path.abspath(os.path.expanduser(file))


class Seconds(click.ParamType):
    """Seconds from 0 to the daemon's limit: click's FloatRange lets NaN through."""

    name = "seconds"

    def convert(self, value, param, ctx) -> float:
        seconds = click.FLOAT.convert(value, param, ctx)
        problem = limits.seconds_problem(param.name if param is not None and param.name else "seconds", seconds)
        if problem is not None:
            self.fail(problem, param, ctx)
        return seconds


class PositionType(click.ParamType):
    """LINE or LINE:COLUMN, both 1-based: one position of `goalState --at`."""

    name = "LINE[:COL]"

    def convert(self, value, param, ctx) -> tuple[int, int | None]:
        if isinstance(value, tuple):
            return value
        line, _, column = str(value).partition(":")
        if not (line.isdecimal() and int(line) >= 1 and (not column or (column.isdecimal() and int(column) >= 1))):
            self.fail(f"{value!r} is not LINE or LINE:COLUMN (both 1-based numbers), e.g. 12 or 12:5", param, ctx)
        return int(line), int(column) if column else None


json_option = click.option("--json", "as_json", is_flag=True, help="Print the reply as JSON.")
file_argument = click.argument("file", type=click.Path())
position_arguments = [
    click.argument("line", type=click.IntRange(min=1)),
    click.argument("column", type=click.IntRange(min=1)),
]
wait_option = click.option(
    "--wait",
    type=Seconds(),
    default=None,
    help="Seconds to wait for the file to settle (daemon default 25). Nothing is cancelled when it runs out.",
)
defer_option = click.option(
    "--defer-after",
    type=Seconds(),
    default=None,
    help="Seconds after which, if the work is still running, a job handle is printed instead and the work goes "
    "on in the daemon: get its answer with `holctl job ID`.",
)
lookup_wait_options = [
    click.option(
        "--wait",
        type=Seconds(),
        default=None,
        help="Seconds to wait for the file's server to start and its compile to get here "
        "(default: the daemon's lookup wait, 25).",
    ),
    click.option("--no-wait", is_flag=True, help="Answer with what is known now (the same as --wait 0)."),
]


def at_position(fn):
    for decorator in reversed(position_arguments):
        fn = decorator(fn)
    return fn


def with_lookup_wait(fn):
    for decorator in reversed(lookup_wait_options):
        fn = decorator(fn)
    return fn


def with_paging(fn):
    """--limit and --page, for the answers that come a page at a time."""
    fn = click.option("--page", type=click.IntRange(min=1), default=1, show_default=True,
                      help="Which page (1-based).")(fn)
    return click.option("--limit", type=click.IntRange(min=1, max=200), default=20, show_default=True,
                        help="Matches per page.")(fn)


def lookup_wait(wait: float | None, no_wait: bool) -> float | None:
    """The lookup's `wait` from --wait / --no-wait; None leaves the daemon's default."""
    if no_wait and wait is not None:
        raise click.UsageError("give --wait or --no-wait, not both")
    return 0.0 if no_wait else wait

