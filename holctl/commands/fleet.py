"""holctl's commands about the fleet: the daemon's status, a file's server (restart, stop, retry, its log),
the daemon's own log, and shutting it all down."""

from __future__ import annotations

import collections
import os
import time
from pathlib import Path

import click
import msgspec

from holctl.calls import EXIT_CODES, CallFailed, Target
from holctl.options import Seconds, absolute, file_argument, json_option
from holsrv.errors import DaemonUnreachable, HolsrvError, RestartFailed
from holsrv.rpc import client, messages

# How long `restart-daemon` waits for the restarted daemon by default, and how often it asks.
RESTART_WAIT_S = 120.0
RESTART_POLL_S = 0.1


@click.command("status", epilog=EXIT_CODES)
@json_option
@click.pass_obj
def status(target: Target, as_json: bool) -> None:
    """Print the daemon, its settings, and every HOL server it runs."""
    target.ask(messages.Status(), as_json)


@click.command("job", epilog=EXIT_CODES)
@click.argument("job_id", metavar="ID")
@click.option("--wait", type=Seconds(), default=None,
              help="Seconds to wait for the job's answer (daemon default 25); then it says the job still runs.")
@click.option("--cancel", is_flag=True, help="Stop the job instead: a try gives the server the file's text back, "
              "a holmake's build is killed.")
@json_option
@click.pass_obj
def job(target: Target, job_id: str, wait: float | None, cancel: bool, as_json: bool) -> None:
    """Print the answer of job ID (a call that outran its --defer-after), once it has one, or cancel it."""
    if cancel and wait is not None:
        raise click.UsageError("give --wait or --cancel, not both")
    request = messages.Job(job_id, cancel=cancel) if wait is None else messages.Job(job_id, wait=wait)
    target.ask(request, as_json)


@click.command("retryCompile", epilog=EXIT_CODES)
@file_argument
@json_option
@click.pass_obj
def retry_compile(target: Target, file: str, as_json: bool) -> None:
    """Compile FILE again after its blocked dependencies were fixed."""
    target.ask(messages.RetryCompile(file=absolute(file)), as_json)


@click.command("restart", epilog=EXIT_CODES)
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


@click.command("stop", epilog=EXIT_CODES)
@file_argument
@json_option
@click.pass_obj
def stop(target: Target, file: str, as_json: bool) -> None:
    """Stop FILE's HOL server, freeing its memory and its place; the next call starts a new one."""
    target.ask(messages.Stop(file=absolute(file)), as_json)


@click.command("shutdown", epilog=EXIT_CODES)
@json_option
@click.pass_obj
def shutdown(target: Target, as_json: bool) -> None:
    """Stop every HOL server and the daemon. Never starts a daemon."""
    # Starting a daemon only to stop it would be silly.
    Target(target.socket, autostart=False).ask(messages.Shutdown(), as_json)


@click.command("restart-daemon", epilog=EXIT_CODES)
@click.option("--wait", type=Seconds(), default=RESTART_WAIT_S, show_default=True,
              help="Seconds to wait for the restarted daemon to answer.")
@json_option
@click.pass_obj
def restart_daemon(target: Target, wait: float, as_json: bool) -> None:
    """Restart the daemon in place, keeping every warm HOL server (its new code, if one was installed).
    Never starts a daemon."""
    began = time.monotonic()
    before = Target(target.socket, autostart=False).ask(messages.Status(), as_json=False, quiet=True)
    assert isinstance(before, messages.StatusResult)
    asked = Target(target.socket, autostart=False).ask(messages.RestartDaemon(), as_json=False, quiet=True)
    assert isinstance(asked, messages.RestartDaemonResult)
    # The same process answers again once it has adopted the servers: its restart count tells it apart.
    deadline = began + wait
    status: messages.StatusResult | None = None
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with client.connect(target.socket, name="holctl", autostart=False) as conn:
                reply = conn.call(messages.Status())
            assert isinstance(reply, messages.StatusResult)
            if reply.restarts > asked.restarts:
                status = reply
                break
            if reply.failed_restarts > before.failed_restarts:
                raise CallFailed(RestartFailed(f"the daemon (pid {reply.pid}) did not restart: {reply.restart_failed}"))
        except (HolsrvError, OSError) as err:  # the switch: a closed connection, `daemon_restarting`
            last = err
        time.sleep(RESTART_POLL_S)  # the successor says nothing when it is back: ask again
    if status is None:
        raise CallFailed(DaemonUnreachable(
            f"the daemon (pid {asked.pid}) began to restart but did not answer as restarted within {wait:g}s"
            + (f" ({last})" if last else "") + "; see `holctl logs --daemon`"))
    took = time.monotonic() - began
    if as_json:
        click.echo(msgspec.json.format(msgspec.json.encode(status), indent=2).decode())
        return
    fresh = f"; {status.not_adopted} start fresh on their next call" if status.not_adopted else ""
    click.echo(f"restarted holsrv (pid {status.pid}) in {took:.2f}s: now holsrv {status.daemon_version}; "
               f"handed over {status.adopted} of {asked.servers} HOL servers{fresh}")


