"""The text of the daemon's status: itself, its settings, a table of its HOL servers."""

from __future__ import annotations

import os
import time

from holctl.render.common import _BUCKET_WORDS, _TALLY_BUCKETS
from holsrv.rpc.messages import JobRow, SessionStatus, SettingSource, StatusResult, Tally
from holsrv.rpc.words import duration

_STATUS_COLUMNS = ("FILE", "PID", "STATE", "UP", "IDLE", "MB", "PEAK", "CAP", "PROOFS", "LAST VERDICT", "WAITING",
                   "CLIENTS")


_GONE = ("stopping", "stopped", "dead")


def _status(reply: StatusResult) -> list[str]:
    lines = [
        f"holsrv {reply.daemon_version}  pid {reply.pid}  up {duration(reply.uptime_s)}  "
        f"protocol {reply.protocol}",
        f"socket: {reply.socket}",
        f"servers: {sum(s.state not in _GONE for s in reply.sessions)} running of {reply.max_servers}  "
        f"cache: {reply.cache_hits} hits, {reply.cache_misses} misses",
        f"prefetch: {reply.prefetch_asked} goal-state walks asked ahead, {reply.prefetch_hits} hits",
    ]
    if reply.restarts:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(reply.restarted_at))
        fresh = f", {reply.not_adopted} started fresh" if reply.not_adopted else ""
        lines.append(f"restarted in place: {reply.restarts} time(s), last at {when} in {reply.restart_s:.2f}s, "
                     f"adopting {reply.adopted} HOL server(s){fresh}")
    if reply.failed_restarts:
        lines.append(f"restarts that failed: {reply.failed_restarts}; the last: {reply.restart_failed}")
    if reply.runaways:
        lines.append(f"runaways: {reply.runaways} server(s) replaced that would not let go of their work; "
                     f"the last: {reply.last_runaway}")
    if reply.memory_budget_mb:
        lines.append(f"memory: {reply.memory_used_mb:.0f} of {reply.memory_budget_mb} MB budget used"
                     + (f" (budget: {reply.memory_budget_source})" if reply.memory_budget_source else ""))
        loading = [s for s in reply.sessions if s.counted_mb is not None and s.state not in _GONE]
        if loading:
            lines.append("  still loading, so counted as a new server would be until measured after its first "
                         "compile: " + ", ".join(f"{os.path.basename(s.file)} ({s.counted_mb:.0f} MB)"
                                                 for s in loading))
    if reply.usual_footprint_mb:
        cap = f"{reply.max_heap_mb} MB" if reply.max_heap_mb else "none"
        lines.append(f"capacity: {reply.servers_fit} more of {reply.usual_footprint_mb:.0f} MB fit; "
                     f"heap cap {cap} per server")
    if reply.facilities:
        lines.append("platform: " + "; ".join(f"{concern}: {used}" for concern, used in reply.facilities.items()))
    versions = sorted({_hol(s) for s in reply.sessions if s.hol_version or s.hol_build})
    if versions:
        lines.append(f"HOL: {', '.join(versions)}")
    lines += _settings(reply.settings)
    lines += [
        f"editor {e.name} (holctl lsp): " + (", ".join(
            p + (" (unsaved)" if p in e.unsaved else "") for p in e.documents) or "no files open")
        + (f"; {e.dropped} notifications dropped, it read too slowly" if e.dropped else "")
        for e in reply.editors
    ]
    if not reply.sessions:
        return lines + ["no HOL servers running", *_jobs(reply.jobs)]
    lines += _table([_STATUS_COLUMNS, *(_session_row(s) for s in reply.sessions)])
    lines += [
        f"{s.file}'s server (pid {s.pid}) runs {s.hol}" + (f" (HOL tree {s.holdir})" if s.holdir else "")
        + (f" with the settings of project file {s.project}" if s.project else "")
        for s in reply.sessions if s.project or len({r.hol for r in reply.sessions}) > 1
    ]
    lines += [
        f"eval ran {s.evals} time{'s' if s.evals != 1 else ''} in {s.file}'s server (pid {s.pid}), last "
        f"{duration(s.last_eval_s or 0)} ago: what it changed in HOL's state is shared by every call on that file"
        for s in reply.sessions if s.evals
    ]
    lines += [
        f"{s.file}: proofs resting on cheated ancestor theorems (Holmake would mark it CHEATED): "
        + "; ".join(s.inherited_cheats)
        for s in reply.sessions if s.inherited_cheats
    ]
    lines += [
        f"{s.file}'s server (pid {s.pid}): " + ", ".join(f"{name} {state}" for name, state in s.services.items())
        + ("; what it lacks is answered through eval or said in the answer"
           if "lacking" in s.services.values() else "")
        for s in reply.sessions if s.services
    ]
    return lines + [
        f"replacing {s.file} (pid {s.pid} → {s.replacement_pid or 'starting'}, for "
        f"{duration(s.replacing_since_s or 0)}): {s.replacing}"
        for s in reply.sessions if s.replacing
    ] + _jobs(reply.jobs)


def _hol(s: SessionStatus) -> str:
    """HOL's own name for its build, and what names it when that says nothing."""
    version = s.hol_version or "no version given"
    return f"{version} ({s.hol_build})" if s.hol_build else version


def _jobs(jobs: list[JobRow]) -> list[str]:
    """The jobs table (calls that outran their defer_after), or nothing when there are none."""
    if not jobs:
        return []
    rows = [(j.id, j.op, j.state, duration(j.age_s), j.file) for j in jobs]
    return [f"jobs: {len(jobs)}", *_table([("JOB", "OP", "STATE", "AGE", "FILE"), *rows])]


# The sources of a value nobody chose: a setting's default, a constant's
# (holsrv.config.settings.FIXED).
_UNCHOSEN = ("default", "fixed")


def _settings(settings: list[SettingSource]) -> list[str]:
    """The daemon's settings that differ from their defaults, one line each with
    where its value came from; `holctl config` lists every one."""
    chosen = [f"  {s.name}={s.value}  ({s.source})" for s in settings if s.source not in _UNCHOSEN]
    if not chosen:
        return ["settings: all at their defaults (`holctl config` lists them)"] if settings else []
    return ["settings not at their default (`holctl config` lists every one):", *chosen]


def _session_row(s: SessionStatus) -> tuple[str, ...]:
    state = s.state + (f" ({s.restarts} restarts)" if s.restarts else "") + (" large" if s.large else "")
    return (
        s.file,
        str(s.pid) if s.pid is not None else "-",
        state,
        duration(s.uptime_s),
        duration(s.idle_s),
        f"{s.footprint_mb:.0f}" if s.footprint_mb is not None else "-",
        f"{s.peak_mb:.0f}" if s.peak_mb is not None else "-",
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
