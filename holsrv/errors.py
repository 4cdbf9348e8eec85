"""The error hierarchy every layer raises; each error carries a stable code.

The daemon turns these into `Error` replies at one place, holctl into an exit
code and a one-line message, holmcp into a `ToolError`.  The codes are part of
the wire contract: never rename one.
"""

from __future__ import annotations


class HolsrvError(Exception):
    """Base class: `code` is stable, `str(err)` says what happened and what to do."""

    code = "internal"

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


class BadRequest(HolsrvError):
    code = "bad_request"


class FileNotFound(HolsrvError):
    code = "file_not_found"


class NotAFile(HolsrvError):
    code = "not_a_file"


class NotUtf8(HolsrvError):
    code = "not_utf8"


class PermissionDenied(HolsrvError):
    """The daemon may not read the file, or enter a directory on its path."""

    code = "permission_denied"


class PositionOutOfRange(HolsrvError):
    code = "position_out_of_range"


class HolNotFound(HolsrvError):
    code = "hol_not_found"


class ProjectError(HolsrvError):
    """A project file (`holsrv.toml`) the daemon will not use: unsafe, unreadable or wrong; says why and the fix."""

    code = "project_file"


class ServerDied(HolsrvError):
    """The HOL server for this file exited; `detail` holds the tail of its stderr."""

    code = "server_died"


class ServerStopped(ServerDied):
    """The daemon stopped the server (eviction, idleness, restart) during the call."""

    code = "server_stopped"


class RanAway(ServerStopped):
    """The server would not let go of its work (a walk of a looping tactic, a text it did not
    take, a footprint past the hard limit), so the daemon replaced it (see `holsrv.server.runaway`)."""

    code = "server_runaway"

    def __init__(self, message: str, runaway: object = None, *, detail: str = "") -> None:
        super().__init__(message, detail=detail)
        self.runaway = runaway  # the `runaway.Runaway`: the answer from the successor tells it


class ServerBusy(HolsrvError):
    code = "servers_busy"


class MemoryBudget(ServerBusy):
    """Starting one more HOL server would take the fleet past the memory budget."""

    code = "memory_budget"


class ServerTimeout(HolsrvError):
    code = "server_timeout"


class Starting(ServerTimeout):
    """The file's HOL server is still loading; the caller may ask again."""

    code = "server_starting"


class ProtocolMismatch(HolsrvError):
    code = "protocol_mismatch"


class AlreadyRunning(HolsrvError):
    """Another daemon already answers on this socket."""

    code = "already_running"


class DaemonStopping(HolsrvError):
    """The daemon shut down while the call was in flight."""

    code = "daemon_stopping"


class DaemonRestarting(HolsrvError):
    """The daemon is restarting to hand its HOL servers to its successor (`holctl restart-daemon`)."""

    code = "daemon_restarting"

    def __init__(self, message: str = "the daemon is restarting to hand its servers over; ask again in a moment",
                 *, detail: str = "") -> None:
        super().__init__(message, detail=detail)


class RestartFailed(HolsrvError):
    """`restart-daemon` did not restart the daemon (its new code cannot start); the daemon serves on."""

    code = "restart_failed"


class PeerRefused(HolsrvError):
    """The connecting process runs as another user than the daemon."""

    code = "peer_refused"


class DaemonUnreachable(HolsrvError):
    code = "daemon_unreachable"


class SocketPathTooLong(DaemonUnreachable):
    """The daemon's socket path is longer than a Unix socket address holds (103 bytes on macOS)."""

    code = "socket_path_too_long"


class FrameError(HolsrvError):
    code = "bad_frame"


class LspError(HolsrvError):
    """The HOL server answered a request with a JSON-RPC error, or a reply of the wrong shape.

    `rpc_code` is the JSON-RPC error code (docs/protocol.md#json-rpc), None when HOL sent
    none.  It is not on the wire: a client sees only `code` and the message.
    """

    code = "hol_error"

    def __init__(self, message: str, *, detail: str = "", rpc_code: int | None = None) -> None:
        super().__init__(message, detail=detail)
        self.rpc_code = rpc_code


class TooManyCandidates(BadRequest):
    """A `try` call named more candidate tactics than the daemon tries in one call."""

    code = "too_many_candidates"


class TooManyPositions(BadRequest):
    """A goalState call named more positions than the daemon answers in one call."""

    code = "too_many_positions"


class TrialRunning(ServerBusy):
    """A `try` call has the file's server and did not finish within the wait."""

    code = "trial_running"


class SymlinkRefused(BadRequest):
    """`try --apply` on a path that is a symbolic link: the daemon writes no file through one."""

    code = "symlink_refused"


class FileChanged(HolsrvError):
    """The file's bytes are no longer those a write was meant to replace; nothing was written."""

    code = "file_changed"


class WriteFailed(HolsrvError):
    """Writing a user's file (`try --apply`) failed; nothing was written."""

    code = "write_failed"


class TooManyJobs(ServerBusy):
    """A call with `defer_after` found the daemon holding `max_jobs` jobs already."""

    code = "too_many_jobs"


class UnknownJob(BadRequest):
    """No job has this id: never started, forgotten after `job_keep_s`, cancelled long ago, or another daemon's."""

    code = "unknown_job"


class EditorUnsaved(ServerBusy):
    """An editor (`holctl lsp`) holds the file with unsaved changes, or holds it already."""

    code = "editor_unsaved"


def error_for_code(code: str, message: str, detail: str = "") -> HolsrvError:
    """Rebuild the error a daemon reported, so clients can catch it by class."""
    classes = {cls.code: cls for cls in _all_subclasses(HolsrvError)}
    cls = classes.get(code, HolsrvError)
    err = cls(message, detail=detail)
    err.code = code
    return err


def _all_subclasses(cls: type[HolsrvError]) -> list[type[HolsrvError]]:
    found: list[type[HolsrvError]] = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_all_subclasses(sub))
    return found
