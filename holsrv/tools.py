"""The answer to each file request: sync the file, ask its server, shape the reply.

Every call re-reads the file (the file on disk is the truth), leases the
file's session from the pool (starting it if needed), and converts
positions at this one boundary.  Waits never cancel anything in the server.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import msgspec

from holsrv import ancestors, files, looping, script, verdict
from holsrv.cache import AnswerCache
from holsrv.errors import BadRequest, FileNotFound, LspError, ServerTimeout, Starting
from holsrv.files import content_hash
from holsrv.pool import Lease, Pool
from holsrv.positions import Text
from holsrv.rpc import messages as m
from holsrv.session import Session
from holsrv.settings import Settings

_ANSI = re.compile(r"\x1B\[[0-9;]*m")
_COMPLETION_KINDS = {
    1: "text", 2: "method", 3: "function", 4: "constructor", 5: "field", 6: "value",
    7: "class", 8: "interface", 9: "structure", 10: "property", 12: "value", 13: "enum",
    14: "keyword", 15: "snippet", 21: "theorem", 22: "type", 25: "type parameter",
}
_SYMBOL_KINDS = {
    2: "theory/structure", 5: "class", 6: "conjunct", 9: "constructor", 10: "datatype",
    11: "signature", 12: "definition", 13: "value", 14: "theorem", 23: "type", 25: "overload",
}
MAX_COMPLETIONS = 50
MAX_SYMBOLS = 500
MAX_EVAL_CHARS = 64 * 1024


class Tools:
    def __init__(
        self, pool: Pool, cache: AnswerCache, settings: Settings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.pool = pool
        self.cache = cache
        self.settings = settings
        self.clock = clock

    @contextlib.asynccontextmanager
    async def _open(
        self, file: str, client: str, wait: float | None = None, *, tolerate_start: bool = False
    ) -> AsyncIterator[tuple[files.Script, Lease]]:
        """Read the file, lease its server, wait (up to `wait`) for it to start, sync it.

        If the server is still starting when `wait` runs out, raise `Starting`,
        unless `tolerate_start`: then yield unsynced and let the caller say so.
        """
        script_ = files.read(file)  # bad input fails here, before any HOL starts
        async with self.pool.lease(script_.path, client) as lease:
            session = lease.session
            if await session.wait_started(self.settings.start_wait_s if wait is None else wait):
                if lease.start != "warm":
                    script_ = files.read(file)  # the start took a while: the newest text wins
                await session.sync(script_.data, script_.text)
            elif not tolerate_start:
                raise Starting(_starting_message(session, self.clock()))
            yield script_, lease

    @staticmethod
    def _note(lease: Lease) -> m.ServerNote:
        return m.ServerNote(pid=lease.session.pid or 0, start=lease.start, note=lease.note,
                            stderr_tail=lease.stderr_tail)

    async def _compiled(self, session: Session) -> None:
        """Wait (up to the diagnostics wait) for the compile of our text to end.

        Hover, definition and symbols read the compiler's trees, and retry
        must know whether the file is blocked.
        """
        await session.wait_until(lambda: session.file.phase != "compiling", self.settings.lookup_wait_s)

    # -- diagnostics -----------------------------------------------------------

    async def diagnostics(self, req: m.Diagnostics, client: str) -> m.DiagnosticsResult:
        started = self.clock()
        deadline = started + max(0.0, req.wait)  # covers a server start too
        async with self._open(req.file, client, req.wait, tolerate_start=True) as (src, lease):
            session = lease.session
            built = ancestors.built_times(src.text, src.path.parent)
            rebuilt = session.ancestors.rebuilt(built)
            question = ("diagnostics", src.hash, tuple(rebuilt))
            cached = self.cache.get(_key(session, question))
            if cached is not None:
                return _replace(cached, cached=True, server=self._note(lease))
            if not session.starting:
                await self._settle(session, deadline)
            text, content = src.text, src.hash
            if session.data is not None and session.data != src.data:
                # Another call synced a newer text meanwhile: what HOL said is
                # about that text, so the answer must say so.
                text, content = session.file.text, content_hash(session.data)
            if session.file.phase == "completed":
                session.ancestors.loaded(built)  # a pass got past preload: these are what it has
            result = verdict.build(
                session.file, text, content, session.lsp.position_encoding if session.lsp else "utf-8",
                self.clock(), self.settings, self._note(lease), session.footprint, self.clock() - started,
                session.walk_errors,
            )
            result.warnings += [f"HOL says: {said}" for said in session.messages if "not compiling" not in said]
            if rebuilt:
                result.warnings.append(
                    f"REBUILT: {', '.join(rebuilt)} changed after this HOL server loaded it; HOL never "
                    "reloads a theory, so these answers use the old one. Call restart to use the new build."
                )
            if content != src.hash:
                result.warnings.append(
                    f"The file changed on disk during this call; this answer is about the newer text "
                    f"(content {content[:12]}), not the one the call started with."
                )
                question = ("diagnostics", content, tuple(rebuilt))
            if session.starting:
                result.outstanding = [_starting_message(session, self.clock())]
                result.headline = (
                    f"INCOMPLETE after {self.clock() - started:.0f}s: the HOL server is still starting. "
                    "Nothing was cancelled; call diagnostics again to carry on."
                )
            session.last_verdict = result.verdict
            if result.complete:
                self.cache.put(_key(session, question), result)
            return result

    async def _settle(self, session: Session, deadline: float) -> None:
        """Wait until the file is settled, only looping proofs are left, or the deadline."""
        while True:
            session.check_alive()
            now = self.clock()
            file = session.file
            quiet = verdict.quiet_for(file, self.settings)
            if now >= deadline or file.settled(now, quiet) or verdict.complete_but_slow(file, now, self.settings):
                return
            # Besides a notification, only time can change the answer: the quiet
            # period ending, or a proof turning "far slower" or "probably looping".
            moments = [deadline, file.last_event + quiet]
            for entry in file.checking():
                moments += [looping.looping_from(file, entry, now, self.settings),
                            looping.slow_from(file, entry, now, self.settings)]
            await session.wait_change(max(0.01, min(t for t in moments if t > now) - now))

    # -- goal state ------------------------------------------------------------

    async def goal_state(self, req: m.GoalState, client: str) -> m.GoalStateResult:
        deadline = self.clock() + max(0.0, req.wait)
        async with self._open(req.file, client, req.wait, tolerate_start=True) as (src, lease):
            session = lease.session
            lines = Text(src.text)
            lines.to_lsp(req.line, req.col, "utf-8")  # a bad position is refused even while starting
            base = m.GoalStateResult(
                file=str(src.path), content_hash=src.hash, line=req.line, col=req.col,
                state="", message="", server=self._note(lease),
            )
            if session.starting:
                return _replace(base, state="starting", message=_starting_message(session, self.clock()))
            encoding = session.lsp.position_encoding
            position = lines.to_lsp(req.line, req.col, encoding)
            question = ("goalState", src.hash, req.line, req.col)
            cached = self.cache.get(_key(session, question))
            if cached is not None:
                return _replace(cached, cached=True, server=self._note(lease))
            while True:
                answer = await session.request(
                    "$/hol/goalState",
                    {"textDocument": {"uri": session.uri}, "position": position, "width": 80},
                )
                if not _is_pending(answer) or self.clock() >= deadline:
                    break
                # The server answers once the running pass announces completion.
                await session.wait_change(min(1.0, deadline - self.clock()))
            result = self._goal_result(base, answer, src.text, session, encoding)
            if result.error:
                session.walk_errors.append(result.error.rstrip())
            if session.data != src.data:
                # Another call synced a newer text while this one waited.
                return _replace(
                    result, content_hash=content_hash(session.data or b""), provisional=True,
                    message="The file changed on disk during this call, so this may not match the new "
                    "text at this position; ask again.",
                )
            # A walk that ran out of time may succeed on a less busy machine.
            timed_out = "timed out" in result.error
            if result.state == "ok" and not result.provisional and not timed_out and session.file.phase == "completed":
                self.cache.put(_key(session, question), result)
            return result

    def _goal_result(
        self, base: m.GoalStateResult, answer, text: str, session: Session, encoding: str
    ) -> m.GoalStateResult:
        if answer is None:
            if session.file.phase == "blocked":
                return _replace(base, state="blocked", message=_blocked_message(session))
            return _replace(base, state="not_in_proof", message=_outside_message(text, base.line, base.col))
        if _is_pending(answer):
            if session.file.phase == "blocked":
                return _replace(base, state="blocked", message=_blocked_message(session))
            return _replace(
                base, state="compiling",
                message="The file is still compiling, so there is no goal state yet. Ask again in a few seconds "
                "(or call diagnostics, which waits for the compile).",
            )
        lines = Text(text)
        failed = answer.get("failedRange")
        return _replace(
            base,
            state="ok",
            message="",
            theorem=str(answer.get("theorem", "")),
            step=int(answer.get("step", 0) or 0),
            goals=[
                m.Goal(asms=[_ANSI.sub("", a) for a in g.get("asms", [])], goal=_ANSI.sub("", g.get("goal", "")))
                for g in answer.get("goals", [])
            ],
            context=[str(c) for c in answer.get("context", []) or []],
            note=answer.get("note") or "",
            error=answer.get("error") or "",
            failed_range=verdict.lsp_range(lines, failed, encoding) if failed else None,
            provisional=answer.get("status") == "pending",
        )

    # -- lookups ---------------------------------------------------------------

    async def _ask_at(self, file: str, line: int, col: int, client: str, method: str):
        async with self._open(file, client) as (src, lease):
            session = lease.session
            position = Text(src.text).to_lsp(line, col, session.lsp.position_encoding)
            # Hover and definition read the compiler's trees: let it reach here.
            await self._compiled(session)
            params = {"textDocument": {"uri": session.uri}, "position": position}
            try:
                answer = await session.request(method, params)
            except LspError as err:
                answer = err
            return src, lease, answer, _frontier_note(session)

    async def hover(self, req: m.Hover, client: str) -> m.HoverResult:
        src, lease, answer, note = await self._ask_at(req.file, req.line, req.col, client, "textDocument/hover")
        _raise_lsp(answer)
        text, rng = None, None
        if isinstance(answer, dict):
            contents = answer.get("contents")
            text = contents.get("value") if isinstance(contents, dict) else str(contents or "") or None
            if answer.get("range"):
                rng = verdict.lsp_range(Text(src.text), answer["range"], lease.session.lsp.position_encoding)
        session = lease.session
        word = Text(src.text).word_at(req.line, req.col)
        status = verdict.theorem_status(session.file, src.text, session.lsp.position_encoding, word, self.clock())
        return m.HoverResult(
            file=str(src.path), content_hash=src.hash, text=text, server=self._note(lease), range=rng, note=note,
            proof_status=status,
        )

    async def definition(self, req: m.Definition, client: str) -> m.DefinitionResult:
        src, lease, answer, note = await self._ask_at(req.file, req.line, req.col, client, "textDocument/definition")
        _raise_lsp(answer)
        links = answer if isinstance(answer, list) else ([answer] if isinstance(answer, dict) else [])
        encoding = lease.session.lsp.position_encoding
        targets = [self._location(link, src, encoding) for link in links]
        return m.DefinitionResult(
            file=str(src.path), content_hash=src.hash, targets=targets, server=self._note(lease), note=note
        )

    def _location(self, link: dict, src: files.Script, encoding: str) -> m.Location:
        uri = link.get("targetUri") or link.get("uri", "")
        rng = link.get("targetSelectionRange") or link.get("targetRange") or link.get("range") or {}
        path = uri.removeprefix("file://")
        text = Text(src.text if Path(path) == src.path else _read_quietly(path))
        return m.Location(path=path, range=verdict.lsp_range(text, rng, encoding))

    async def references(self, req: m.References, client: str) -> m.ReferencesResult:
        src, lease, answer, note = await self._ask_at(req.file, req.line, req.col, client, "textDocument/references")
        base = dict(file=str(src.path), content_hash=src.hash, server=self._note(lease))
        if isinstance(answer, LspError):
            if "unknown method" in str(answer):
                return m.ReferencesResult(
                    **base, supported=False, locations=[],
                    message="This HOL server does not support references (textDocument/references). "
                    "Use workspaceSymbol to find theorems by name, or definition to jump to one.",
                )
            raise answer
        encoding = lease.session.lsp.position_encoding
        locations = [self._location(loc, src, encoding) for loc in answer or []]
        return m.ReferencesResult(**base, supported=True, locations=locations, message=f"{len(locations)} references")

    async def completion(self, req: m.Completion, client: str) -> m.CompletionResult:
        src, lease, answer, note = await self._ask_at(req.file, req.line, req.col, client, "textDocument/completion")
        _raise_lsp(answer)
        raw = answer.get("items", []) if isinstance(answer, dict) else (answer or [])
        items = [
            m.CompletionItem(label=str(i.get("label", "")), kind=_COMPLETION_KINDS.get(i.get("kind"), "other"),
                             detail=str(i.get("detail", "") or ""))
            for i in raw[:MAX_COMPLETIONS]
        ]
        incomplete = bool(answer.get("isIncomplete")) if isinstance(answer, dict) else False
        return m.CompletionResult(file=str(src.path), content_hash=src.hash, items=items, total=len(raw),
                                  incomplete=incomplete, server=self._note(lease), note=note)

    async def document_symbol(self, req: m.DocumentSymbol, client: str) -> m.DocumentSymbolResult:
        async with self._open(req.file, client) as (src, lease):
            session = lease.session
            # Parse-driven in the server: works on files that do not compile.
            answer = await session.request("textDocument/documentSymbol", {"textDocument": {"uri": session.uri}})
            symbols: list[m.Symbol] = []
            _flatten(answer or [], Text(src.text), session.lsp.position_encoding, 0, symbols)
            return m.DocumentSymbolResult(file=str(src.path), content_hash=src.hash,
                                          symbols=symbols[:MAX_SYMBOLS], server=self._note(lease))

    async def workspace_symbol(self, req: m.WorkspaceSymbol, client: str) -> m.WorkspaceSymbolResult:
        if len(req.query.strip()) < 2:
            raise BadRequest(
                "the query must have at least 2 characters (it is matched as a case-insensitive substring)"
            )
        async with self._open(req.file, client) as (src, lease):
            session = lease.session
            await self._compiled(session)
            answer = await session.request("workspace/symbol", {"query": req.query.strip()})
            symbols = [_workspace_item(s) for s in answer or []]
            return m.WorkspaceSymbolResult(
                file=str(src.path), query=req.query, symbols=symbols, server=self._note(lease),
                note=_frontier_note(session),
            )

    # -- eval, retry, restart --------------------------------------------------

    async def eval(self, req: m.Eval, client: str) -> m.EvalResult:
        if not req.code.strip():
            raise BadRequest("no code to evaluate")
        async with self._open(req.file, client) as (src, lease):
            session = lease.session
            mark = session.stderr_seen
            timed_out = False
            try:
                reports = await session.request(
                    "$/eval", {"uri": session.uri, "code": req.code, "incr": 0, "holdep": 1}, max(0.1, req.timeout)
                )
            except ServerTimeout:
                timed_out, reports = True, []
            output, errors = _eval_reports(reports or [], req.code, session.lsp.position_encoding)
            if timed_out:
                errors.append(f"timed out after {req.timeout:g}s; the evaluation was cancelled")
            return m.EvalResult(
                file=str(src.path), output=verdict.clip(output, MAX_EVAL_CHARS),
                errors=[verdict.clip(e, verdict.MAX_MESSAGE_CHARS) for e in errors[:50]],
                stderr=verdict.clip(session.stderr_since(mark), MAX_EVAL_CHARS),
                timed_out=timed_out, server=self._note(lease),
            )

    async def retry_compile(self, req: m.RetryCompile, client: str) -> m.RetryCompileResult:
        async with self._open(req.file, client) as (src, lease):
            session = lease.session
            await self._compiled(session)
            base = dict(file=str(src.path), content_hash=src.hash, server=self._note(lease))
            if session.file.phase == "compiling":
                return m.RetryCompileResult(
                    **base, was_blocked=False,
                    message="The file is still compiling, so it is not known to be blocked; call "
                    "diagnostics, and retryCompile only if it says BLOCKED.",
                )
            if session.file.phase != "blocked":
                # On a file that is not blocked the server would cancel every
                # proof check and re-queue none (PROTOCOL.md §17.4): refuse.
                return m.RetryCompileResult(
                    **base, was_blocked=False,
                    message="Not blocked: nothing to retry. retryCompile only re-attempts a file whose "
                    "dependencies could not be loaded. To re-check everything, use restart.",
                )
            session.epoch += 1
            attempts = session.file.attempts
            session.file.retried(self.clock())
            await session.notify("$/hol/retryCompile", {"textDocument": {"uri": session.uri}})
            # HOL answers a retry with a new block or a compile pass (§9.4).
            await session.wait_until(lambda: session.file.attempts != attempts, self.settings.lookup_wait_s)
            if session.file.phase == "blocked":
                message = f"Still blocked: {_blocked_message(session)}"
            elif session.file.attempts == attempts:
                message = "Asked HOL to compile again; it has not said how it went yet: call diagnostics."
            else:
                message = "Unblocked: HOL is compiling the file now; call diagnostics for the verdict."
            return m.RetryCompileResult(**base, was_blocked=True, message=message)

    async def _stop_orphan(self, file: str) -> m.RestartResult:
        """Restart of a file that is gone: stop its server, if it has one, and say so."""
        path = files.resolve(file)
        old = self.pool.sessions.get(path)
        if old is None or not old.alive:
            raise FileNotFound(f"no such file: {file}, and no HOL server is running for it.")
        await self.pool.stop_session(old, "its file no longer exists")
        return m.RestartResult(
            file=str(path), old_pid=old.pid, new_pid=0, max_heap_mb=old.max_heap_mb,
            message=f"{path.name} no longer exists, so its HOL server (pid {old.pid}) was stopped "
            "and not restarted.",
        )

    async def restart(self, req: m.Restart, client: str) -> m.RestartResult:
        if req.max_heap_mb is not None and req.max_heap_mb < 0:
            raise BadRequest("max_heap_mb must be 0 (no cap) or a positive number of MB")
        try:
            src = files.read(req.file)
        except FileNotFound:
            return await self._stop_orphan(req.file)
        old_pid = await self.pool.restart(src.path, req.max_heap_mb)
        async with self._open(req.file, client, tolerate_start=True) as (_, lease):
            session = lease.session
            heap = session.max_heap_mb
            cap = f"{heap} MB" if heap else "no cap"
            starting = session.starting
            doing = "still starting (loading its heap)" if starting else "compiling the file"
            return m.RestartResult(
                file=str(src.path), old_pid=old_pid, new_pid=session.pid or 0, max_heap_mb=heap,
                message=f"Restarted the HOL server for {src.path.name} (pid {old_pid or '-'} → "
                f"{session.pid or 'pending'}; heap {cap}). It is {doing} now; call diagnostics to follow it.",
            )


def _key(session: Session, question: tuple) -> tuple:
    """What a cached answer depends on: the server, and everything it has said.

    Anything the server says later (a failure moved to its step, an extra
    pass) makes a new answer, so its count of notifications is in the key.
    """
    return (session.id, session.epoch, session.file.events, *question)


def _replace(struct, **changes):
    return msgspec.structs.replace(struct, **changes)


def _is_pending(answer) -> bool:
    return isinstance(answer, dict) and answer.get("status") == "pending" and "theorem" not in answer


def _raise_lsp(answer) -> None:
    if isinstance(answer, LspError):
        raise answer


def _starting_message(session: Session, now: float) -> str:
    return (
        f"the HOL server for {session.path.name} (pid {session.pid or '-'}) is still starting "
        f"(loading its heap; {now - session.started_at:.0f}s so far). It carries on; ask again "
        "in a few seconds."
    )


def _frontier_note(session: Session) -> str:
    """Why a lookup may have found less than there is, or "" when the file is compiled."""
    if session.file.phase == "compiling":
        return (
            "The file is still compiling: HOL answers only as far as it has compiled, so this "
            "may be incomplete or stale. Ask again once diagnostics has settled."
        )
    if session.file.phase == "blocked":
        return _blocked_message(session)
    return ""


def _blocked_message(session: Session) -> str:
    blocked = session.file.blocked or {}
    return (
        f"The file is blocked: {blocked.get('message', 'its dependencies could not be loaded')}. "
        "Build what is missing (Holmake), then call retryCompile."
    )


def _outside_message(text: str, line: int, col: int) -> str:
    message = f"Line {line}, column {col} is not inside a Proof … QED block; goal states exist only there."
    offset = sum(len(x) + 1 for x in text.split("\n")[: line - 1]) + col - 1
    blocks = script.proof_blocks(text)
    nearest = min(blocks, key=lambda b: min(abs(b.start - offset), abs(b.end - offset)), default=None)
    if nearest is not None:
        first, _ = script.line_col(text, nearest.body_start)
        last, _ = script.line_col(text, nearest.body_end)
        message += f" The nearest proof is {nearest.name}, its tactics on lines {first}-{last}."
    return message


def _flatten(symbols: list, text: Text, encoding: str, depth: int, out: list[m.Symbol]) -> None:
    for sym in symbols:
        rng = sym.get("selectionRange") or sym.get("range") or sym.get("location", {}).get("range", {})
        whole = verdict.lsp_range(text, sym.get("range") or rng, encoding)
        start = verdict.lsp_range(text, rng, encoding)
        out.append(m.Symbol(
            name=str(sym.get("name", "")), kind=_SYMBOL_KINDS.get(sym.get("kind"), "other"),
            line=start.line, col=start.col, end_line=whole.end_line,
            detail=str(sym.get("detail", "") or ""), depth=depth,
        ))
        _flatten(sym.get("children", []) or [], text, encoding, depth + 1, out)


def _workspace_item(sym: dict) -> m.WorkspaceSymbolItem:
    location = sym.get("location", {})
    start = location.get("range", {}).get("start", {})
    return m.WorkspaceSymbolItem(
        name=str(sym.get("name", "")), kind=_SYMBOL_KINDS.get(sym.get("kind"), "other"),
        theory=str(sym.get("containerName", "")), path=location.get("uri", "").removeprefix("file://"),
        line=int(start.get("line", 0)) + 1,
    )


def _eval_reports(reports: list, code: str, encoding: str) -> tuple[str, list[str]]:
    output, errors = [], []
    text = Text(code)
    for report in reports:
        kind = report.get("kind")
        if kind in ("toplevelOut", "compilerOut"):
            output.append(str(report.get("body", "")))
        elif kind == "error":
            line, col = text.from_lsp(report.get("pos", {}).get("start", {}), encoding)
            errors.append(f"{line}:{col}: {str(report.get('msg', '')).rstrip()}")
        elif kind == "interrupted":
            errors.append("interrupted")
    return "".join(output), errors


def _read_quietly(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read(files.MAX_SCRIPT_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""
