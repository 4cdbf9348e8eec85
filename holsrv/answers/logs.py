"""The `logs` request: what a file's HOL server wrote to stderr, from its bounded ring."""

from __future__ import annotations

from holsrv.answers.common import Context
from holsrv.disk import files
from holsrv.rpc import messages as m


async def logs(ctx: Context, req: m.Logs) -> m.LogsResult:
    """The last `req.lines` stderr lines of the file's server (at most the ring's
    `stderr_tail_lines`), or of the server that last died for it."""
    path = files.resolve(req.file)
    count = max(1, min(req.lines, ctx.settings.stderr_tail_lines))
    session = ctx.pool.sessions.get(path)
    if session is not None and session.pid is not None:
        kept = list(session.proc.stderr_tail)[-count:]
        state = "running" if session.alive else f"died: {session.exit_reason}" if session.dead else "stopping"
        message = (f"the last {len(kept)} lines the HOL server for {path.name} (pid {session.pid}, {state}) "
                   f"wrote to stderr; the daemon keeps {ctx.settings.stderr_tail_lines}")
        if not kept:
            message = f"the HOL server for {path.name} (pid {session.pid}, {state}) has written nothing to stderr"
        return m.LogsResult(file=str(path), pid=session.pid, running=session.alive, lines=kept, message=message)
    exit_reason, tail = ctx.pool.last_words(path)
    if exit_reason:
        kept = tail.split("\n")[-count:] if tail else []
        return m.LogsResult(file=str(path), pid=None, running=False, lines=kept, message=(
            f"no HOL server runs for {path.name}; the last one died ({exit_reason}) and these are the last "
            "lines it wrote to stderr. The next call about the file starts a new one."))
    return m.LogsResult(file=str(path), pid=None, running=False, lines=[], message=(
        f"no HOL server runs for {path.name}, and none died for it, so there is no stderr to show; "
        f"a call about the file (e.g. `holctl diagnostics {path.name}`) starts one"))
