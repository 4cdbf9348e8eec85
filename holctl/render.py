"""Plain text for every reply the daemon sends, written for an agent's context window.

holctl prints it and holmcp returns it as a tool's text content, so it must
stay importable with only the standard library and msgspec.  Every answer
about a file ends with a freshness line, `(about file content 0123456789ab)`:
the start of the hash of the bytes it describes, so a reader can tell an
answer about an older text from one about the current text.
"""

from __future__ import annotations

from typing import assert_never

from holsrv.rpc.messages import (
    MAX_COMPLETIONS,
    CompletionResult,
    DefinitionResult,
    DiagnosticsResult,
    DocumentSymbolResult,
    ErrorReply,
    EvalResult,
    Freshness,
    Goal,
    GoalDiffResult,
    GoalsDiff,
    GoalStateResult,
    HolmakeResult,
    HoverResult,
    Location,
    LogsResult,
    Progress,
    Proof,
    Range,
    ReferencesResult,
    Reply,
    RestartResult,
    Result,
    RetryCompileResult,
    SearchResult,
    ServerNote,
    SessionStatus,
    SettingSource,
    ShutdownResult,
    StatusResult,
    StopResult,
    Tally,
    TryCandidate,
    TryResult,
    Welcome,
    WorkspaceSymbolResult,
)
from holsrv.rpc.words import duration

SEPARATOR = "-" * 36
_TALLY_BUCKETS = ("proved", "failed", "cheated", "parse_error", "checking", "suspended", "diverged", "unchecked")
_BUCKET_WORDS = {"parse_error": "with a parse error"}


def render(reply: Reply) -> str:
    """The text a user or a model reads for `reply`."""
    match reply:
        case Welcome():
            lines = [f"holsrv {reply.daemon_version} (protocol {reply.protocol}, pid {reply.pid})"]
        case ErrorReply():
            lines = [f"{reply.code}: {reply.message}", *_indented(reply.detail)]
        case Progress():
            lines = [_progress(reply)]
        case _:
            lines = _result_lines(reply)
    return "\n".join(lines)


def _result_lines(reply: Result) -> list[str]:
    """Every answer to a request; exhaustive over `Result`, so a new one nobody renders is a type error."""
    match reply:
        case DiagnosticsResult():
            lines = _diagnostics(reply)
        case GoalStateResult():
            lines = _goal_state(reply)
        case HoverResult():
            status = [f"proof status: {reply.proof_status}"] if reply.proof_status else []
            lines = [reply.text or "nothing to show here", *status, *_noted(reply.note),
                     *_footer(reply.content_hash, reply.server)]
        case DefinitionResult():
            found = [_location(t) for t in reply.targets] or ["no definition found"]
            lines = [*found, *_noted(reply.note), *_footer(reply.content_hash, reply.server)]
        case ReferencesResult():
            lines = [*_references(reply), *_footer(reply.content_hash, reply.server)]
        case CompletionResult():
            lines = [*_completion(reply), *_noted(reply.note), *_footer(reply.content_hash, reply.server)]
        case DocumentSymbolResult():
            omitted = [f"… and {reply.omitted} more symbols, not listed"] if reply.omitted else []
            lines = [*_document_symbols(reply), *omitted, *_footer(reply.content_hash, reply.server)]
        case WorkspaceSymbolResult():
            lines = [*_workspace_symbols(reply), *_noted(reply.note), *_server_lines(reply.server)]
        case EvalResult():
            lines = _eval(reply)
        case RetryCompileResult():
            lines = [reply.message, *_footer(reply.content_hash, reply.server)]
        case RestartResult() | ShutdownResult() | StopResult():
            lines = [reply.message]
        case StatusResult():
            lines = _status(reply)
        case SearchResult():
            lines = [*_search(reply), *_noted(reply.note), *_server_lines(reply.server)]
        case HolmakeResult():
            lines = _holmake(reply)
        case TryResult():
            lines = _try(reply)
        case GoalDiffResult():
            lines = [f"theorem {reply.theorem}", *_diff(reply.diff), *_noted(reply.message)]
            lines += ["before:", *_goals(reply.before, "  "), "after:", *_goals(reply.after, "  ")]
            lines += _footer(reply.content_hash, reply.server) if reply.server else []
        case LogsResult():
            lines = [*reply.lines, f"({reply.message})"]
        case _:
            assert_never(reply)
    return lines + _freshness(reply)


