"""`holsrv`: run the daemon in the foreground (systemd, or started on demand)."""

from __future__ import annotations

import dataclasses
import gc
import logging
import logging.handlers
import os
import sys
from pathlib import Path

import click
import uvloop

from holsrv import __version__
from holsrv.config.settings import ConfigError, Settings
from holsrv.daemon import Daemon
from holsrv.errors import AlreadyRunning
from holsrv.rpc import autostart, paths
from holsrv.serve import activation

# A daemon a client started exits after this long with no server and no
# client, unless idle_exit_s is set: nobody may be left to stop it.
ON_DEMAND_IDLE_EXIT_S = 3600.0
# The log file's bounds: a daemon started on demand may run for weeks.
LOG_MAX_BYTES = 5 * 1024 * 1024
LOG_BACKUPS = 2
# sysexits.h: a configuration error.
EX_CONFIG = 78


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--socket", type=click.Path(path_type=Path),
    help="Socket path (default: $HOLSRV_SOCKET or $XDG_RUNTIME_DIR/holsrv/holsrv.sock).",
)
@click.option("--hol", "hol_bin", help="The `hol` executable (default: $HOL_BIN, $HOLDIR/bin/hol, or `hol` on PATH).")
@click.option("--max-servers", type=int, help="Most HOL servers alive at once.")
@click.option("--max-heap-mb", type=int, help="Poly/ML --maxheap for each server, MB (0: no cap).")
@click.option("--idle-timeout", "idle_timeout_s", type=float, help="Stop a server unused for this many seconds.")
@click.option("--idle-exit", "idle_exit_s", type=float,
              help="Exit after this many seconds with no server and no client (0: never).")
@click.option("--ready-fd", type=int, hidden=True, help="Write 'ready' to this fd once listening.")
@click.option("--detach", is_flag=True, hidden=True, help="Fork into the background first.")
@click.option("--handover-fd", type=int, hidden=True,
              help="Adopt the HOL servers this process had before its exec (restart-daemon).")
@click.option("--log-file", type=click.Path(path_type=Path), help="Log here, rotated at 5 MB (default: stderr).")
@click.option("--log-level", default="INFO", show_default=True)
@click.version_option(__version__)
def main(
    socket, hol_bin, max_servers, max_heap_mb, idle_timeout_s, idle_exit_s, ready_fd, detach, handover_fd, log_file,
    log_level,
) -> None:
    """Keep HOL4 language servers warm and answer holctl and holmcp."""
    if detach and os.fork() > 0:
        os._exit(0)  # the client waits on the ready fd, which the daemon inherited
    try:
        # Before anything else can start a child: the variables must not leak.
        listener = activation.listening_socket()
        _configure_logging(log_file, log_level)
    except OSError as err:
        raise click.ClickException(str(err)) from None
    try:
        settings = Settings.from_env(
            socket=socket, hol_bin=hol_bin, max_servers=max_servers,
            max_heap_mb=max_heap_mb, idle_timeout_s=idle_timeout_s, idle_exit_s=idle_exit_s,
        )
    except ConfigError as err:
        logging.getLogger(__name__).error("not starting: %s", err)
        raise BadConfig(f"not starting: {err}") from None
    for warning in settings.warnings:  # a constant named where a setting once was: it starts, and says so
        logging.getLogger(__name__).warning("%s", warning)
    if detach and "idle_exit_s" not in settings.sources:
        settings = dataclasses.replace(settings, idle_exit_s=ON_DEMAND_IDLE_EXIT_S, sources={
            **settings.sources, "idle_exit_s": "default for a daemon started on demand"})
    try:
        uvloop.run(_serve(settings, ready_fd, listener, handover_fd))
    except AlreadyRunning as err:
        # The client that started us waits for the running daemon's socket.
        _ready(ready_fd, autostart.ALREADY_RUNNING.encode() + b"\n")
        raise click.ClickException(str(err)) from None


class BadConfig(click.ClickException):
    """Settings the daemon will not run with.  Its own exit status, so systemd
    (RestartPreventExitStatus=) does not restart it in a loop until they change."""

    exit_code = EX_CONFIG


async def _serve(settings: Settings, ready_fd: int | None, listener=None, handover_fd: int | None = None) -> None:
    daemon = Daemon(settings, listener, handover_fd)
    try:
        await daemon.start()
    except ConfigError as err:  # metrics_listen given to a Settings not read by from_env
        raise BadConfig(f"not starting: {err}") from None
    except OSError as err:  # an unsafe socket directory, a symlink at the lock file, the metrics port taken
        raise click.ClickException(str(err)) from None
    # What is alive now (modules, classes, functions, settings) lives as long
    # as the daemon: out of the cycle collector's generations, so its full
    # collections, which pause the loop, walk only what the daemon made since.
    gc.freeze()
    await daemon.run(ready=lambda: _ready(ready_fd, b"ready\n"))


def _configure_logging(log_file: Path | None, level: str) -> None:
    handler = logging.StreamHandler(sys.stderr) if log_file is None else log_handler(log_file)
    journal = log_file is None and activation.under_systemd()
    handler.setFormatter(JournalFormatter() if journal else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler])


class JournalFormatter(logging.Formatter):
    """journald's form: no timestamp (the journal adds its own), a `<N>` syslog
    priority prefix it turns into the entry's priority, the level in words too."""

    PRIORITIES = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6, logging.DEBUG: 7}

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        level = max((lv for lv in self.PRIORITIES if lv <= record.levelno), default=logging.DEBUG)
        return f"<{self.PRIORITIES[level]}>{super().format(record)}"


def log_handler(log_file: Path, max_bytes: int = LOG_MAX_BYTES, backups: int = LOG_BACKUPS) -> logging.Handler:
    """A rotated log file in a private directory, readable by its owner only.

    The log holds proof text and HOL's error messages; a daemon started on
    demand may run for weeks, so the log is bounded too: `max_bytes` a file,
    `backups` old files beside it.
    """
    paths.private_dir(log_file.parent, fix="give --log-file a path in a directory of your own")
    return _PrivateLog(log_file, maxBytes=max_bytes, backupCount=backups)


class _PrivateLog(logging.handlers.RotatingFileHandler):
    def _open(self):
        # Each new file (at start and after each rotation) is 0600, and never
        # opened through a symlink planted at its name.
        fd = paths.open_private(Path(self.baseFilename), os.O_WRONLY | os.O_APPEND)
        return os.fdopen(fd, "a", encoding=self.encoding, errors=self.errors)

    def make_again(self) -> bool:
        """Open the log file anew if the one being written was deleted and its directory is there
        (a socket directory deleted and made again, with the log in it): `holctl logs --daemon`
        reads the file at its name.  True if it was made again."""
        self.acquire()  # not while a record is written
        try:
            stream = self.stream
            if stream is None or not Path(self.baseFilename).parent.is_dir():
                return False
            try:
                if os.fstat(stream.fileno()).st_nlink > 0:
                    return False
                fresh = self._open()
            except OSError:
                return False  # still written to the deleted file: nothing is lost from here on
            stream.close()
            self.stream = fresh
            return True
        finally:
            self.release()


def _ready(fd: int | None, line: bytes) -> None:
    if fd is None:
        return
    try:
        os.write(fd, line)
        os.close(fd)
    except OSError:
        pass
