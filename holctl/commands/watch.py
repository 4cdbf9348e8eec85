"""holctl watch: a live view of a file's verdict, redrawn when the file changes.

A loop over one daemon call, `diagnostics` with `changed_since` (the content
hash of the verdict shown): the daemon answers once the file on disk has
other content and its check has settled, woken by its watch on the file, so
nothing runs between changes.  While proofs are still checking the view is
refreshed every few seconds, to show their times.
"""

from __future__ import annotations

import sys
import time

import click
import msgspec

from holctl.calls import EXIT_CODES, Target, Unreachable, failure_for
from holctl.options import absolute, file_argument, json_option
from holctl.render import render
from holsrv.errors import DaemonUnreachable, HolsrvError
from holsrv.rpc import client, messages

# One call's wait for the next change: the daemon then answers about the file
# as it is and the loop asks again, so a wait that runs out costs one answer.
WATCH_WAIT_S = 300.0
# While proofs are still checking: how often the view is redrawn with their times.
REFRESH_S = 2.0
_CLEAR = "\x1b[H\x1b[2J"  # cursor home, erase the screen


@click.command("watch", epilog=EXIT_CODES)
@file_argument
@json_option
@click.pass_obj
def watch(target: Target, file: str, as_json: bool) -> None:
    """Show FILE's verdict, and show it again each time the file changes, until Ctrl-C.

    On a terminal the view is redrawn in place: the verdict line, the tally,
    the failing proofs with their first error line and hint, and the proofs
    still checking with their times. Otherwise (or with --json, one JSON object
    a line) each settled verdict is printed once. Ctrl-C ends it with exit 0.
    """
    view = _View(sys.stdout.isatty() and not as_json, as_json)
    try:
        with client.connect(target.socket, name="holctl", autostart=target.autostart) as conn:
            _loop(conn, absolute(file), view)
    except KeyboardInterrupt:
        view.close()
    except HolsrvError as err:
        raise failure_for(err) from None
    except OSError as err:
        raise Unreachable(DaemonUnreachable(str(err))) from None


def _loop(conn: client.Client, file: str, view: _View) -> None:
    reply: messages.DiagnosticsResult | None = None
    while True:
        if reply is None:  # the first answer: as diagnostics gives it
            request = messages.Diagnostics(file, wait=WATCH_WAIT_S)
        else:  # the next change, or a refresh while proofs are still checking
            wait = WATCH_WAIT_S if reply.complete else REFRESH_S
            request = messages.Diagnostics(file, wait=wait, changed_since=reply.content_hash)
        answer = conn.call(request)  # raises on an error reply
        assert isinstance(answer, messages.DiagnosticsResult)
        reply = answer
        view.show(reply)


class _View:
    """Where verdicts go: redrawn on a terminal, else each settled one printed once."""

    def __init__(self, tty: bool, as_json: bool) -> None:
        self._tty = tty
        self._json = as_json
        self._shown: tuple[str, str] | None = None  # (content hash, text) of what is on the screen

    def show(self, reply: messages.DiagnosticsResult) -> None:
        if self._tty:
            text = render(reply)
            if self._shown != (reply.content_hash, text):
                stamp = time.strftime("%H:%M:%S")
                click.echo(f"{_CLEAR}holctl watch {reply.file}  ({stamp}; Ctrl-C to stop)\n\n{text}", nl=True)
                self._shown = (reply.content_hash, text)
            return
        if not reply.complete or (self._shown is not None and self._shown[0] == reply.content_hash):
            return  # each settled verdict once
        if self._json:
            click.echo(msgspec.json.encode(reply).decode())
        else:
            click.echo(("" if self._shown is None else "\n") + render(reply))
        self._shown = (reply.content_hash, "")
        sys.stdout.flush()

    def close(self) -> None:
        if self._tty:
            click.echo("")


COMMANDS = [watch]