def _progress(reply: Progress) -> str:
    """One live line: what the daemon is waiting for, and how far it got when it counts."""
    counted = f" ({reply.done}/{reply.total})" if reply.total else ""
    return f"… {reply.message}{counted}"


# -- diagnostics ------------------------------------------------------------


def _diagnostics(reply: DiagnosticsResult) -> list[str]:
    lines = [reply.headline, tally_line(reply.tally)]
    if reply.blocked is not None:
        lines.append(f"blocked: {reply.blocked.message}")
    lines += [f"warning: {w}" for w in reply.warnings]
    if reply.note:
        lines.append(f"note: {reply.note}")
    lines += [f"outstanding: {o}" for o in reply.outstanding]
    lines += [f"cheat at line {c.line}" + (f", in theorem {c.theorem}" if c.theorem else "") for c in reply.cheats]
    lines += [_proof(p) for p in reply.proofs if p.status != "proved"]
    for d in reply.diagnostics:
        first, *rest = d.message.splitlines() or [""]
        lines.append(f"{d.range.line}:{d.range.col} {d.severity}: {first}")
        lines += ["    " + line for line in rest]
        if d.note:
            lines.append(f"    ({d.note})")
    if reply.diagnostics_omitted:
        lines.append(f"… and {reply.diagnostics_omitted} more diagnostics (fix the first ones, then ask again)")
    return lines + _footer(reply.content_hash, reply.server, reply.cached, reply.complete)


def tally_line(tally: Tally) -> str:
    """`proofs: 3 proved, 1 failed (4 total)`; buckets that are zero are left out."""
    if tally.total == 0:
        return "proofs: none found"
    counts = [f"{getattr(tally, b)} {_BUCKET_WORDS.get(b, b)}" for b in _TALLY_BUCKETS if getattr(tally, b)]
    return f"proofs: {', '.join(counts)} ({tally.total} total)"


def _proof(proof: Proof) -> str:
    status = proof.status  # how long a proof has been checking is in `outstanding`
    detail = proof.detail.splitlines()[0] if proof.detail else ""
    return "  ".join(filter(None, [f"  line {proof.line}", proof.name, status, detail]))


# -- goal state -------------------------------------------------------------


# "ok" is what a daemon of protocol 1 said for "goals" and "proved_here".
_GOAL_STATES = ("goals", "proved_here", "failed", "ok")


def _goal_state(reply: GoalStateResult) -> list[str]:
    footer = _footer(reply.content_hash, reply.server, reply.cached)
    if reply.state not in _GOAL_STATES:
        return [reply.message, *footer]
    lines = [f"theorem {reply.theorem}, step {reply.step}"]
    if reply.column is None and reply.line_text:
        lines.append(f"line {reply.line}: {reply.line_text.strip()}")
    if reply.provisional:
        lines.append("provisional: the file is still compiling, so this answer may change; ask again")
    if reply.message:
        lines.append(reply.message)
    lines += reply.context
    if reply.note:
        lines.append(f"note: {reply.note}")
    if reply.error:
        where = f" at {_range(reply.failed_range)}" if reply.failed_range else ""
        first, *rest = reply.error.splitlines() or [""]
        lines += [f"error{where}: {first}", *("    " + line for line in rest)]
    if reply.before is not None:
        lines += ["before the line:", *_goals(reply.before, "  "), "after the line:"]
    lines += _goals(reply.goals, "  " if reply.before is not None else "", proved=not reply.error)
    return lines + footer


def _goals(goals: list[Goal], indent: str = "", proved: bool = True) -> list[str]:
    """Numbered goals in HOL's layout; none at all reads as proved (unless a tactic failed)."""
    if not goals:
        return [indent + "no goals: proved at this point"] if proved else []
    lines = []
    for n, goal in enumerate(goals, 1):
        lines += [f"{indent}goal {n} of {len(goals)}:", *(indent + line for line in _goal(goal))]
    return lines


