"""A call to the daemon from holctl: the request sent, its reply printed, its failure an exit code.

`Target` holds the group's options (socket, autostart, progress, expect-hash)
and asks one request; a daemon error becomes a `CallFailed` whose class
gives the exit code (see `EXIT_CODES`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

import click
import msgspec

from holctl.render import render
from holsrv.errors import DaemonUnreachable, HolsrvError
from holsrv.rpc import client, messages

EXIT_CODES = """\b
Exit codes:
  0  answered (a failed proof is an answer, not an error)
  1  any other failure
  2  bad command line
  3  bad input: missing file, not a file, not UTF-8, permission denied, position out of range,
     bad request, symlink refused (try --apply), unknown job
  4  HOL problem: HOL not found, server died or stopped, server starting, servers busy,
     server timed out, HOL error, memory budget, too many jobs
  5  daemon unreachable, stopping or refusing this user; protocol mismatch, bad frame or
     connection closed; socket path too long
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
        ["file_not_found", "not_a_file", "not_utf8", "permission_denied", "position_out_of_range", "bad_request",
         "symlink_refused", "too_many_positions", "unknown_job", "project_file"],
        BadInput,
    ),
    **dict.fromkeys(
        ["hol_not_found", "server_died", "server_stopped", "server_runaway", "servers_busy", "server_timeout",
         "server_starting", "hol_error", "memory_budget", "too_many_jobs"],
        HolProblem,
    ),
    **dict.fromkeys(
        ["daemon_unreachable", "protocol_mismatch", "bad_frame", "connection_closed", "daemon_stopping",
         "daemon_restarting", "peer_refused", "socket_path_too_long"],
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
        """End the rewritten line before the answer is printed.

        The last progress line is kept and ended with a newline rather than
        erased: a terminal that does not honour the erase (or a log of the
        session, an agent's pty capture) would otherwise show it glued to the
        first line of the answer on stdout.
        """
        if self._tty and self._shown:
            self._stream.write("\n")
            self._stream.flush()
            self._shown = False


class Target:
    """Where to send requests: the group's options, shared by every command."""

    def __init__(self, socket: Path | None, autostart: bool, progress: bool | None = None,
                 expect_hash: str = "") -> None:
        self.socket = socket
        self.autostart = autostart
        # None: show progress when stderr is a terminal.
        self.progress = progress
        self.expect_hash = expect_hash  # put on every request that takes one

    def ask(self, request: messages.Request, as_json: bool, quiet: bool = False) -> messages.Reply:
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
        if quiet:  # the caller prints
            return reply
        if as_json:
            click.echo(msgspec.json.format(msgspec.json.encode(reply), indent=2).decode())
        else:
            click.echo(render(reply))
        return reply

    def _live_line(self, request: messages.Request, as_json: bool) -> LiveLine | None:
        if as_json or not isinstance(request, _FOLLOWED):
            return None
        wanted = sys.stderr.isatty() if self.progress is None else self.progress
        return LiveLine(sys.stderr) if wanted else None


# Requests whose progress holctl shows as live lines.
_FOLLOWED = (messages.Diagnostics, messages.GoalState, messages.Holmake, messages.Try, messages.Verify)
