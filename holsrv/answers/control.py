"""Requests that act on a file's server: eval, retryCompile, restart."""

from __future__ import annotations

from holsrv.answers import evalcode
from holsrv.answers.common import NO_SERVER, Context, blocked_message, compiled, note, opened, read
from holsrv.disk import files
from holsrv.disk.ancestors import ancestors
from holsrv.errors import BadRequest, FileNotFound, ServerTimeout
from holsrv.lsp import hol
from holsrv.rpc import messages as m
from holsrv.rpc.words import clip
from holsrv.server.session import Session
from holsrv.text import stepping
from holsrv.verdict import hints
from holsrv.verdict.diagnosticlist import MAX_MESSAGE_CHARS
from holsrv.verdict.filestate import Phase

MAX_EVAL_CHARS = 64 * 1024
MAX_EVAL_ERRORS = 50


async def eval(ctx: Context, req: m.Eval, client: str) -> m.EvalResult:
    """Run the agent's code in the file's HOL server, after `evalcode.PRELUDE` and the script's ancestors opened.

    What persists between calls: no ML binding.  HOL compiles each eval on a
    thread of its own in a namespace layer of its own, so a `val`, `fun` or
    `open` lasts for that call only, and the prelude is sent every time.
    HOL's process-wide state does persist, for the life of the server: modules
    loaded, references and traces set (`show_types := true`), theories and
    definitions made, which the file's own compiles then see.  One server
    serves one file, so nothing reaches another file's evals.
    """
    if not req.code.strip():
        raise BadRequest("no code to evaluate")
    async with opened(ctx, req.file, client) as (src, lease):
        session = lease.session
        sent = evalcode.prepare(req.code, ancestors(src.text))
        mark = session.stderr_mark()
        timed_out = False
        session.evals.ran(ctx.clock())  # counted once sent: code cut short may have changed state already
        try:
            reports = await session.hol.eval(sent.code, max(0.1, req.timeout))
        except ServerTimeout:
            timed_out, reports = True, []
        outcome = evalcode.read(reports, sent, session.encoding)
        if timed_out:
            outcome.errors.append(f"timed out after {req.timeout:g}s; the evaluation was cancelled")
        stderr = hol.without_holdep_noise(session.stderr_since(mark), sent.names)
        errors = outcome.errors[:MAX_EVAL_ERRORS]
        unseen = evalcode.unprinted_note(evalcode.unprinted(req.code))
        if unseen:
            outcome.warnings.append(unseen)
        return m.EvalResult(
            file=str(src.path), output=clip(outcome.output, MAX_EVAL_CHARS),
            errors=[clip(e, MAX_MESSAGE_CHARS) for e in errors],
            hints=[hints.hint(e, hints.Context(in_proof=False)) for e in errors],
            stderr=clip(stderr, MAX_EVAL_CHARS), timed_out=timed_out, server=note(lease),
            warnings=[clip(w, MAX_MESSAGE_CHARS) for w in outcome.warnings[:MAX_EVAL_ERRORS]],
            shared_state=_shared_state(session),
        )


def _shared_state(session: Session) -> str:
    return (
        f"This ran in the HOL server for {session.path.name} (pid {session.pid or '-'}), which every agent on "
        "that file shares: what it changed in HOL's global state (theories loaded, flags, grammar, definitions) "
        "persists there, seen by all of them, until the server restarts."
    )


async def retry_compile(ctx: Context, req: m.RetryCompile, client: str) -> m.RetryCompileResult:
    src = await read(ctx, req.file)
    running = ctx.pool.sessions.get(src.path)
    if running is None or not running.alive:
        # No server has tried to compile the file, so nothing is blocked: a
        # server started now would only compile it, as any call's does.
        return m.RetryCompileResult(
            file=str(src.path), content_hash=src.hash, server=NO_SERVER, was_blocked=False,
            message=f"Not blocked: nothing to retry. No HOL server is running for {src.path.name}, so none has "
            "tried to compile it; call diagnostics, which starts one and says BLOCKED if its dependencies "
            "cannot be loaded.",
        )
    async with opened(ctx, req.file, client) as (src, lease):
        session = lease.session
        await compiled(ctx, session)

        def answer(was_blocked: bool, message: str) -> m.RetryCompileResult:
            return m.RetryCompileResult(file=str(src.path), content_hash=src.hash, server=note(lease),
                                        was_blocked=was_blocked, message=message)

        if session.phase == Phase.COMPILING:
            return answer(False, "The file is still compiling, so it is not known to be blocked; call "
                          "diagnostics, and retryCompile only if it says BLOCKED.")
        if session.phase != Phase.BLOCKED:
            # On a file that is not blocked the server would cancel every
            # proof check and re-queue none (docs/protocol.md#retry-on-a-file-that-is-not-blocked): refuse.
            return answer(False, "Not blocked: nothing to retry. retryCompile only re-attempts a file whose "
                          "dependencies could not be loaded. To re-check everything, use restart.")
        answered = await session.retry_compile(ctx.settings.lookup_wait_s)
        if session.phase == Phase.BLOCKED:
            return answer(True, f"Still blocked: {blocked_message(session)}")
        if not answered:
            return answer(True, "Asked HOL to compile again; it has not said how it went yet: call diagnostics.")
        return answer(True, "Unblocked: HOL is compiling the file now; call diagnostics for the verdict.")


async def restart(ctx: Context, req: m.Restart, client: str) -> m.RestartResult:
    if req.max_heap_mb is not None and req.max_heap_mb < 0:
        raise BadRequest("max_heap_mb must be 0 (no cap) or a positive number of MB")
    try:
        src = await stepping.sliced(files.read_steps(req.file))
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


async def stop(ctx: Context, req: m.Stop) -> m.StopResult:
    """Stop the file's server, if it has one; it may be busy: that is what stop is for."""
    path = files.resolve(req.file)
    session = ctx.pool.sessions.get(path)
    if session is None or not session.alive:
        return m.StopResult(file=str(path), pid=None, message=f"No HOL server is running for {path.name}.")
    await ctx.pool.stop_session(session, "stop requested")
    return m.StopResult(
        file=str(path), pid=session.pid,
        message=f"Stopped the HOL server for {path.name} (pid {session.pid}); its memory and its place are "
        "free. The next call about the file starts a new one.",
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