def _goal(goal: Goal) -> list[str]:
    """HOL's own layout: numbered assumptions, a rule, then the goal."""
    lines = []
    for n, asm in enumerate(goal.asms):
        first, *rest = asm.splitlines() or [""]
        lines += [f"  {n}.  {first}", *("      " + line for line in rest)]
    if goal.asms:
        lines.append("  " + SEPARATOR)
    return lines + _indented(goal.goal, "  ")


# -- navigation -------------------------------------------------------------


def _references(reply: ReferencesResult) -> list[str]:
    found = [_location(loc) for loc in reply.locations]
    if not found:
        return [reply.message or "no references found"]
    return found + ([reply.message] if reply.message else [])


def _completion(reply: CompletionResult) -> list[str]:
    shown = reply.items[:MAX_COMPLETIONS]
    if not shown:
        return ["no completions here"]
    lines = ["  ".join(filter(None, [i.label, f"({i.kind})", i.detail])) for i in shown]
    more = max(reply.total, len(reply.items)) - len(shown)
    if more > 0 or reply.incomplete:
        lines.append(f"{more} more; type more of the name to narrow the list" if more > 0
                     else "the list is incomplete; type more of the name to narrow it")
    return lines


def _document_symbols(reply: DocumentSymbolResult) -> list[str]:
    if not reply.symbols:
        return ["no symbols in this file"]
    return [
        "  " * s.depth + "  ".join(filter(None, [str(s.line), s.kind, s.name, s.detail]))
        for s in reply.symbols
    ]


def _workspace_symbols(reply: WorkspaceSymbolResult) -> list[str]:
    if not reply.symbols:
        return [f"no symbols match {reply.query!r}" + (f" on page {reply.page}" if reply.page > 1 else "")]
    lines = []
    for s in reply.symbols:
        where = f"{s.path}:{s.line}" if s.path and s.line else s.path
        place = ", ".join(filter(None, [s.kind, s.theory, where]))
        statement = " ".join(s.statement.split())
        lines.append(f"{s.name}: {statement}  ({place})" if statement else f"{s.name}  ({place})")
    if reply.more:
        lines.append(
            f"page {reply.page}: {len(reply.symbols)} of {reply.total} matches; {reply.more} more on "
            f"page {reply.page + 1} and after; a longer query narrows the list"
        )
    if reply.capped:
        lines.append("HOL stops at a fixed number of matches, so there may be more than these: narrow the query")
    return lines


# -- eval -------------------------------------------------------------------


def _eval(reply: EvalResult) -> list[str]:
    lines = reply.output.rstrip("\n").splitlines()
    for err in reply.errors:
        first, *rest = err.splitlines() or [""]
        lines += [f"error: {first}", *("    " + line for line in rest)]
    for warning in reply.warnings:
        first, *rest = warning.splitlines() or [""]
        lines += [f"warning: {first}", *("    " + line for line in rest)]
    if reply.stderr.strip():
        lines += ["stderr:", *_indented(reply.stderr.rstrip("\n"))]
    if reply.timed_out:
        lines.append(
            "TIMED OUT: the code did not finish in time and was cancelled "
            "(restart the file's server if it stays busy)"
        )
    if not lines:
        lines = ["(no output)"]
    return lines + _server_lines(reply.server)


# -- status -----------------------------------------------------------------

_STATUS_COLUMNS = ("FILE", "PID", "STATE", "UP", "IDLE", "MB", "CAP", "PROOFS", "LAST VERDICT", "WAITING", "CLIENTS")


_GONE = ("stopping", "stopped", "dead")


