"""The dispatch table: which module answers each request, and the one place
a request's error becomes an `ErrorReply`.

Every error a request causes becomes an `ErrorReply` here, once; a bug
becomes an `internal` error with its traceback in the log, and the
connection that asked survives.  The table knows nothing of connections:
whoever serves one hands it a request and gets a reply back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import assert_never

from holsrv import __version__
from holsrv.answers import common, control, diagnostics, editors, goals, holmake, logs, lookups, search, trials
from holsrv.answers.common import Context, Report
from holsrv.errors import BadRequest, HolsrvError
from holsrv.rpc import limits
from holsrv.rpc import messages as m

log = logging.getLogger(__name__)

# How much of a request a log line quotes.
LOGGED_CHARS = 300


class Dispatch:
    """Answers requests: checks them, calls the module that owns the answer, stamps its freshness.

    `stopping` is set by a shutdown request; `started` (monotonic) is the daemon's start, for its uptime.
    """

    def __init__(self, answers: Context, stopping: asyncio.Event, started: float) -> None:
        self.answers = answers
        self.stopping = stopping
        self.started = started
        # Shorthands, for the status.
        self.pool, self.cache, self.settings = answers.pool, answers.cache, answers.settings

    async def answer(self, request: m.Request, client: str, report: Report | None = None) -> m.Reply:
        try:
            limits.check_request(request)
            common.check_expect_hash(getattr(request, "expect_hash", ""))
            return await common.stamp(self.answers, request, await self.dispatch(request, client, report))
        except HolsrvError as err:
            log.info("%s from %s: %s: %s", type(request).__name__, client, err.code, err)
            return m.ErrorReply(err.code, str(err), err.detail)
        except ConnectionError:
            raise  # the caller went away while it was sent progress
        except Exception as err:
            log.exception("internal error answering %.*r", LOGGED_CHARS, request)
            return m.ErrorReply("internal", f"internal error in the daemon: {err!r}; see the daemon log")

    async def dispatch(self, request: m.Request, client: str, report: Report | None = None) -> m.Reply:
        ctx = self.answers
        match request:
            case m.Diagnostics():
                return await diagnostics.answer(ctx, request, client, report)
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
            case m.Shutdown():
                self.stopping.set()
                return m.ShutdownResult(f"holsrv (pid {os.getpid()}) is stopping its HOL servers and exiting")
            case m.Try():
                return await trials.try_tactics(ctx, request, client, report)
            case m.GoalDiff():
                return await trials.goal_diff(ctx, request, client)
            case m.Logs():
                return await logs.logs(ctx, request)
            case m.EditorAttach():  # the connection serves it (it needs the stream): only an editor's first frame
                raise BadRequest("editorAttach must be the first request of a connection: `holctl lsp` sends it")
            case _:
                assert_never(request)

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
            sessions=await editors.marked(self.answers, self.pool.status_rows(now)),
            cache_hits=self.cache.hits,
            cache_misses=self.cache.misses,
            settings=[m.SettingSource(name, value, source) for name, value, source in self.settings.effective()],
            memory_budget_mb=self.settings.memory_budget_mb,
            memory_used_mb=round(self.pool.memory_held_mb(), 1),
            memory_budget_source=self.settings.budget_source(),
            max_heap_mb=self.settings.max_heap_mb,
            usual_footprint_mb=round(self.pool.admission.expected_mb(self.settings.max_heap_mb), 1),
            servers_fit=self.pool.admission.fit(self.pool.live(), self.settings.max_heap_mb),
            editors=await editors.status(self.answers),
        )
