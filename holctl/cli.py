"""holctl: ask the holsrv daemon one question about a HOL4 script and print the answer.

Stateless and light: it parses arguments, sends one typed request, and prints
the reply as text (holctl.render) or JSON.  All HOL knowledge is in the daemon.
"""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path
from typing import TextIO

import click
import msgspec

from holctl.render import render
from holsrv import __version__
from holsrv.errors import DaemonUnreachable, HolsrvError
from holsrv.rpc import client, limits, messages

EXIT_CODES = """\b
Exit codes:
  0  answered (a failed proof is an answer, not an error)
  1  any other failure
  2  bad command line
  3  bad input: missing file, not a file, not UTF-8, permission denied, position out of range,
     bad request
  4  HOL problem: HOL not found, server died or stopped, server starting, servers busy,
     server timed out, HOL error, memory budget
  5  daemon unreachable, stopping or refusing this user; protocol mismatch, bad frame or
     connection closed
"""


class CallFailed(click.ClickException):
    """A daemon error as one line on stderr, `holctl: <code>: <message>`, and an exit code."""

    exit_code = 1

    def __init__(self, err: HolsrvError) -> None:
        super().__init__(str(err))
        self.code = err.code
        self.detail = err.detail

    def show(self, file=None) -> None:
        click.echo(f"holctl: {self.code}: {self.message}", file=file or sys.stderr)
        for line in self.detail.splitlines():
            click.echo(f"    {line}", file=file or sys.stderr)


class BadInput(CallFailed):
    exit_code = 3


class HolProblem(CallFailed):
    exit_code = 4


class Unreachable(CallFailed):
    exit_code = 5


_FAILURE_BY_CODE = {
    **dict.fromkeys(
        ["file_not_found", "not_a_file", "not_utf8", "permission_denied", "position_out_of_range", "bad_request"],
        BadInput,
    ),
    **dict.fromkeys(
        ["hol_not_found", "server_died", "server_stopped", "servers_busy", "server_timeout", "server_starting",
         "hol_error", "memory_budget"],
        HolProblem,
    ),
    **dict.fromkeys(
        ["daemon_unreachable", "protocol_mismatch", "bad_frame", "connection_closed", "daemon_stopping",
         "peer_refused"],
        Unreachable,
    ),
}


def failure_for(err: HolsrvError) -> CallFailed:
    """The ClickException (and so the exit code) for a daemon error."""
    return _FAILURE_BY_CODE.get(err.code, CallFailed)(err)


class LiveLine:
    """Progress frames on stderr: one line rewritten in place on a terminal, else a line each."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._tty = stream.isatty()
        self._shown = False

    def show(self, frame: messages.Progress) -> None:
        text = render(frame)
        if self._tty:
            self._stream.write("\r\x1b[K" + text)
        else:
            self._stream.write(text + "\n")
        self._stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._tty and self._shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()


class Target:
    """Where to send requests: the group's options, shared by every command."""

    def __init__(self, socket: Path | None, autostart: bool, progress: bool | None = None,
                 expect_hash: str = "") -> None:
        self.socket = socket
        self.autostart = autostart
        # None: show progress when stderr is a terminal.
        self.progress = progress
        self.expect_hash = expect_hash  # put on every request that takes one

    def ask(self, request: messages.Request, as_json: bool) -> None:
        """Send `request`, print its reply; a daemon error becomes a CallFailed.

        The reply timeout comes from the daemon's limits (`Client.reply_timeout`).
        Progress frames (diagnostics, goalState) become live lines on stderr
        unless `--json`; the daemon's warnings about this client's settings go
        to stderr too, so stdout stays the answer alone.
        """
        live = self._live_line(request, as_json)
        if live is not None and isinstance(request, _FOLLOWED):
            request = msgspec.structs.replace(request, progress=True)
        if self.expect_hash and hasattr(request, "expect_hash"):
            request = msgspec.structs.replace(request, expect_hash=self.expect_hash)
        try:
            with client.connect(self.socket, name="holctl", autostart=self.autostart) as conn:
                try:
                    reply = conn.call(request, on_progress=live.show if live else None)
                finally:
                    if live is not None:
                        live.clear()
                for warning in conn.welcome.settings_warnings:
                    click.echo(f"holctl: warning: {warning}", err=True)
        except HolsrvError as err:
            if as_json:  # scripts reading stdout get the error in the same shape
                error = messages.ErrorReply(err.code, str(err), err.detail)
                click.echo(msgspec.json.format(msgspec.json.encode(error), indent=2).decode())
            raise failure_for(err) from None
        except OSError as err:
            # Making the socket directory or the lock file can fail before any
            # daemon is involved; that is still "cannot reach the daemon".
            raise Unreachable(DaemonUnreachable(str(err))) from None
        if as_json:
            click.echo(msgspec.json.format(msgspec.json.encode(reply), indent=2).decode())
        else:
            click.echo(render(reply))

    def _live_line(self, request: messages.Request, as_json: bool) -> LiveLine | None:
        if as_json or not isinstance(request, _FOLLOWED):
            return None
        wanted = sys.stderr.isatty() if self.progress is None else self.progress
        return LiveLine(sys.stderr) if wanted else None