def _status(reply: StatusResult) -> list[str]:
    lines = [
        f"holsrv {reply.daemon_version}  pid {reply.pid}  up {duration(reply.uptime_s)}  "
        f"protocol {reply.protocol}",
        f"socket: {reply.socket}",
        f"servers: {sum(s.state not in _GONE for s in reply.sessions)} running of {reply.max_servers}  "
        f"cache: {reply.cache_hits} hits, {reply.cache_misses} misses",
    ]
    if reply.memory_budget_mb:
        lines.append(f"memory: {reply.memory_used_mb:.0f} of {reply.memory_budget_mb} MB budget held")
    versions = sorted({s.hol_version for s in reply.sessions if s.hol_version})
    if versions:
        lines.append(f"HOL: {', '.join(versions)}")
    lines += _settings(reply.settings)
    if not reply.sessions:
        return lines + ["no HOL servers running"]
    lines += _table([_STATUS_COLUMNS, *(_session_row(s) for s in reply.sessions)])
    return lines + [
        f"replacing {s.file} (pid {s.pid} → {s.replacement_pid or 'starting'}, for "
        f"{duration(s.replacing_since_s or 0)}): {s.replacing}"
        for s in reply.sessions if s.replacing
    ]


def _settings(settings: list[SettingSource]) -> list[str]:
    """The daemon's settings: one line each for those set somewhere, one line for the defaults."""
    chosen = [f"  {s.name}={s.value}  ({s.source})" for s in settings if s.source != "default"]
    defaults = [f"{s.name}={s.value}" for s in settings if s.source == "default"]
    lines = ["settings:", *chosen] if settings else []
    if defaults:
        lines.append("  defaults: " + ", ".join(defaults))
    return lines


def _session_row(s: SessionStatus) -> tuple[str, ...]:
    state = s.state + (f" ({s.restarts} restarts)" if s.restarts else "") + (" large" if s.large else "")
    return (
        s.file,
        str(s.pid) if s.pid is not None else "-",
        state,
        duration(s.uptime_s),
        duration(s.idle_s),
        f"{s.footprint_mb:.0f}" if s.footprint_mb is not None else "-",
        str(s.max_heap_mb) if s.max_heap_mb else "none",
        _short_tally(s.tally) if s.state not in _GONE else "-",
        s.last_verdict or "-",
        str(s.waiting_calls),
        ",".join(s.clients) or "-",
    )


def _short_tally(tally: Tally) -> str:
    if tally.total == 0:
        return "-"
    rest = [f"{getattr(tally, b)} {_BUCKET_WORDS.get(b, b)}" for b in _TALLY_BUCKETS[1:] if getattr(tally, b)]
    return ", ".join([f"{tally.proved}/{tally.total} proved", *rest])


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


# -- shared pieces ----------------------------------------------------------


def _footer(content_hash: str, server: ServerNote, cached: bool = False, complete: bool = True) -> list[str]:
    """Which text of the file the answer is about, and whether this call had to start a server."""
    marks = [f"about file content {content_hash[:12]}"]
    if cached:
        marks.append("cached")
    if not complete:
        marks.append("not settled yet")
    return [f"({'; '.join(marks)})", *_server_lines(server)]


def _server_lines(server: ServerNote) -> list[str]:
    lines = []
    if server.note:  # says why this call had to start one, and names it
        lines.append(f"{server.note} (pid {server.pid})")
    elif server.start == "started":
        lines.append(f"started a new HOL server (pid {server.pid})")
    elif server.start == "restarted":
        lines.append(f"restarted the HOL server (now pid {server.pid})")
    if server.stderr_tail:
        lines.append("its last words on stderr:")
        lines.extend(_indented(server.stderr_tail))
    return lines


def _noted(note: str) -> list[str]:
    return [f"note: {note}"] if note else []


def _location(loc: Location) -> str:
    return f"{loc.path}:{loc.range.line}:{loc.range.col}"


def _range(r: Range) -> str:
    return f"{r.line}:{r.col}-{r.end_line}:{r.end_col}"


def _indented(text: str, prefix: str = "    ") -> list[str]:
    return [prefix + line for line in text.splitlines()]


# -- search, holmake, freshness ---------------------------------


def _search(reply: SearchResult) -> list[str]:
    if not reply.hits:
        return [reply.message or f"nothing matches {reply.query!r}"]
    lines = []
    for h in reply.hits:
        where = f"{h.path}:{h.line}" if h.path and h.line else h.path
        place = ", ".join(filter(None, [h.kind, h.theory, where]))
        also = f"; also in {', '.join(h.also_in)}, the same statement" if h.also_in else ""
        lines.append(f"{h.name}: {h.statement}  ({place}{also})")
    if reply.more or reply.page > 1:
        lines.append(f"page {reply.page}: {len(reply.hits)} of {reply.total} matches"
                     + (f"; {reply.more} more: ask for page {reply.page + 1}" if reply.more else "; the last page"))
    if reply.capped:
        lines.append("HOL stopped at the daemon's cap, so there may be more: narrow the query")
    return lines


