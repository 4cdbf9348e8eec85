"""What one HOL server has told us about one file: a pure state machine.

Fed the text versions we send and the notifications the server sends, with
the time passed in; no I/O, no asyncio.  The session owns one and wakes its
waiters whenever `apply` reports a change.

Phases: "compiling" from every text we send until a terminal notification
for it; "completed" after `$/compileCompleted` for the newest version;
"blocked" after `$/compileBlocked`.  The proof tally follows
docs/protocol.md#proof-states-and-the-census: a stream of transitions keyed
by name, pruned by the census.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from holsrv.lsp.proofstates import ProofStatus
from holsrv.lsp.replies import ProofState, ProofStates, proof_state
from holsrv.text import editspan, stepping, textinfo


class Phase(enum.StrEnum):
    """Where HOL's compile of the file's newest text is (docs/protocol.md#compile-lifecycle).  A
    `StrEnum`: a member is its string, so answers and status carry it unchanged."""

    COMPILING = "compiling"  # from every text we send until a terminal notification for it
    COMPLETED = "completed"  # `$/compileCompleted` for the newest version
    BLOCKED = "blocked"  # `$/compileBlocked`: an ancestor could not be loaded


SETTLED = frozenset({ProofStatus.PROVED, ProofStatus.SUSPENDED})
WRONG = frozenset({ProofStatus.FAILED, ProofStatus.DIVERGED})
OUTSTANDING = frozenset({ProofStatus.CHECKING, ProofStatus.CHEATED})
# A global name for the member compared per proof (30,000 in the largest scripts): on Python 3.11
# looking a member up on its enum class costs several times a global's (or a local's, which the
# loops over proofs elsewhere use).
_CHECKING = ProofStatus.CHECKING


class ProofEntry(msgspec.Struct, gc=False):
    """One proof as the pool last reported it.  Untracked by the cycle
    collector (strings and numbers only): a file holds thousands."""

    name: str
    status: str
    line0: int  # LSP line of the declaration (0-based)
    detail: str = ""
    # When this daemon first saw the current `checking` (monotonic seconds).
    checking_since: float | None = None
    # When the pool last gave it a status other than the one before: a
    # re-announced verdict (proofs below an edit) is not news.
    changed_at: float = 0.0


@dataclass
class FileState:
    uri: str
    version: int = 0
    text: str = ""
    phase: Phase = Phase.COMPILING
    diagnostics: list[dict] = field(default_factory=list)
    diagnostics_version: int | None = None  # the version the last publish named (None: it named none)
    blocked: dict | None = None
    proofs: dict[str, ProofEntry] = field(default_factory=dict)
    last_event: float = 0.0
    last_edit: float = 0.0
    # Longest check seen to finish in this file, and how many were seen to
    # finish, for spotting a looping proof.
    slowest_s: float = 0.0
    finished: int = 0
    events: int = 0  # notifications about this file so far
    publishes: int = 0  # of which publishDiagnostics
    # First line (0-based) whose proofs the last edit made HOL check again;
    # proofs above it, or everywhere for an edit inside one proof body, keep
    # their running checks (docs/protocol.md#what-an-edit-does-to-the-pool).
    restarts_from: float = 0
    # Compile attempts HOL has been seen to start (docs/protocol.md#compile-lifecycle): a pass
    # beginning, a block, or the batch of proofs an edit invalidated.
    attempts: int = 0
    # The version the last `$/compileCompleted` named (None: it named none),
    # whether it carried the census (`declared`), and when diagnostics were
    # last published: what `census` judges a pass over by.
    completed_version: int | None = None
    census_given: bool = False
    published_at: float = 0.0
    # Bumped by every change to what the file state says (a text sent, each
    # notification before and after it is folded in, each transition), so
    # that `census.judge`, O(proofs), runs once per change and not per look
    # (a settle loop looks at every notification): its (revision, answer).
    revision: int = 0
    judged: tuple[int, Any] | None = None
    # When a text was sent to an idle compile (its phase completed or blocked)
    # that HOL has not yet started compiling: no compile notification since
    # (None: nothing owed).  See `untaken_for` and `runaway`.
    text_owed_since: float | None = None

    def sent(self, version: int, text: str, now: float, span: tuple[int, int, int] | None = None) -> None:
        """We sent `text` as `version` (didOpen or a full didChange); `span`: the
        edit's `editspan.edit_span` from the text before, if known."""
        self.restarts_from = _restarted_from(self.text, text, span) if self.version else 0
        if self.version and self.phase in (Phase.COMPLETED, Phase.BLOCKED) and self.text_owed_since is None:
            self.text_owed_since = now  # an idle compile starts on a new text at once (bar a debounce)
        self.version, self.text = version, text
        self.phase = Phase.COMPILING
        self.last_edit = self.last_event = now
        self.revision += 1

    def apply(self, method: str, params: dict | ProofStates, now: float) -> bool:
        """Fold one server notification in; True if it concerned this file.
        `$/proofStates` params may come as a `ProofStates` struct (as the LSP
        client decodes them) or as JSON."""
        return stepping.run(self.apply_steps(method, params, now))

    def apply_steps(self, method: str, params: dict | ProofStates, now: float) -> stepping.Steps[bool]:
        """`apply` in steps: a batch of 30,000 transitions takes some 15 ms.
        Between steps the state is that of the batch's first transitions,
        as if HOL had sent it in parts."""
        if (params.uri if isinstance(params, ProofStates) else params.get("uri")) != self.uri:
            return False
        handler = _HANDLERS.get(method)
        if handler is None:
            return False
        if method in _COMPILE_NEWS:
            self.text_owed_since = None
        self.revision += 1
        steps = handler(self, params, now)
        if steps is not None:  # a handler of thousands of entries, in steps
            yield from steps
        self.last_event = now
        self.events += 1
        self.revision += 1
        return True

    # -- handlers, one per notification ---------------------------------

    def _progress(self, params: dict, now: float) -> None:
        # A block never comes with compile progress (docs/protocol.md#blocked-files): a pass is running.
        self.phase = Phase.COMPILING
        self.blocked = None

    def pass_began(self, now: float) -> None:
        """HOL announced a compile pass (`$/progress` begin, which names no file)."""
        self.text_owed_since = None
        self.attempts += 1
        self.last_event = now

    def retried(self, now: float) -> None:
        """We asked HOL to retry a blocked compile."""
        self.phase = Phase.COMPILING
        self.revision += 1
        self.last_event = now

    def _completed(self, params: dict, now: float) -> stepping.Steps[None]:
        if params.get("version", self.version) >= self.version:
            self.phase = Phase.COMPLETED
            self.blocked = None
        declared = params.get("declared")
        self.completed_version, self.census_given = params.get("version"), declared is not None
        if declared is not None:  # the census: 30,000 names for the largest scripts
            keep = set(declared)
            yield
            # Names are exactly as the pool gives them (`foo#2`, `thm[label]`).
            kept: dict[str, ProofEntry] = {}
            for some in stepping.chunks(list(self.proofs.items())):
                kept.update((name, entry) for name, entry in some if name in keep)
                yield
            self.proofs = kept

    def _interrupted(self, params: dict, now: float) -> None:
        self.phase = Phase.COMPILING  # a newer pass is already scheduled

    def _blocked(self, params: dict, now: float) -> None:
        self.attempts += 1
        self.phase = Phase.BLOCKED
        self.blocked = {"modules": list(params.get("modules", [])), "message": params.get("message", "")}

    def _diagnostics(self, params: dict, now: float) -> None:
        self.diagnostics = list(params.get("diagnostics", []))
        version = params.get("version")
        self.diagnostics_version = version if isinstance(version, int) else None
        self.publishes += 1
        self.published_at = now

    def _proof_states(self, params: dict | ProofStates, now: float) -> stepping.Steps[None]:
        raw = params.states if isinstance(params, ProofStates) else params.get("states", [])
        states: list[ProofState] = []
        for some in stepping.chunks(raw):
            states += [proof_state(state) for state in some]
            yield
        cheated = ProofStatus.CHEATED  # a local: looked up once, not per state (see `_CHECKING`)
        if any(state.status == cheated for state in states):
            self.attempts += 1  # dropped at the start of an attempt
        for these in stepping.chunks(states):
            for state in these:
                if state.name:  # unnamed proofs are not pool entries (docs/protocol.md#proof-names)
                    self._transition(state, now)
            yield

    def _transition(self, state: ProofState, now: float) -> None:
        self.revision += 1
        name, status, line0 = state.name, state.status, state.pos.line
        entry = self.proofs.get(name)
        if entry is None:
            entry = self.proofs[name] = ProofEntry(name, status, line0, changed_at=now)
        elif entry.status == _CHECKING and status != _CHECKING and entry.checking_since is not None:
            if status not in OUTSTANDING:
                self.slowest_s = max(self.slowest_s, now - entry.checking_since)
                self.finished += 1
        if status == _CHECKING:
            if entry.status != _CHECKING or entry.checking_since is None:
                entry.checking_since = now
        else:
            entry.checking_since = None
        if status != entry.status:
            entry.changed_at = now
        entry.status, entry.line0 = status, line0
        entry.detail = state.detail

    # -- handover (`holsrv.pool.handover`) --------------------------------

    def export(self) -> dict:
        """Everything this state says, as plain data a successor daemon's `adopt` reads back."""
        return msgspec.to_builtins(dataclasses.replace(self, judged=None))

    @classmethod
    def adopt(cls, data: dict) -> FileState:
        """The state a predecessor daemon `export`ed (monotonic times hold across `exec`)."""
        return msgspec.convert(data, cls)

    # -- questions ------------------------------------------------------

    def checking(self) -> list[ProofEntry]:
        return [e for e in self.proofs.values() if e.status == _CHECKING]

    def settled(self, now: float, quiet_s: float) -> bool:
        """Compile over, no proof checking, and the server quiet for `quiet_s`."""
        return (
            self.phase in (Phase.COMPLETED, Phase.BLOCKED)
            and not self.checking()
            and now - self.last_event >= quiet_s
        )

    def untaken_for(self, now: float) -> float:
        """How long a text sent to an idle compile has waited for HOL to start on it (0: none waits)."""
        return 0.0 if self.text_owed_since is None else max(0.0, now - self.text_owed_since)

    def checking_for(self, entry: ProofEntry, now: float) -> float:
        """How long `entry` has been checking, counted from the last edit that reached it."""
        since = entry.checking_since or now
        if entry.line0 >= self.restarts_from:
            since = max(since, self.last_edit)
        return max(0.0, now - since)


def _restarted_from(old: str, new: str, span: tuple[int, int, int] | None) -> float:
    """The first line whose proofs HOL re-checks after `old` becomes `new`.

    An edit confined to one proof body re-checks that proof only, and HOL
    announces it (cheated, then checking); any other edit re-checks every
    proof from the declaration it starts in.
    """
    start, old_end, _ = span or editspan.edit_span(old, new)
    if any(b.body_start <= start and old_end <= b.body_end for b in textinfo.of(old).blocks_near(start)):
        return math.inf
    return old.count("\n", 0, start)


# The notifications that say HOL is compiling a text, or has ended a pass on it
# (a proof batch does not: the pool lets go of checks with no compile, as in walk-of-a-loop).
_COMPILE_NEWS = frozenset({"$/compileProgress", "$/compileCompleted", "$/compileInterrupted", "$/compileBlocked"})

_HANDLERS: dict[str, Callable[[FileState, Any, float], stepping.Steps[None] | None]] = {
    "$/compileProgress": FileState._progress,
    "$/compileCompleted": FileState._completed,
    "$/proofStates": FileState._proof_states,
    "$/compileInterrupted": FileState._interrupted,
    "$/compileBlocked": FileState._blocked,
    "textDocument/publishDiagnostics": FileState._diagnostics,
}
