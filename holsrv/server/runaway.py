"""Runaways: a HOL server that will not let go of the work it was given, and the proofs known to loop.

On a HOL whose goal-state walker has no time limit, a walk of a tactic that
loops never ends and holds the whole server: the next compile never starts,
no request is answered, and memory grows past the heap cap (transcript
walk-of-a-loop; HOL's proof pool itself lets go of a looping *check* within
about 2 s of an edit).  So the daemon:

- asks no walk where it has reason to think a tactic loops (`walk_refusal`):
  a proof that looped before, as its text still is, or one still checking
  far longer than the rest;
- judges every server every tick (`judge`), as a safety net: a reply owed
  past its due time (a walk not answered within `letgo_s`, any other request
  not let go of `letgo_s` after it was cancelled: `lsp.client.Owed`), a text
  sent to an idle compile that HOL did not start compiling within
  `letgo_s`, or a footprint past the hard limit make the server a runaway,
  which the pool replaces at once with a fresh server on the current text
  (`Pool.recover`).

A text sent while a pass still runs is not judged: HOL's compile thread
defers interrupts, so a long declaration can keep a new text waiting for
as long as it takes, and that is not a runaway.

What looped is remembered per file (`Loops`), by the proof's name and its
tactic text: the next answers name it, and it is not walked again until
its text changes.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from holsrv.config.settings import Settings
from holsrv.lsp.client import LspClient, Owed
from holsrv.lsp.proofstates import ProofStatus
from holsrv.rpc.words import duration
from holsrv.text import textinfo
from holsrv.text.scanner import ProofBlock
from holsrv.verdict import looping
from holsrv.verdict.filestate import FileState


class Session(Protocol):
    """What judging a server reads of its session (`holsrv.server.session.Session`)."""

    @property
    def alive(self) -> bool: ...
    @property
    def starting(self) -> bool: ...
    @property
    def lsp(self) -> LspClient | None: ...
    @property
    def pid(self) -> int | None: ...

    file: FileState
    footprint: float | None
    max_heap_mb: int
    settings: Settings

# The requests due `letgo_s` after they are sent, not after they are
# cancelled: a goal-state walk runs tactics, and on some HOL builds nothing
# else ever stops it.
LEASHED = frozenset({"$/hol/goalState"})
# At most this many proofs of one file are remembered as looping, in at most this many files.
MAX_LOOPS_PER_FILE = 32
MAX_FILES = 256


@dataclass(frozen=True)
class Loop:
    """A proof known to loop, as its text was then: `body` is its tactic text."""

    name: str
    line: int  # its declaration's line, 1-based
    body: str
    why: str  # one sentence: what happened
    pid: int | None = None  # the server it ran away on


@dataclass(frozen=True)
class Runaway:
    """Why a server counts as a runaway: what HOL did not let go of, in one sentence."""

    kind: str  # "walk", "request", "text" or "footprint"
    reason: str
    pid: int | None
    loop: Loop | None = None  # the proof that looped, when known

    def story(self, new_pid: int | None = None) -> str:
        """What an answer that waited on the runaway, or comes from its successor, is told."""
        replaced = f"pid {self.pid} → {new_pid}" if new_pid else f"pid {self.pid}"
        return f"{self.reason}: its server was replaced by a fresh one ({replaced})."


@dataclass
class Loops:
    """The proofs known to loop, per file, across its servers."""

    _files: dict[Path, dict[str, Loop]] = field(default_factory=dict)

    def mark(self, path: Path, loop: Loop) -> None:
        marks = self._files.pop(path, {})
        self._files[path] = marks  # the most recent file last: the oldest goes first past MAX_FILES
        while len(self._files) > MAX_FILES:
            del self._files[next(iter(self._files))]
        marks.pop(loop.name, None)
        marks[loop.name] = loop
        while len(marks) > MAX_LOOPS_PER_FILE:
            del marks[next(iter(marks))]

    def known(self, path: Path, text: str) -> dict[str, Loop]:
        """The marks that still hold for `text`: each proof's tactic text unchanged."""
        marks = self._files.get(path)
        if not marks:
            return {}
        return {name: loop for name, loop in marks.items() if body_of(text, name) == loop.body}


def block_of(text: str, name: str) -> ProofBlock | None:
    """The proof block whose pool name is `name` in `text`, found by bisection."""
    info = textinfo.of(text)
    lines = info.block_lines.get(name)
    if lines is None:
        return None
    offset = info.index.offset(lines[0], 1)
    return next((b for b in info.blocks_near(offset) if info.index.line(b.start) == lines[0]), None)


def body_of(text: str, name: str) -> str | None:
    """The tactic text of proof `name` in `text` (None: no such proof)."""
    block = block_of(text, name)
    return None if block is None else text[block.body_start:block.body_end]


# -- judging a server ------------------------------------------------------------


def judge(session: Session, now: float, settings: Settings) -> Runaway | None:
    """Whether `session` is a runaway now (monotonic `now`), and why; None if not."""
    if not session.alive or session.starting or session.lsp is None:
        return None
    owed = session.lsp.overdue(time.monotonic())
    if owed is not None:
        return _owed(session, owed, settings)
    untaken = session.file.untaken_for(now)
    if untaken >= settings.letgo_s:
        reason = (f"HOL did not start compiling the text it was sent {duration(untaken)} ago "
                  f"(version {session.file.version}){_during(session.file, now)}")
        what = f"HOL did not take a new text within {duration(settings.letgo_s)}"
        return Runaway("text", reason, session.pid, _culprit(session, now, what))
    limit = hard_footprint_mb(session.max_heap_mb, settings)
    if limit and session.footprint is not None and session.footprint > limit:
        reason = (f"the HOL server grew to {session.footprint:.0f} MB, past the hard limit of {limit:.0f} MB "
                  f"({settings.hard_footprint_pct}% of its heap cap of {session.max_heap_mb} MB, "
                  f"HOLSRV_HARD_FOOTPRINT_PCT){_during(session.file, now)}")
        what = f"its server grew past the hard limit of {limit:.0f} MB"
        return Runaway("footprint", reason, session.pid, _culprit(session, now, what))
    return None