def _holmake(reply: HolmakeResult) -> list[str]:
    lines = [("OK: " if reply.ok else "FAILED: ") + reply.message]
    if reply.failed:
        lines.append(f"failed: {reply.failed}")
    if reply.cheated:
        lines.append(f"cheated: {', '.join(reply.cheated)} (built, but a proof in each is a cheat)")
    lines += [f"unblocked: {file}" for file in reply.unblocked]
    if reply.log_tail:
        lines += ["log tail:", *_indented(reply.log_tail)]
    return lines


# Answers whose own text does not already say that they may still change.
_SILENT_WHEN_UNSETTLED = (ReferencesResult, DocumentSymbolResult, EvalResult, RetryCompileResult)


def _freshness(reply: Result) -> list[str]:
    """A line only when the answer may be stale or is not settled: most answers need none."""
    fresh: Freshness | None = getattr(reply, "freshness", None)
    if fresh is None:
        return []
    said = set(getattr(reply, "warnings", ()))  # diagnostics lists a rebuilt ancestor among its warnings
    lines = [f"MAY BE STALE: {reason}" for reason in fresh.reasons if reason not in said]
    if not fresh.settled and isinstance(reply, _SILENT_WHEN_UNSETTLED):
        lines.append("not settled: the file is still compiling, so this may change; ask again")
    if fresh.age_s >= 60 and lines:
        lines.append(f"(answer computed {duration(fresh.age_s)} ago)")
    return lines


# -- trials -------------------------------------------------------------------


def _try(reply: TryResult) -> list[str]:
    lines = [f"theorem {reply.theorem}, line {reply.line}: tried in place of {reply.replaced!r}", reply.message,
             "goals before:", *_goals(reply.before, "  ")]
    for n, candidate in enumerate(reply.candidates, 1):
        lines += _candidate(n, candidate)
    footer = _footer(reply.content_hash, reply.server) if reply.server else []
    return lines + [f"({duration(reply.time_s)} in all)", *footer]


def _candidate(n: int, c: TryCandidate) -> list[str]:
    proof = f"; proof {c.proof.status}" if c.proof else ""
    taken = f", after HOL took {duration(c.taken_s)} to take it" if c.taken_s is not None and c.taken_s >= 1.0 else ""
    lines = [f"[{n}] {c.tactic}: {c.state.upper()} in {duration(c.time_s)}{taken}{proof}"]
    if c.message:
        lines.append("    " + c.message)
    if c.error:
        where = f" at {_range(c.failed_range)}" if c.failed_range else ""
        if c.candidate_range is not None:
            where += f" ({_range(c.candidate_range)} of the candidate)"
        first, *rest = c.error.splitlines() or [""]
        lines += [f"    error{where}: {first}", *("      " + line for line in rest)]
    if c.proof and c.proof.detail and c.state != "proved":
        lines.append(f"    proof: {c.proof.detail}")
    if c.state == "goals":
        lines += _goals(c.goals, "    ")
    elif c.state == "proved" and c.goals:
        lines += ["    after it (closed by the tactics that follow):", *_goals(c.goals, "      ")]
    if c.diff is not None and c.state == "goals":
        lines += ["    " + line for line in _diff(c.diff)[1:]]
    return lines


def _diff(d: GoalsDiff) -> list[str]:
    """The summary, then each changed goal's hypotheses and conclusion."""
    lines = [f"diff: {d.summary}"]
    for c in d.changed:
        lines += [f"  goal {c.before_index} → {c.after_index}:"]
        lines += [f"    + {h}" for h in c.hyps_added] + [f"    - {h}" for h in c.hyps_removed]
        if c.rewritten:
            lines += [f"    was: {c.goal_before}", f"    now: {c.goal_after}"]
    return lines
