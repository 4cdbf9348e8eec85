"""Requests that act on a file's server: eval, retryCompile, restart."""

from __future__ import annotations

from holsrv import files
from holsrv.answers.common import Context, blocked_message, compiled, note, opened
from holsrv.errors import BadRequest, FileNotFound, ServerTimeout
from holsrv.lsp import replies
from holsrv.positions import Text
from holsrv.proofs import MAX_MESSAGE_CHARS
from holsrv.rpc import messages as m
from holsrv.rpc.words import clip

MAX_EVAL_CHARS = 64 * 1024
MAX_EVAL_ERRORS = 50


async def eval(ctx: Context, req: m.Eval, client: str) -> m.EvalResult:
    if not req.code.strip():
        raise BadRequest("no code to evaluate")
    async with opened(ctx, req.file, client) as (src, lease):
        session = lease.session
        mark = session.stderr_mark()
        timed_out = False
        try:
            reports = await session.hol.eval(req.code, max(0.1, req.timeout))
        except ServerTimeout:
            timed_out, reports = True, []
        errors = _errors(reports, Text(req.code), session.encoding)
        if timed_out:
            errors.append(f"timed out after {req.timeout:g}s; the evaluation was cancelled")
        return m.EvalResult(
            file=str(src.path), output=clip(replies.eval_output(reports), MAX_EVAL_CHARS),
            errors=[clip(e, MAX_MESSAGE_CHARS) for e in errors[:MAX_EVAL_ERRORS]],
            stderr=clip(session.stderr_since(mark), MAX_EVAL_CHARS),
            timed_out=timed_out, server=note(lease),
        )


def _errors(reports: list, code: Text, encoding: str) -> list[str]:
    errors = []
    for report in reports:
        if isinstance(report, replies.ErrorReport):
            line, col = code.from_lsp(report.pos.start.as_lsp() if report.pos else {}, encoding)
            errors.append(f"{line}:{col}: {report.msg.rstrip()}")
        elif isinstance(report, replies.InterruptedReport):
            errors.append("interrupted")
    return errors


async def retry_compile(ctx: Context, req: m.RetryCompile, client: str) -> m.RetryCompileResult:
    async with opened(ctx, req.file, client) as (src, lease):
        session = lease.session
        await compiled(ctx, session)

        def answer(was_blocked: bool, message: str) -> m.RetryCompileResult:
            return m.RetryCompileResult(file=str(src.path), content_hash=src.hash, server=note(lease),
                                        was_blocked=was_blocked, message=message)

        if session.phase == "compiling":
            return answer(False, "The file is still compiling, so it is not known to be blocked; call "
                          "diagnostics, and retryCompile only if it says BLOCKED.")
        if session.phase != "blocked":
            # On a file that is not blocked the server would cancel every
            # proof check and re-queue none (PROTOCOL.md §17.4): refuse.
            return answer(False, "Not blocked: nothing to retry. retryCompile only re-attempts a file whose "
                          "dependencies could not be loaded. To re-check everything, use restart.")
        answered = await session.retry_compile(ctx.settings.lookup_wait_s)
        if session.phase == "blocked":
            return answer(True, f"Still blocked: {blocked_message(session)}")
        if not answered:
            return answer(True, "Asked HOL to compile again; it has not said how it went yet: call diagnostics.")
        return answer(True, "Unblocked: HOL is compiling the file now; call diagnostics for the verdict.")


async def restart(ctx: Context, req: m.Restart, client: str) -> m.RestartResult:
    if req.max_heap_mb is not None and req.max_heap_mb < 0:
        raise BadRequest("max_heap_mb must be 0 (no cap) or a positive number of MB")
    try:
        src = files.read(req.file)
    except FileNotFound:
        return await _stop_orphan(ctx, req.file)
    old_pid = await ctx.pool.restart(src.path, req.max_heap_mb)
    async with opened(ctx, req.file, client, tolerate_start=True) as (_, lease):
        session = lease.session
        cap = f"{session.max_heap_mb} MB" if session.max_heap_mb else "no cap"
        doing = "still starting (loading its heap)" if session.starting else "compiling the file"
        return m.RestartResult(
            file=str(src.path), old_pid=old_pid, new_pid=session.pid or 0, max_heap_mb=session.max_heap_mb,
            message=f"Restarted the HOL server for {src.path.name} (pid {old_pid or '-'} → "
            f"{session.pid or 'pending'}; heap {cap}). It is {doing} now; call diagnostics to follow it.",
        )


async def _stop_orphan(ctx: Context, file: str) -> m.RestartResult:
    """Restart of a file that is gone: stop its server, if it has one, and say so."""
    path = files.resolve(file)
    old = ctx.pool.sessions.get(path)
    if old is None or not old.alive:
        raise FileNotFound(f"no such file: {file}, and no HOL server is running for it.")
    await ctx.pool.stop_session(old, "its file no longer exists")
    return m.RestartResult(
        file=str(path), old_pid=old.pid, new_pid=0, max_heap_mb=old.max_heap_mb,
        message=f"{path.name} no longer exists, so its HOL server (pid {old.pid}) was stopped "
        "and not restarted.",
    )