def watch_period(settings: Settings) -> float:
    """How often every server is judged: a few times per `letgo_s`."""
    return max(0.05, min(1.0, settings.letgo_s / 5))


def noticed_within(settings: Settings) -> float:
    """By when a runaway has surely been judged one and its replacement begun: a wait on a
    server bounded by this ends with the server answering, or replaced (`errors.RanAway`)."""
    return settings.letgo_s + 2 * watch_period(settings)


def hard_footprint_mb(max_heap_mb: int, settings: Settings) -> float:
    """The footprint past which a server with heap cap `max_heap_mb` is a runaway (0: no limit)."""
    if max_heap_mb <= 0 or settings.hard_footprint_pct <= 0:
        return 0.0
    return max_heap_mb * settings.hard_footprint_pct / 100


def _owed(session: Session, owed: Owed, settings: Settings) -> Runaway:
    waited = duration(time.monotonic() - owed.sent)
    if owed.method in LEASHED:
        loop = _walked(session, owed)
        at = f" of proof {loop.name} (line {loop.line})" if loop is not None else ""
        reason = (f"HOL's goal-state walk{at} did not end within {duration(settings.letgo_s)} "
                  f"(a tactic that loops: this HOL's walker has no time limit)")
        why = f"a goal-state walk of it did not end within {duration(settings.letgo_s)} (asked {waited} ago)"
        return Runaway("walk", reason, session.pid, loop and Loop(loop.name, loop.line, loop.body, why, session.pid))
    return Runaway("request", (
        f"HOL did not let go of {owed.method}, asked {waited} ago, within {duration(settings.letgo_s)} "
        "of being told to stop"
    ), session.pid)


def _walked(session: Session, owed: Owed) -> Loop | None:
    """The proof a walk was about, in the text the server had (a trial's too)."""
    text = session.file.text
    info = textinfo.of(text)
    name = info.owner(owed.line0 + 1) if owed.line0 is not None else None
    body = body_of(text, name) if name is not None else None
    if name is None or body is None:
        return None
    return Loop(name, info.block_lines[name][0], body, "")


def _culprit(session: Session, now: float, what: str) -> Loop | None:
    """What most likely loops: the proof of a walk still owed, else the proof checking the
    longest, far longer than the rest; `what` the server did (or did not do) meanwhile."""
    walks = [o for o in session.lsp.owed.values() if o.method in LEASHED] if session.lsp else []
    walked = _walked(session, min(walks, key=lambda o: o.sent)) if walks else None
    if walked is not None:
        return Loop(walked.name, walked.line, walked.body, f"a goal-state walk of it was running when {what}",
                    session.pid)
    file = session.file
    suspects = [e for e in file.checking() if looping.suspicious(file, e, now, session.settings)]
    if not suspects:
        return None
    entry = max(suspects, key=lambda e: file.checking_for(e, now))
    body = body_of(file.text, entry.name)
    if body is None:
        return None
    return Loop(entry.name, entry.line0 + 1, body, f"it had been checking for "
                f"{duration(file.checking_for(entry, now))} when {what}", session.pid)


def _during(file: FileState, now: float) -> str:
    checking = sorted(file.checking(), key=lambda e: -file.checking_for(e, now))[:3]
    if not checking:
        return ""
    named = ", ".join(f"{e.name} (line {e.line0 + 1}, {duration(file.checking_for(e, now))})" for e in checking)
    return f" while checking {named}"


# -- walks the daemon does not ask -------------------------------------------------


def walk_refusal(
    file: FileState, text: str, line: int, loops: Mapping[str, Loop], now: float, settings: Settings
) -> str:
    """Why the daemon asks HOL no goal state at `line` (1-based) of `text`, or "" if it may.

    A walk runs the proof's tactics up to the position, and on some HOL
    builds a walk of a looping tactic never ends: so no walk in a proof that
    looped before (as its text still is) or that is still checking far
    longer than the rest of its file.
    """
    info = textinfo.of(text)
    name = info.owner(line)
    if name is None:
        return ""
    first = info.block_lines[name][0]
    loop = loops.get(name)
    if loop is not None:
        return (
            f"Proof {name} (line {first}) loops as it is: {loop.why}. The daemon asks HOL no goal state in "
            "it until its tactics change, since a walk of a looping tactic can hold HOL for good. Edit the "
            "proof, or compare candidates with try, which bounds each one's time."
        )
    entry = file.proofs.get(name)
    if (entry is not None and entry.status == ProofStatus.CHECKING and file.text == text
            and looping.suspicious(file, entry, now, settings)):
        return (
            f"Proof {name} (line {first}) has been checking for {duration(file.checking_for(entry, now))}, "
            "far longer than the rest, so it may loop: the daemon asks HOL no goal state in it, since a walk "
            "of a looping tactic can hold HOL for good. Wait for its verdict (diagnostics), or edit the "
            "proof, or compare candidates with try."
        )
    return ""