# Requests whose progress holctl shows as live lines.
_FOLLOWED = (messages.Diagnostics, messages.GoalState, messages.Holmake, messages.Try)


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


# -- options shared by several commands ---------------------------------------

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


def _with_wait(request_type, wait: float | None, **fields):
    """The request, with `wait` only if given: the daemon's default otherwise."""
    return request_type(**fields) if wait is None else request_type(wait=wait, **fields)


@cli.command("diagnostics", epilog=EXIT_CODES)
@file_argument
@wait_option
@json_option
@click.pass_obj
def diagnostics(target: Target, file: str, wait: float | None, as_json: bool) -> None:
    """Compile FILE, check every proof, and print the verdict and problems."""
    target.ask(_with_wait(messages.Diagnostics, wait, file=absolute(file)), as_json)


@cli.command("goalState", epilog=EXIT_CODES)
@file_argument
@click.argument("line", type=click.IntRange(min=1))
@click.argument("column", type=click.IntRange(min=1), required=False)
@wait_option
@json_option
@click.pass_obj
def goal_state(target: Target, file: str, line: int, column: int | None, wait: float | None, as_json: bool) -> None:
    """Print the goals at LINE:COLUMN inside a Proof…QED block of FILE.

    At a column: the goals before the tactic there (on the QED line, what is
    left at the end). Without COLUMN: the goals before the line's first
    tactic and after its last.
    """
    target.ask(_with_wait(messages.GoalState, wait, file=absolute(file), line=line, column=column), as_json)


PositionLookup = type[messages.Hover | messages.Definition | messages.References | messages.Completion]


def _position_command(name: str, request_type: PositionLookup, summary: str) -> None:
    """Register a command that takes FILE LINE COLUMN and the lookup wait."""

    @file_argument
    @at_position
    @with_lookup_wait
    @json_option
    @click.pass_obj
    def command(
        target: Target, file: str, line: int, column: int, wait: float | None, no_wait: bool, as_json: bool
    ) -> None:
        request = request_type(file=absolute(file), line=line, column=column, wait=lookup_wait(wait, no_wait))
        target.ask(request, as_json)

    command.__doc__ = summary
    cli.command(name, epilog=EXIT_CODES)(command)


_position_command(
    "hover", messages.Hover, "Print what HOL knows about the name at LINE:COLUMN: its type or statement."
)
_position_command("definition", messages.Definition, "Print where the name at LINE:COLUMN is defined.")
_position_command("references", messages.References, "Print where the name at LINE:COLUMN is used.")
_position_command("completion", messages.Completion, "Print completions for the name ending at LINE:COLUMN.")


@cli.command("documentSymbol", epilog=EXIT_CODES)
@file_argument
@with_lookup_wait
@json_option
@click.pass_obj
def document_symbol(target: Target, file: str, wait: float | None, no_wait: bool, as_json: bool) -> None:
    """Print an outline of FILE: its theorems, definitions and values."""
    target.ask(messages.DocumentSymbol(file=absolute(file), wait=lookup_wait(wait, no_wait)), as_json)


