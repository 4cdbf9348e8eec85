"""The dispatch table: which module answers each request, and the one place
a request's error becomes an `ErrorReply`.

Every error a request causes becomes an `ErrorReply` here, once; a bug
becomes an `internal` error with its traceback in the log, and the
connection that asked survives.  The table knows nothing of connections:
whoever serves one hands it a request and gets a reply back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import assert_never

import msgspec

from holsrv import __version__, facilities
from holsrv.answers import (
    common,
    control,
    diagnostics,
    editors,
    fastpath,
    holes,
    holmake,
    logs,
    lookups,
    search,
    uses,
    verify,
)
from holsrv.answers.common import Context, Report
from holsrv.answers.goals import goalbatch, goals
from holsrv.answers.trials import trials
from holsrv.config import holbuild
from holsrv.disk import files
from holsrv.errors import BadRequest, DaemonRestarting, HolsrvError, RanAway
from holsrv.jobs import Deferrable, Job, Jobs, Stop
from holsrv.metrics.metrics import Metrics
from holsrv.rpc import limits
from holsrv.rpc import messages as m

log = logging.getLogger(__name__)

# How much of a request a log line quotes.
LOGGED_CHARS = 300


class Dispatch:
    """Answers requests: checks them, calls the module that owns the answer, stamps its freshness.

    `stopping` is set by a shutdown request; `started` (monotonic) is the daemon's start, for its uptime.
    """

    def __init__(self, answers: Context, stopping: asyncio.Event, started: float,
                 clients: Callable[[], list[str]],
                 restart: Callable[[], Awaitable[m.RestartDaemonResult]] | None = None) -> None:
        self.answers = answers
        self.stopping = stopping
        self.started = started
        # Shorthands, for the status.
        self.pool, self.cache, self.settings = answers.pool, answers.cache, answers.settings
        self.build_names = holbuild.BuildNames()  # for status rows whose HOL did not name its build
        # A cancelled trial's `finally` gives the server the file's text back: a sync, then the compile.
        cancel_wait = self.settings.lookup_wait_s + self.settings.request_timeout_s
        self.jobs = Jobs(self.settings.max_jobs, self.settings.job_keep_s, cancel_wait, self.pool.clock)
        self.metrics = Metrics(answers, clients)  # `clients`: the connected clients' names, for the metrics
        # Status's settings, made once: the daemon's settings are fixed for its life (a restart re-execs),
        # and listing where each of fifty came from was half of a status call's time.
        self._settings_rows = [m.SettingSource(name, value, source) for name, value, source in
                               self.settings.effective()]
        # Restarting in place (`holsrv.daemon`, `holsrv.pool.handover`): new requests are refused with
        # `daemon_restarting`, the calls in flight (counted here) finish; `restart` is the daemon's.
        self.restarting = False
        self.in_flight = 0
        self.restart = restart
        self.last_restart: dict[str, float] = {}  # `status`'s restart fields, as the daemon set them
        self.failed_restarts, self.restart_failed = 0, ""  # restarts whose `exec` failed, and why

    async def answer(self, request: m.Request, client: str, report: Report | None = None) -> m.Reply:
        """The reply to `request`, counted in the metrics (its kind, time, and error code if any)."""
        started = time.monotonic()
        if self.restarting:
            reply: m.Reply = m.ErrorReply(DaemonRestarting.code, str(DaemonRestarting()))
        else:
            self.in_flight += 1
            try:
                reply = await self._answer(request, client, report)
            finally:
                self.in_flight -= 1
        self.metrics.answered(request, reply, time.monotonic() - started)
        return reply

    async def _answer(self, request: m.Request, client: str, report: Report | None = None) -> m.Reply:
        try:
            limits.check_request(request)
            common.check_expect_hash(getattr(request, "expect_hash", ""))
            if isinstance(request, Deferrable) and request.defer_after is not None:
                return await self._deferred(request, request.defer_after, client, report)
            return await common.stamp(self.answers, request, await self._served(request, client, report))
        except HolsrvError as err:
            log.info("%s from %s: %s: %s", type(request).__name__, client, err.code, err)
            return m.ErrorReply(err.code, str(err), err.detail)
        except ConnectionError:
            raise  # the caller went away while it was sent progress
        except Exception as err:
            log.exception("internal error answering %.*r", LOGGED_CHARS, request)
            return m.ErrorReply("internal", f"internal error in the daemon: {err!r}; see the daemon log")

    def at_once(self, request: m.Request, client: str) -> m.Reply | None:
        """The reply to `request` if it can be given with nothing awaited (a cached answer,
        see `fastpath`); None if it needs `answer`, which also says what is wrong with it."""
        started = time.monotonic()
        if self.restarting:
            return None  # `answer` refuses it
        try:
            limits.check_request(request)
            common.check_expect_hash(getattr(request, "expect_hash", ""))
            reply = fastpath.answer(self.answers, request, client)
            if reply is not None:
                self.metrics.answered(request, reply, time.monotonic() - started)
            return reply
        except HolsrvError:
            return None
        except Exception:
            log.exception("internal error in the fast path for %.*r; answering it the ordinary way",
                          LOGGED_CHARS, request)
            return None

    async def dispatch(self, request: m.Request, client: str, report: Report | None = None) -> m.Reply:
        ctx = self.answers
        match request:
            case m.Diagnostics():
                return await diagnostics.answer(ctx, request, client, report)
            case m.GoalState() if request.positions is not None:
                return await goalbatch.goal_states(ctx, request, client)
            case m.GoalState():
                return await goals.goal_state(ctx, request, client)
            case m.Hover():
                return await lookups.hover(ctx, request, client)
            case m.Definition():
                return await lookups.definition(ctx, request, client)
            case m.References():
                return await lookups.references(ctx, request, client)
            case m.Completion():
                return await lookups.completion(ctx, request, client)
            case m.DocumentSymbol():
                return await lookups.document_symbol(ctx, request, client)
            case m.WorkspaceSymbol():
                return await lookups.workspace_symbol(ctx, request, client)
            case m.Eval():
                return await control.eval(ctx, request, client)
            case m.RetryCompile():
                return await control.retry_compile(ctx, request, client)
            case m.Restart():
                return await control.restart(ctx, request, client)
            case m.Stop():
                return await control.stop(ctx, request)
            case m.Search():
                return await search.search(ctx, request, client)
            case m.Holmake():
                return await holmake.holmake(ctx, request, client, report)
            case m.Status():
                return await self.status()
            case m.Metrics():
                return m.MetricsResult(self.metrics.text())
            case m.RestartDaemon():
                if self.restart is None:
                    raise BadRequest("this daemon cannot restart in place")
                return await self.restart()
            case m.Shutdown():
                self.stopping.set()
                return m.ShutdownResult(f"holsrv (pid {os.getpid()}) is stopping its HOL servers and exiting")
            case m.Try():
                return await trials.try_tactics(ctx, request, client, report)
            case m.GoalDiff():
                return await trials.goal_diff(ctx, request, client)
            case m.Logs():
                return await logs.logs(ctx, request)
            case m.Job():
                return await self._job(request)
            case m.Uses():
                return await uses.uses(ctx, request, client)
            case m.Verify():
                return await verify.verify(ctx, request, client, report)
            case m.Holes():
                return await holes.holes(ctx, request, client, report)
            case m.EditorAttach():  # the connection serves it (it needs the stream): only an editor's first frame
                raise BadRequest("editorAttach must be the first request of a connection: `holctl lsp` sends it")
            case _:
                assert_never(request)

    async def _served(self, request: m.Request, client: str, report: Report | None) -> m.Reply:
        """`dispatch`, and once more if the file's server was replaced as a runaway while the call
        waited on it: asked of the fresh server within what is left of the call's wait, the
        answer telling what happened.  With no wait left, the error tells it (`RanAway`)."""
        started = self.pool.clock()
        try:
            return await self.dispatch(request, client, report)
        except RanAway as ran:
            if isinstance(request, (m.Job, m.Try, m.Restart, m.Stop)) or not hasattr(request, "file"):
                raise  # a trial carries on by itself; the others are not about a server's answer
            again: m.Request = request
            wait = getattr(request, "wait", None)
            if wait is not None:
                left = wait - (self.pool.clock() - started)
                if left <= 0:
                    raise
                again = msgspec.structs.replace(request, wait=left)
            log.info("%s from %s: asking the fresh server after a runaway", type(request).__name__, client)
            return common.told(await self.dispatch(again, client, report), ran)

    async def close(self, budget_s: float) -> None:
        """The daemon is stopping: cancel the jobs still running (their callers have gone), within `budget_s`."""
        await self.jobs.close(budget_s)

    async def _deferred(self, request: Deferrable, defer_after: float, client: str,
                        report: Report | None) -> m.Reply:
        """`request` answered as the plain call, in a job of its own once it outruns `defer_after`."""
        plain = msgspec.structs.replace(request, defer_after=None)
        stop = self._build_stop(plain) if isinstance(plain, m.Holmake) else None
        # `_answer`, not `answer`: the metrics count the call once, as the request that asked it.
        return await self.jobs.defer(plain, defer_after, lambda relay: self._answer(plain, client, relay), report, stop)

    def _build_stop(self, request: m.Holmake) -> Stop:
        """Cancelling a holmake job kills the build it follows, as the build's time limit does."""

        async def stop() -> None:
            with contextlib.suppress(HolsrvError):  # a file that cannot be read started no build
                await self.pool.builds.stop(files.resolve(request.file).parent, "it was cancelled (job --cancel)")

        return stop

    async def _job(self, request: m.Job) -> m.Reply:
        job = self.jobs.find(request.id)
        if request.cancel:
            return await self.jobs.cancel(job)
        reply = await self.jobs.wait(job, request.wait)
        if isinstance(reply, m.JobState):
            return reply
        return await common.stamp(self.answers, job.request, _aged(reply, job, self.pool.clock()))

    async def _named(self, rows: list[m.SessionStatus]) -> list[m.SessionStatus]:
        """Rows whose HOL said no build (`serverInfo` version "unknown") with what names it."""
        for row in rows:
            session = self.pool.sessions.get(Path(row.file))
            if session is not None and session.lsp is not None and not holbuild.said(row.hol_version):
                row.hol_build = await self.build_names.of(session.hol_cmd, session.holdir)
        return rows

    async def status(self) -> m.StatusResult:
        for session in list(self.pool.sessions.values()):
            await session.refresh_tally()
        now = self.pool.clock()
        return m.StatusResult(
            daemon_version=__version__,
            protocol=m.PROTOCOL_VERSION,
            pid=os.getpid(),
            uptime_s=round(time.monotonic() - self.started, 1),
            socket=str(self.settings.socket),
            max_servers=self.settings.max_servers,
            sessions=self.answers.ancestor_cheats.marked(
                await self._named(await editors.marked(self.answers, self.pool.status_rows(now))),
                self.pool.sessions.get),
            cache_hits=self.cache.hits,
            cache_misses=self.cache.misses,
            settings=self._settings_rows,
            memory_budget_mb=self.settings.memory_budget_mb,
            memory_used_mb=round(self.pool.memory_held_mb(), 1),
            memory_budget_source=self.settings.budget_source(),
            max_heap_mb=self.settings.max_heap_mb,
            usual_footprint_mb=round(self.pool.admission.expected_mb(self.settings.max_heap_mb), 1),
            servers_fit=self.pool.admission.fit(self.pool.live(), self.settings.max_heap_mb),
            jobs=self.jobs.rows(),
            editors=await editors.status(self.answers),
            prefetch_asked=self.answers.prefetches.asked,
            prefetch_hits=self.answers.prefetches.hits,
            runaways=self.pool.runaways,
            last_runaway=self.pool.last_runaway,
            facilities=facilities.described(),
            restarts=int(self.last_restart.get("restarts", 0)),
            restarted_at=self.last_restart.get("at", 0.0),
            restart_s=round(self.last_restart.get("took", 0.0), 3),
            adopted=int(self.last_restart.get("adopted", 0)),
            not_adopted=int(self.last_restart.get("not_adopted", 0)),
            failed_restarts=self.failed_restarts,
            restart_failed=self.restart_failed,
        )


def _aged(reply: m.Reply, job: Job, now: float) -> m.Reply:
    """A job's answer, its freshness aged by the time it waited to be collected (`stamp` keeps the age)."""
    fresh = getattr(reply, "freshness", None)
    if fresh is None or job.ended is None:
        return reply
    return common.replace(reply, freshness=common.replace(fresh, age_s=round(fresh.age_s + now - job.ended, 2)))
