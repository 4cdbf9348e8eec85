"""The proof tally as answers state it: which proofs count, and under which status.

HOL's pool speaks of proved, checking, failed, suspended, diverged and
cheated (dropped unchecked, docs/protocol.md#proof-statuses).  Answers call the last one
"unchecked", keep "cheated" for proofs that use cheat, and add
"parse_error" and "unreported" (`verdict` decides those from the text).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from holsrv.lsp import quirks
from holsrv.lsp.proofstates import ProofStatus
from holsrv.rpc import messages as m
from holsrv.text import stepping, textinfo
from holsrv.text.textinfo import Blocks
from holsrv.verdict import diagnosticlist
from holsrv.verdict.filestate import FileState, ProofEntry

# Global names of members compared per proof (see `filestate._CHECKING`).
_CHEATED = ProofStatus.CHEATED
_RAN = frozenset({ProofStatus.PROVED, ProofStatus.SUSPENDED})  # pool verdicts a cheat or a parse error overrides


def visible_steps(file: FileState, text: str, ordered: bool = True) -> stepping.Steps[list[ProofEntry]]:
    """Tally entries, minus those whose theorem no longer appears in the text, in
    steps (a script of 30,000 proofs takes tens of milliseconds); by line when
    `ordered`.  The entries are those of the file when the first step runs.

    The census prunes deletions only after the next pass; until then an
    entry for a deleted theorem would look outstanding forever.
    """
    info = textinfo.of(text)  # computed once per text
    entries = list(file.proofs.values())
    visible: list[ProofEntry] = []
    for chunk in stepping.chunks(entries):
        for entry in chunk:
            name = entry.name.split("#")[0].split("[")[0]
            # A theorem's own block names it; any other name is looked up in
            # the text's word set, built (in steps) the first time one comes.
            if name in info.block_names or name in (yield from info.words_steps()):
                visible.append(entry)
        yield
    if ordered:
        visible.sort(key=lambda e: e.line0)
    return visible


def answer_status(pool_status: str) -> str:
    """The pool's status as answers name it: its `cheated` means dropped unchecked."""
    return ProofStatus.UNCHECKED if pool_status == _CHEATED else pool_status


def tally_of(statuses: Iterable[str]) -> m.Tally:
    """Counts of answer statuses; `unreported` counts as unchecked."""
    tally = m.Tally()
    for status, count in Counter(statuses).items():  # one pass in C, then a handful of buckets
        bucket = ProofStatus.UNCHECKED if status == ProofStatus.UNREPORTED else status
        if bucket in m.Tally.__struct_fields__:
            setattr(tally, bucket, getattr(tally, bucket) + count)
    return tally


def of_pool(file: FileState) -> m.Tally:
    """The tally from the pool's word alone (for status: no scan for cheats or parse errors)."""
    return stepping.run(pool_steps(file))


def pool_steps(file: FileState) -> stepping.Steps[m.Tally]:
    """`of_pool` in steps.  A proof that uses cheat counts as cheated, and one HOL checked
    only after recovering from a parse error in it as parse_error, not as the pool's
    `proved`: status must not show "6/6 proved" beside the verdict CHEATS or ERRORS
    (the text's cheats are known once per text: a lookup a proof; parse recoveries
    are a handful of HOL's diagnostics)."""
    visible = yield from visible_steps(file, file.text, ordered=False)
    info = textinfo.of(file.text)
    parsed = _parse_recovered(file)
    yield
    return tally_of(_corrected(answer_status(e.status), info.cheat_line(e.name), e.name in parsed) for e in visible)


def _corrected(status: str, cheat_line: int | None, parse_error: bool) -> str:
    """The pool's `status` as diagnostics would list it (`proofs._overridden`: a parse error first)."""
    if status not in _RAN:
        return status
    return ProofStatus.PARSE_ERROR if parse_error else ProofStatus.CHEATED if cheat_line is not None else status


def _parse_recovered(file: FileState) -> set[str]:
    """The proofs holding a parse error HOL recovered from, as `diagnosticlist.parse_errors` finds them."""
    blocks = Blocks(file.text)
    found = set()
    for diag in file.diagnostics:
        if not quirks.is_parse_recovery(diag):
            continue
        start = (diag.get("range") or {}).get("start") or {}
        line, col = int(start.get("line", 0)) + 1, int(start.get("character", 0)) + 1  # only col 1 matters: exact
        at = m.Range(line, col, line, col)
        owner = diagnosticlist.holder(blocks, m.Diagnostic(at, "error", "", diagnosticlist.PARSE_NOTE))
        if owner is not None:
            found.add(owner)
    return found


def open_suspensions(file: FileState, proofs: list[ProofEntry]) -> list[str]:
    """Suspended proofs with a subgoal that no proved `Resume thm[label]` finishes."""
    open_ = []
    suspended, proved = ProofStatus.SUSPENDED, ProofStatus.PROVED  # locals, per proof (see `filestate._CHECKING`)
    for entry in proofs:
        if entry.status != suspended:
            continue
        labels = [label.strip() for label in entry.detail.split(",") if label.strip()]
        resumed = [file.proofs.get(f"{entry.name}[{label}]") for label in labels]
        if not labels or any(r is None or r.status != proved for r in resumed):
            open_.append(entry.name)
    return open_