@cli.command("workspaceSymbol", epilog=EXIT_CODES)
@file_argument
@click.argument("query")
@with_paging
@with_lookup_wait
@json_option
@click.pass_obj
def workspace_symbol(
    target: Target, file: str, query: str, limit: int, page: int, wait: float | None, no_wait: bool, as_json: bool
) -> None:
    """Search the theorems and constants FILE can see for names containing QUERY (2 characters or more)."""
    request = messages.WorkspaceSymbol(
        file=absolute(file), query=query, limit=limit, page=page, wait=lookup_wait(wait, no_wait)
    )
    target.ask(request, as_json)


@cli.command("eval", epilog=EXIT_CODES)
@file_argument
@click.argument("code")
@click.option(
    "--timeout",
    type=Seconds(),
    default=None,
    help="Seconds the code may run (daemon default 120).",
)
@json_option
@click.pass_obj
def eval_(target: Target, file: str, code: str, timeout: float | None, as_json: bool) -> None:
    """Evaluate SML CODE in FILE's HOL session (CODE `-` reads standard input)."""
    if code == "-":
        code = sys.stdin.read()
    path = absolute(file)
    request = messages.Eval(path, code) if timeout is None else messages.Eval(path, code, timeout)
    target.ask(request, as_json)


@cli.command("retryCompile", epilog=EXIT_CODES)
@file_argument
@json_option
@click.pass_obj
def retry_compile(target: Target, file: str, as_json: bool) -> None:
    """Compile FILE again after its blocked dependencies were fixed."""
    target.ask(messages.RetryCompile(file=absolute(file)), as_json)


@cli.command("restart", epilog=EXIT_CODES)
@file_argument
@click.option(
    "--max-heap-mb",
    type=click.IntRange(min=0),
    default=None,
    help="Heap cap for the new server in MB (0: no cap). Default: keep the current cap.",
)
@json_option
@click.pass_obj
def restart(target: Target, file: str, max_heap_mb: int | None, as_json: bool) -> None:
    """Stop FILE's HOL server and start a fresh one."""
    target.ask(messages.Restart(file=absolute(file), max_heap_mb=max_heap_mb), as_json)


@cli.command("stop", epilog=EXIT_CODES)
@file_argument
@json_option
@click.pass_obj
def stop(target: Target, file: str, as_json: bool) -> None:
    """Stop FILE's HOL server, freeing its memory and its place; the next call starts a new one."""
    target.ask(messages.Stop(file=absolute(file)), as_json)


@cli.command("status", epilog=EXIT_CODES)
@json_option
@click.pass_obj
def status(target: Target, as_json: bool) -> None:
    """Print the daemon, its settings, and every HOL server it runs."""
    target.ask(messages.Status(), as_json)


@cli.command("try", epilog=EXIT_CODES)
@file_argument
@click.argument("line", type=click.IntRange(min=1))
@click.argument("candidates", nargs=-1, required=True, metavar="[COLUMN] TACTIC...")
@click.option("--timeout", type=Seconds(), default=None, help="Seconds each candidate may take (daemon default 30).")
@wait_option
@json_option
@click.pass_obj
def try_(
    target: Target, file: str, line: int, candidates: tuple[str, ...], timeout: float | None,
    wait: float | None, as_json: bool,
) -> None:
    """Try each TACTIC in place of LINE's tactic, one after another: try FILE LINE [COLUMN] TACTIC...

    A whole number right after LINE is the COLUMN the replaced text starts
    at; without it the line's whole tactic is replaced (a leading or trailing
    `>>` kept). The file is not changed, only the HOL server's copy, which gets
    the file's text back at the end. Prints, per candidate, the goals it
    leaves (or its error), its proof's status, its time and what changed.
    Put `--` before tactics that start with `-`.
    """
    column = None
    if candidates and candidates[0].isdigit():
        column, candidates = int(candidates[0]), candidates[1:]
    if not candidates or column == 0:
        raise click.UsageError("give LINE, an optional COLUMN (1-based), then one or more tactics to try")
    request = _with_wait(messages.Try, wait, file=absolute(file), line=line, column=column, tactics=list(candidates))
    target.ask(msgspec.structs.replace(request, timeout=timeout), as_json)