@click.command("metrics", epilog=EXIT_CODES)
@json_option
@click.pass_obj
def metrics(target: Target, as_json: bool) -> None:
    """Print the daemon's Prometheus metrics (the text `/metrics` serves). Never starts a daemon."""
    # A scrape of a daemon that is not running has nothing to read: starting one would make up numbers.
    Target(target.socket, autostart=False).ask(messages.Metrics(), as_json)


@click.command("logs", epilog=EXIT_CODES)
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
    shown = log
    if not log.is_file():
        shown = _log_of_running_daemon(path, log)
    if follow and shown == log:
        # tail -F follows the file across the daemon's rotations.
        os.execvp("tail", ["tail", "-n", str(lines), "-F", str(log)])
    with open(shown, encoding="utf-8", errors="replace") as text:
        kept = collections.deque(text, maxlen=lines)
    click.echo("".join(kept), nl=False)
    if follow:  # the deleted file's last lines, then the file the daemon makes again at its name
        os.execvp("tail", ["tail", "-n", "0", "-F", str(log)])


def _log_of_running_daemon(socket: Path, log: Path) -> Path:
    """Where to read the log of the daemon on `socket` when there is no file at `log`: the deleted
    file it still writes (its directory was deleted under it), said on stderr; else a clear error."""
    from holctl import daemonlog

    pid = daemonlog.running_pid(socket)
    if pid is None and not socket.parent.is_dir():
        raise click.ClickException(
            f"no daemon log at {log}, and no daemon answers on {socket}: its directory {socket.parent} does not "
            "exist. If it was deleted under a running daemon, make it again (mkdir -m 700 "
            f"{socket.parent}): the daemon makes its socket (and a log deleted with it) again within seconds."
        )
    if pid is None:
        raise click.ClickException(
            f"no daemon log at {log}: no daemon was started on demand on {socket}. Under systemd it logs to the "
            "journal (journalctl --user -u holsrv); started by hand, to its stderr or its --log-file."
        )
    deleted = daemonlog.deleted_log(pid, log)
    if deleted is None:
        raise click.ClickException(
            f"no daemon log at {log}, though a daemon (pid {pid}) answers on {socket}: either its log was deleted "
            f"(with its directory) and cannot be read from here, or it logs elsewhere (started by hand: its "
            "stderr or its --log-file; under systemd: journalctl --user -u holsrv). A daemon makes a deleted log "
            f"again within seconds once {log.parent} exists; to start afresh: holctl --socket {socket} shutdown "
            "(the next call starts a daemon, logging there)."
        )
    again = (f"It makes {log} again within seconds" if log.parent.is_dir() else
             f"Its directory was deleted too: once it exists again (mkdir -m 700 {log.parent}), the daemon makes "
             f"{log} again within seconds")
    click.echo(
        f"holctl: {log} was deleted while the daemon (pid {pid}) ran; these lines are from the deleted file it "
        f"still writes ({deleted}). {again}; what was logged before is then lost.", err=True)
    return deleted


COMMANDS = [status, job, retry_compile, restart, stop, shutdown, restart_daemon, metrics, logs]
