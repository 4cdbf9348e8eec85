"""diagnostics: the verdict on a whole file, once it has settled (or the wait ran out)."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from holsrv.answers import cache, inheritedcheats
from holsrv.answers.common import Context, Report, check_expect_hash, note, opened, read, starting_message
from holsrv.answers.goals import goals
from holsrv.disk import ancestors, files
from holsrv.disk.files import Script, content_hash
from holsrv.lsp import hol
from holsrv.lsp.proofstates import ProofStatus
from holsrv.pool import replacement
from holsrv.pool.pool import Lease, Start
from holsrv.rpc import messages as m
from holsrv.server import runaway
from holsrv.server.session import Session
from holsrv.text import stepping
from holsrv.verdict import looping, outstanding, verdict
from holsrv.verdict.filestate import Phase

# At most one progress frame this often: an agent host shows them, it does not need each notification.
PROGRESS_EVERY_S = 1.0
# How often a wait for a file's next write looks at a file whose writes are
# not noticed (no inotify, or no server yet to watch it): one stat.
RECHECK_S = 1.0
# How long an answer computed ahead of any call, after a write was synced,
# waits for the file to settle.
AHEAD_WAIT_S = 120.0


async def answer(ctx: Context, req: m.Diagnostics, client: str, report: Report | None = None) -> m.DiagnosticsResult:
    deadline = ctx.clock() + max(0.0, req.wait)  # covers a server start too
    if req.changed_since:
        await changed(ctx, req.file, req.changed_since, deadline)
    started = ctx.clock()
    async with opened(ctx, req.file, client, req.wait, tolerate_start=True) as (src, lease):
        session = lease.session
        if not session.starting:  # a build it was blocked on, just written: wait for the retry's answer
            await ctx.pool.unblocker.after_quiet(session, deadline)
        stale = ctx.pool.rebuilt_reasons(src.path, session)
        cached = ctx.cache.hit(cache.diagnostics_key(session, src.hash, stale), note(lease))
        if cached is not None:
            return cached
        if not session.starting:
            await settle(ctx, session, deadline, report)
        _loaded(ctx, session, src.path)
        # Again: a replacement may have started or finished while it settled.
        stale = ctx.pool.rebuilt_reasons(src.path, session)
        result = await _result(ctx, src, lease, stale, ctx.clock() - started)
        session.last_verdict = result.verdict
        def keep() -> bool:
            return ctx.cache.keep(cache.diagnostics_key(session, result.content_hash, stale), result,
                                  settled=result.complete)

        if keep() and result.content_hash == src.hash:
            goals.ask_ahead(ctx, session, src, result, keep)  # the goal states an agent asks for next
        return result


async def ahead(ctx: Context, session: Session, script: Script) -> bool:
    """After a write was synced with no call (`ScriptWatch`): once the file settles, put its
    answer in the cache, so the next call about that text costs what a cached one does.
    True if it did (not for a newer text, another server, or a file that did not settle)."""
    await settle(ctx, session, ctx.clock() + AHEAD_WAIT_S)
    async with session.trials.use(0.0, script.path.name):  # never an answer read off a trial's text
        if session.data != script.data or ctx.pool.sessions.get(script.path) is not session:
            return False  # a newer text, or another server: its own answer is for its call
        stale = ctx.pool.rebuilt_reasons(script.path, session)
        _loaded(ctx, session, script.path)
        result = await _result(ctx, script, Lease(session, Start.WARM), stale, 0.0)
        if not result.complete or session.data != script.data:
            return False
        session.last_verdict = result.verdict
        ctx.cache.keep(cache.diagnostics_key(session, script.hash, stale), result, settled=result.complete)
        return True


def _loaded(ctx: Context, session: Session, path: Path) -> None:
    if session.phase == Phase.COMPLETED and ctx.pool.sessions.get(path) is session:
        # A pass got past preload: these are what it has.
        session.ancestors.loaded(ancestors.built_times(session.file.text, path.parent))


async def changed(ctx: Context, file: str, since: str, deadline: float) -> None:
    """Wait until the file on disk no longer has content `since` (a hash or its start), or `deadline`.

    Woken by the script watch once a write is synced, so the answer after it
    finds HOL's check running; nothing runs meanwhile.
    """
    check_expect_hash(since, "changed_since")
    path = files.resolve(file)
    watch = ctx.pool.scriptwatch
    while True:
        written = watch.next_write(path)  # before reading: a write meanwhile still wakes us
        script = await read(ctx, file)
        left = deadline - ctx.clock()
        if not script.hash.startswith(since) or left <= 0:
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(left if watch.watches(script.path) else min(left, RECHECK_S)):
                await written.wait()


async def _result(ctx: Context, src: Script, lease: Lease, stale: list[str], waited_s: float) -> m.DiagnosticsResult:
    session = lease.session
    text, content = src.text, src.hash
    if session.data is not None and session.data != src.data:
        # Another call synced a newer text meanwhile: what HOL said is about
        # that text, so the answer must say so.
        text, content = session.file.text, content_hash(session.data)
    data = session.data
    loops = ctx.pool.loops.known(src.path, text)
    # In slices: a file of tens of thousands of proofs must not hold up other clients.
    result = await stepping.sliced(verdict.build_steps(
        session.file, text, content, session.encoding, ctx.clock(), ctx.settings, note(lease),
        session.footprint, waited_s, session.walk_errors, loops,
    ))
    result.warnings[:0] = [looped(loop) for loop in loops.values()]
    if session.data != data:
        result.warnings.append(
            "The file changed on disk while this answer was made, so parts of it may be about the newer "
            "text; ask again."
        )
    result.warnings += [f"HOL says: {said}" for said in session.messages if not hol.is_not_compiling_notice(said)]
    result.warnings += stale  # rebuilt ancestors: replaced in the background, or restart
    if content != src.hash:
        result.warnings.append(
            f"The file changed on disk during this call; this answer is about the newer text "
            f"(content {content[:12]}), not the one the call started with."
        )
    await _inherited(ctx, session, src.path, text, result)
    # A statement that differs from the committed one: said before `verify` would name it.
    result.warnings += await ctx.head_notes.notes(src.path, content, text)
    if result.verdict == "BLOCKED" and (missing := replacement.missing_build(
            ancestors.development(text, src.path.parent))):
        result.headline += f" What is missing: {missing} (holctl holmake FILE, or the holmake tool)."
    if session.starting:
        result.outstanding = [starting_message(session, ctx.clock())]
        result.headline = (
            f"INCOMPLETE after {waited_s:.0f}s: the HOL server is still starting. "
            "Nothing was cancelled; call diagnostics again to carry on."
        )
    return result


def looped(loop: runaway.Loop) -> str:
    """The warning about a proof known to loop as it is."""
    return (
        f"LOOPS: proof {loop.name} (line {loop.line}) loops as it is: {loop.why}; its server was replaced by "
        "a fresh one. Edit that proof (or replace it with cheat for now): its check runs the same loop, and "
        "the daemon asks HOL no goal state in it until its tactics change."
    )


async def _inherited(ctx: Context, session: Session, path: Path, text: str, result: m.DiagnosticsResult) -> None:
    """`result` with the proofs resting on cheated theorems of the development's ancestor theories
    (`inheritedcheats`): asked of HOL once per server, after its first compile."""
    if session.starting or session.data is None or session.phase != Phase.COMPLETED:
        return  # not past its compile: blocked (it loaded nothing), or no verdict to judge yet
    theories = ancestors.development(text, path.parent).built()
    if not theories:
        return  # only standard theories below: nothing asked, nothing to find
    cheated = await ctx.ancestor_cheats.of(session, theories, ctx.settings.request_timeout_s)
    if cheated is None:
        said = (f"HOL did not say in time whether the ancestor theories {', '.join(theories[:5])} hold cheated "
                "theorems, so a proof resting on one may be missing from this answer")
        result.warnings.append(f"{said}; ask again.")
        result.complete = False  # not kept: the next answer asks again
        if result.verdict == "OK":
            result.verdict, result.headline = "INCOMPLETE", f"INCOMPLETE: {said}. Call diagnostics again."
        return
    found = inheritedcheats.find(text, cheated)
    inheritedcheats.judged(result, found)
    ctx.ancestor_cheats.said[session] = inheritedcheats.rows(found)


async def settle(ctx: Context, session: Session, deadline: float, report: Report | None = None) -> None:
    """Wait until the file is settled, only slow or looping proofs are left, or the deadline."""
    reported, last = 0.0, m.Progress("")
    while True:
        session.check_alive()
        now = ctx.clock()
        file = session.file
        if report is not None and now - reported >= PROGRESS_EVERY_S:
            progress = _progress(session)
            if progress != last:
                await report(progress)
                reported, last = now, progress
        quiet = outstanding.quiet_for(file, ctx.settings)
        loops = ctx.pool.loops.known(session.path, file.text)
        if now >= deadline or file.settled(now, quiet) or outstanding.complete_but_slow(file, now, ctx.settings,
                                                                                         loops):
            return
        # Besides a notification, only time can change the answer: the quiet
        # period ending, or a proof turning "far slower" or "probably looping".
        moments = [deadline, file.last_event + quiet]
        for entry in file.checking():
            moments += [looping.looping_from(file, entry, now, ctx.settings),
                        looping.slow_from(file, entry, now, ctx.settings)]
        await session.wait_change(max(0.01, min(t for t in moments if t > now) - now))


def _progress(session: Session) -> m.Progress:
    """Where the file's check stands: proofs finished out of those HOL knows of, and what is running."""
    file = session.file
    checking = file.checking()
    done = sum(1 for e in file.proofs.values() if e.status not in (ProofStatus.CHECKING, ProofStatus.CHEATED))
    total = len(file.proofs)
    if file.phase == Phase.COMPILING:
        message = f"compiling {session.path.name}"
    elif checking:
        names = ", ".join(e.name for e in checking[:3]) + (" …" if len(checking) > 3 else "")
        message = f"checking proofs: {names}"
    else:
        message = "settling: waiting for HOL's last reports"
    return m.Progress(message, done, total)