@cli.command("goalDiff", epilog=EXIT_CODES)
@file_argument
@click.argument("positions", nargs=-1, required=True, type=click.IntRange(min=1),
                metavar="LINE1 [COL1] LINE2 [COL2]")
@wait_option
@json_option
@click.pass_obj
def goal_diff(target: Target, file: str, positions: tuple[int, ...], wait: float | None, as_json: bool) -> None:
    """What changed in the goals from LINE1 [COL1] to LINE2 [COL2] of one proof.

    Give LINE1 LINE2, or LINE1 COL1 LINE2 COL2. Without columns: from before
    LINE1's first tactic to after LINE2's last.
    """
    if len(positions) not in (2, 4):
        raise click.UsageError("give LINE1 LINE2, or LINE1 COL1 LINE2 COL2")
    line1, col1, line2, col2 = (positions[0], None, positions[1], None) if len(positions) == 2 else positions
    target.ask(_with_wait(messages.GoalDiff, wait, file=absolute(file), line1=line1, column1=col1,
                          line2=line2, column2=col2), as_json)


@cli.command("shutdown", epilog=EXIT_CODES)
@json_option
@click.pass_obj
def shutdown(target: Target, as_json: bool) -> None:
    """Stop every HOL server and the daemon. Never starts a daemon."""
    # Starting a daemon only to stop it would be silly.
    Target(target.socket, autostart=False).ask(messages.Shutdown(), as_json)


# -- search and holmake ---------------------------------------------


@cli.command("search", epilog=EXIT_CODES)
@file_argument
@click.argument("query")
@with_paging
@with_lookup_wait
@json_option
@click.pass_obj
def search(
    target: Target, file: str, query: str, limit: int, page: int, wait: float | None, no_wait: bool, as_json: bool
) -> None:
    """Search the theorems FILE's HOL has loaded: QUERY is "name fragments", 'theories' and a term pattern.

    E.g. holctl search fooScript.sml "'arithmetic' x + y = y + x".
    """
    request = messages.Search(file=absolute(file), query=query, limit=limit, page=page,
                              wait=lookup_wait(wait, no_wait))
    target.ask(request, as_json)


@cli.command("holmake", epilog=EXIT_CODES)
@file_argument
@click.argument("make_target", metavar="[TARGET]", required=False, default="")
@click.option("-j", "--jobs", type=click.IntRange(min=0, max=256), default=0,
              help="Holmake's -j (default: the daemon's holmake_jobs setting).")
@json_option
@click.pass_obj
def holmake(target: Target, file: str, make_target: str, jobs: int, as_json: bool) -> None:
    """Run Holmake in FILE's directory with the servers' HOL; print success or the failing theory's log tail."""
    target.ask(messages.Holmake(file=absolute(file), target=make_target, jobs=jobs), as_json)


# -- operations: logs, config, the systemd service ------------------------------


@cli.command("logs", epilog=EXIT_CODES)
@click.argument("file", type=click.Path(), required=False)
@click.option("--daemon", "of_daemon", is_flag=True, help="The daemon's own log instead of a file's HOL server's.")
@click.option("-f", "--follow", is_flag=True, help="With --daemon: keep printing what it logs (Ctrl-C ends).")
@click.option("-n", "--lines", type=click.IntRange(min=1, max=100_000), default=200, show_default=True,
              help="How many of the last lines.")
@json_option
@click.pass_obj
def logs(target: Target, file: str | None, of_daemon: bool, follow: bool, lines: int, as_json: bool) -> None:
    """Print what FILE's HOL server wrote to stderr, or (--daemon) the daemon's log. Never starts a daemon."""
    if of_daemon == (file is not None):
        raise click.UsageError("give FILE or --daemon (not both)")
    if of_daemon:
        _daemon_log(target.socket, lines, follow)
        return
    if follow:
        raise click.UsageError("--follow goes with --daemon")
    Target(target.socket, autostart=False).ask(messages.Logs(file=absolute(file or ""), lines=lines), as_json)


