"""The daemon: the settings it would start with, whether one runs (a real hello)
or could be started, and how many servers of the usual size its memory budget fits.

Never starts one: where systemd listens on the socket but the service is not
running, connecting would start it, so doctor asks systemctl instead.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import stat
from collections.abc import Mapping
from pathlib import Path

from holctl.doctor.report import Check, Status
from holsrv import __version__
from holsrv.config import projects
from holsrv.config.settings import ConfigError, Settings, config_path
from holsrv.errors import HolsrvError, ProjectError, ProtocolMismatch, SocketPathTooLong
from holsrv.rpc import client, messages, paths

# What the daemon imports besides the standard library and msgspec (holsrv.main).
DAEMON_NEEDS = ("holsrv.main", "psutil", "uvloop")


def settings(environ: Mapping[str, str]) -> tuple[Check, Settings]:
    """The settings a daemon started now would use, or why it would not start."""
    try:
        found = Settings.from_env(environ)
    except ConfigError as err:
        return Check("settings", Status.FAIL, True, f"a daemon would not start: {err}",
                     "fix it; `holctl config` shows every setting and where it comes from"), Settings()
    file = config_path(environ)
    where = f"config file {file}" if file is not None and file.is_file() else "no config file"
    # Run in a project's directory, doctor checks that project's HOL, Holmake and heap cap.
    project = projects.Projects().of(Path.cwd() / "_")
    if project is not None:
        try:
            found = project.apply(found)
        except ProjectError as err:
            return Check("settings", Status.FAIL, True, f"the daemon would refuse the scripts here: {err}",
                         "fix the project file; `holctl config FILE` shows every setting of a script"), found
        where += f"; project file {project.file} over it for the scripts here"
    if found.warnings:
        return Check("settings", Status.WARN, True, f"a daemon would start with them ({where}), but "
                     + "; ".join(found.warnings) + ".", "remove what names a constant"), found
    return Check("settings", Status.OK, True,
                 f"a daemon would start with them ({where}; `holctl config` lists them)."), found


def daemon(sock: Path, via_systemd: str) -> tuple[Check, messages.StatusResult | None]:
    """A hello to the daemon on `sock` if one listens; else whether one could start there.

    `via_systemd`: non-empty when systemd's socket unit listens on `sock` for a
    service that is not running (the caller asked systemctl): then doctor does
    not connect, which would start it.
    """
    if via_systemd:
        return Check("daemon", Status.OK, True, f"not running; {via_systemd}"), None
    try:
        with client.connect(sock, name="holctl-doctor", autostart=False) as conn:
            welcome = conn.welcome
            status = conn.call(messages.Status())
    except ProtocolMismatch as err:
        return Check("daemon", Status.FAIL, True, f"a daemon of another protocol runs on {sock}: {err}"), None
    except SocketPathTooLong as err:
        return Check("daemon", Status.FAIL, True, str(err), "use a shorter socket path (docs/operations.md)"), None
    except HolsrvError as err:
        if not _nobody_listens(sock):
            return Check("daemon", Status.FAIL, True, f"something on {sock} did not answer a hello: {err}",
                         "see `holctl logs --daemon`; stop that daemon and let the next call start one"), None
        return startable(sock), None
    assert isinstance(status, messages.StatusResult)
    said = f"running (pid {welcome.pid}, version {welcome.daemon_version}, protocol {welcome.protocol}) on {sock}"
    if welcome.daemon_version != __version__:
        return Check("daemon", Status.FAIL, True,
                     f"{said}, but these clients are version {__version__}: it runs other code than they expect.",
                     "`holctl shutdown` (or `systemctl --user restart holsrv` under systemd); the next call "
                     "starts the installed version"), status
    warnings = welcome.settings_warnings
    differ = f" It differs from your settings: {' '.join(warnings)}" if warnings else ""
    return Check("daemon", Status.WARN if differ else Status.OK, True, f"{said}, same version as the clients.{differ}",
                 "`holctl shutdown`; the next call starts one with your settings" if differ else ""), status


def _nobody_listens(sock: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(2.0)
    try:
        probe.connect(str(sock))
    except (FileNotFoundError, ConnectionRefusedError):
        return True
    except OSError:
        return False
    finally:
        probe.close()
    return False


def startable(sock: Path) -> Check:
    """Whether the first call could start a daemon on `sock`: its directories and its code."""
    problems = [p for p in (_dir_problem(sock.parent), _dir_problem(paths.log_path(sock).parent)) if p]
    missing = [name for name in DAEMON_NEEDS if _missing(name)]
    if missing:
        problems.append(f"the daemon's modules {', '.join(missing)} are not installed for this Python")
    if problems:
        return Check("daemon", Status.FAIL, True, f"not running, and could not be started on {sock}: "
                     f"{'; '.join(problems)}.", "fix the above (see docs/operations.md)")
    return Check("daemon", Status.OK, True,
                 f"not running; startable: the first holctl or holmcp call starts one on {sock}.")


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def _dir_problem(directory: Path) -> str:
    """What would stop holsrv keeping its files in `directory` (`paths.private_dir`'s rules), without making it."""
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        parent = next((p for p in directory.parents if p.exists()), Path("/"))
        return "" if os.access(parent, os.W_OK | os.X_OK) else f"{directory} is missing and {parent} is not writable"
    except OSError as err:
        return f"{directory}: {err.strerror}"
    if stat.S_ISLNK(info.st_mode):
        return f"{directory} is a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return f"{directory} is not a directory"
    if info.st_uid != os.getuid():
        return f"{directory} belongs to uid {info.st_uid}, not to you"
    if info.st_mode & stat.S_IWOTH:
        return f"{directory} is writable by every user"
    return ""


def memory(found: Settings, status: messages.StatusResult | None) -> Check:
    """The memory budget and how many servers fit in it, counted as admission counts them:
    each at what a new server is expected to use (the daemon's own figure, as status
    shows it; before any server is measured, `start_footprint_mb`), not at its heap cap,
    which bounds a server's heap but is not what it holds."""
    budget, used, limit, whose = found.memory_budget_mb, 0.0, found.max_servers, "a daemon started now"
    usual, basis = float(found.start_footprint_mb), "expected use before any server is measured: start_footprint_mb"
    if status is not None:
        budget, used, limit, whose = status.memory_budget_mb, status.memory_used_mb, status.max_servers, "the daemon"
        if status.usual_footprint_mb > 0:
            usual, basis = status.usual_footprint_mb, "expected use, as admission counts a new server"
    size = f"{usual:.0f} MB each ({basis})"
    if budget <= 0:
        return Check("memory", Status.OK, True, f"{whose}: no memory budget; up to {limit} servers (max_servers).")
    fit = min(limit, int(budget // max(1.0, usual)))
    # The daemon's own count of what fits now (`servers_fit`), so doctor and status agree.
    held = f", {used:.0f} MB held now, {status.servers_fit} more fit" if status is not None else ""
    message = f"{whose}: budget {budget} MB, servers of {size}: {fit} fit (max_servers {limit}){held}."
    if fit < 1:
        return Check("memory", Status.FAIL, True, message.replace(": 0 fit", ": not one fits"),
                     "raise HOLSRV_MEMORY_BUDGET_MB, then restart the daemon")
    total = _total_mb()
    if total and budget > total:
        return Check("memory", Status.WARN, True, f"{message} The budget is more than this machine's {total} MB.",
                     "lower HOLSRV_MEMORY_BUDGET_MB (default: three quarters of the memory)")
    return Check("memory", Status.OK, True, message)



def _total_mb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError):
        return 0
