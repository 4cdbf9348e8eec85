"""holmake: build a script's directory with the servers' HOL, and say what failed.

The run belongs to the pool's `Builds` (one per directory); this call
follows it, relaying its last output line as progress, and reads the
outcome: success, or the theory that failed with the tail of its log
(Holmake keeps one per theory under `.hol/logs/`), else of its own output;
the theories it reported CHEATED; and the open files whose blocked compile
it let go on (`unblocking`: the daemon retries them before answering).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from holsrv.answers.common import Context, Report
from holsrv.config.settings import Settings
from holsrv.disk import files
from holsrv.errors import BadRequest, DaemonStopping
from holsrv.process import builds
from holsrv.rpc import messages as m
from holsrv.text import stepping

# How long a call waits between looks at a run that prints nothing (a
# bound on each wait, not a poll: a line or the end wakes it at once).
FOLLOW_S = 5.0
MAX_TAIL_CHARS = 8000
_TARGET = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.'/-]*")
# "Failed script build for fooScript - exited with code 1" and "fooTheory   FAILED!"
_FAILED_SCRIPT = re.compile(r"Failed script build for (\S+?)(?:Script)?\b")
_FAILED_LINE = re.compile(r"^\s*(\S+?)(?:Theory)?\s.*\bFAILED!?\s*$")


def command(ctx: Context, req: m.Holmake, settings: Settings | None = None) -> list[str]:
    """The Holmake command line for `req` with `settings` (its file's project's, default the daemon's);
    BadRequest for a target or jobs it must not pass."""
    settings = settings or ctx.settings
    if req.target and not _TARGET.fullmatch(req.target):
        raise BadRequest(f"target {req.target[:60]!r} is not a Holmake target: give a file name such as "
                         "fooTheory.uo (no options, no spaces), or leave it out for the default")
    if not 0 <= req.jobs <= 256:
        raise BadRequest("jobs must be 0 (the daemon's holmake_jobs setting) to 256")
    jobs = req.jobs or settings.holmake_jobs
    return [settings.holmake_command(), *(["-j", str(jobs)] if jobs else []), *([req.target] if req.target else [])]


async def holmake(ctx: Context, req: m.Holmake, client: str, report: Report | None = None) -> m.HolmakeResult:
    path = (await stepping.sliced(files.read_steps(req.file))).path  # a bad file fails here, before anything runs
    # The HOL of the file's project runs Holmake too (a bad project file refuses the call here).
    settings, _ = ctx.pool.projects.settings_for(path, ctx.settings)
    argv = command(ctx, req, settings)
    if ctx.pool.closing:
        raise DaemonStopping("the daemon is shutting down, so it starts no Holmake; call again in a few seconds")
    env = dict(os.environ)
    if settings.extra_path:  # what the servers get, so Holmake finds the same tools
        env["PATH"] = os.pathsep.join([*settings.extra_path, env.get("PATH", "")])
    build, joined = ctx.pool.builds.start(path.parent, argv, env, settings.holmake_timeout_s)
    assert build.task is not None
    shown = -1
    while not build.task.done():
        if report is not None and build.lines_seen != shown:
            shown = build.lines_seen
            await report(m.Progress(f"Holmake: {build.last_line() or 'starting'}", build.lines_seen))
        await build.wait_change(FOLLOW_S)
    if build.task.cancelled():
        raise DaemonStopping(f"Holmake in {build.directory} was killed: the daemon is shutting down. Call "
                             "holmake again once a daemon runs.")
    # Even a failed build may have built what a blocked file was missing.
    unblocked = await ctx.pool.unblocker.after_build(ctx.settings.lookup_wait_s)
    result = _result(path, build, build.task.result(), joined)
    result.unblocked = sorted(str(s.path) for s in unblocked)
    if unblocked:
        names = ", ".join(sorted(s.path.name for s in unblocked))
        result.message += (f" It built what {names} had been blocked on, so the daemon asked HOL to compile "
                           f"{'it' if len(unblocked) == 1 else 'them'} again: no retryCompile needed.")
    return result


def _result(path: Path, build: builds.Build, outcome: builds.Outcome, joined: bool) -> m.HolmakeResult:
    where = build.directory
    base = m.HolmakeResult(file=str(path), directory=str(where), ok=False, message="", command=build.command,
                           exit_code=outcome.exit_code, timed_out=outcome.timed_out,
                           elapsed_s=round(outcome.elapsed_s, 1), shared=joined)
    output = list(build.tail)
    shared = " (this call joined the Holmake another call had started there)" if joined else ""
    base.cheated = list(build.cheated)
    if outcome.exit_code == 0:
        base.ok = True
        base.message = f"Holmake built {where} in {outcome.elapsed_s:.1f}s{shared}. Call diagnostics to re-check."
        if build.cheated:
            base.message += (f" CHEATED: {', '.join(build.cheated)} built with a cheated proof, so "
                             f"{'it is' if len(build.cheated) == 1 else 'they are'} not proved.")
        return base
    failed = _failed_theory(output)
    base.failed = failed
    base.log_tail = _log_tail(where, failed, output, len(build.tail) or 1)[-MAX_TAIL_CHARS:]  # the end says why
    if outcome.timed_out:
        base.message = (f"Holmake in {where} ran past the daemon's limit (HOLSRV_HOLMAKE_TIMEOUT_S) and was "
                        f"killed{shared}. Look for a looping proof in the log tail, or raise the limit.")
    elif outcome.stopped:
        base.message = f"Holmake in {where} did not run to the end: {outcome.stopped}{shared}."
    else:
        what = f"{failed} failed to build" if failed else "the build failed"
        base.message = (f"Holmake in {where} exited with status {outcome.exit_code}: {what}{shared}. The log "
                        "tail says why; fix that script and call holmake again.")
    return base


def _failed_theory(output: list[str]) -> str:
    """The theory Holmake names as failed, "" when it names none."""
    for line in reversed(output):
        found = _FAILED_SCRIPT.search(line) or _FAILED_LINE.match(line)
        if found:
            return found.group(1)
    return ""


def _log_tail(directory: Path, failed: str, output: list[str], lines: int) -> str:
    """The last `lines` of the failed theory's log, else of Holmake's output."""
    if failed:
        for log in (directory / ".hol" / "logs" / f"{failed}Theory", directory / ".hol" / "logs" / failed):
            try:
                with open(log, "rb") as handle:
                    handle.seek(0, 2)
                    handle.seek(max(0, handle.tell() - MAX_TAIL_CHARS * 2))
                    text = handle.read().decode("utf-8", "replace")
            except OSError:
                continue
            return "\n".join(text.splitlines()[-lines:])
    return "\n".join(output[-lines:])