def _daemon_log(socket: Path | None, lines: int, follow: bool) -> None:
    """The journal under systemd (units installed, no --socket), else the log file of a daemon started on demand."""
    from holctl import service
    from holsrv.rpc import paths

    path = socket or paths.default_socket()
    if service.installed() and socket is None:
        command = service.journal_command(lines, follow)
        try:
            os.execvp(command[0], command)
        except OSError as err:
            raise click.ClickException(f"cannot run {command[0]} ({err}); the daemon logs to the journal") from None
    log = paths.log_path(path)
    if not log.is_file():
        raise click.ClickException(
            f"no daemon log at {log}: no daemon was started on demand on {path}. Under systemd it logs to the "
            "journal (journalctl --user -u holsrv); started by hand, to its stderr or its --log-file."
        )
    if follow:
        # tail -F follows the file across the daemon's rotations.
        os.execvp("tail", ["tail", "-n", str(lines), "-F", str(log)])
    with open(log, encoding="utf-8", errors="replace") as text:
        kept = collections.deque(text, maxlen=lines)
    click.echo("".join(kept), nl=False)


@cli.command("config", epilog=EXIT_CODES)
@click.pass_obj
def config(target: Target) -> None:
    """Print the settings a daemon started now would use, where each comes from, and the running daemon's."""
    from holsrv import settings as holsrv_settings

    file = holsrv_settings.config_path()
    click.echo(f"config file: {file} ({'found' if file and file.is_file() else 'none there'})")
    try:
        ours = holsrv_settings.Settings.from_env()
    except holsrv_settings.ConfigError as err:
        raise click.ClickException(f"a daemon would not start: {err}") from None
    effective = ours.effective()
    click.echo("a daemon started now (flags aside) would use (config key = value  source, environment name):")
    for name, value, source in effective:
        click.echo(_setting_line(name, value, f"{source}, {name}"))
    try:
        with client.connect(target.socket, name="holctl", autostart=False) as conn:
            status = conn.call(messages.Status())
    except HolsrvError:
        click.echo("no daemon is running; the next holctl or holmcp call starts one with these settings "
                   "(and, started so, idle_exit_s 3600 unless set)")
        return
    assert isinstance(status, messages.StatusResult)
    shown = {name: value for name, value, _ in effective}
    differ = [s for s in status.settings if shown.get(s.name) != s.value]
    if not differ:
        click.echo(f"the running daemon (pid {status.pid}) uses the same values")
        return
    click.echo(f"the running daemon (pid {status.pid}) differs in (`holctl shutdown`, and the next call starts one "
               "with the above):")
    for setting in differ:
        click.echo(_setting_line(setting.name, setting.value, setting.source))


def _setting_line(name: str, value: str, source: str) -> str:
    return f"  {name.removeprefix('HOLSRV_').lower():<22} = {value or '(none)':<12}  {source}"


@cli.command("install-service")
def install_service() -> None:
    """Install holsrv as a systemd user service, started on the first connection to its socket."""
    from holctl import service
    from holsrv.settings import ConfigError, Settings

    try:
        stop_timeout_s = Settings.from_env().stop_timeout_s
    except ConfigError as err:
        raise click.ClickException(f"fix the settings first, or the service would not start: {err}") from None
    if not service.installed():
        _stop_on_demand_daemon()
    try:
        service.install(os.environ, stop_timeout_s, click.echo)
    except (service.ServiceError, OSError) as err:
        raise click.ClickException(str(err)) from None


@cli.command("uninstall-service")
def uninstall_service() -> None:
    """Stop and remove the systemd user units install-service wrote."""
    from holctl import service

    try:
        service.uninstall(os.environ, click.echo)
    except (service.ServiceError, OSError) as err:
        raise click.ClickException(str(err)) from None


def _stop_on_demand_daemon() -> None:
    """Ask a daemon already on the socket to stop, so the one systemd starts can take it over."""
    try:
        with client.connect(None, name="holctl", autostart=False) as conn:
            reply = conn.call(messages.Shutdown())
    except HolsrvError:
        return  # none running
    assert isinstance(reply, messages.ShutdownResult)
    click.echo(f"asked the running daemon to stop: {reply.message}")


def main() -> None:
    cli(prog_name="holctl")
