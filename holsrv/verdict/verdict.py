"""Turn what a server said about a file into the diagnostics answer.

Pure: a `FileState`, the text on disk and the time in, a `DiagnosticsResult`
out.  The proofs are listed by `proofs`, the verdict and headline said by
`headline`, what is still going on by `outstanding`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from holsrv.config.settings import Settings
from holsrv.lsp import replies
from holsrv.rpc import messages as m
from holsrv.text import stepping
from holsrv.text.textinfo import Blocks
from holsrv.verdict import compileerrors, diagnosticlist, headline, outstanding, proofs, tally
from holsrv.verdict.filestate import FileState, Phase, ProofEntry


def build_steps(
    file: FileState,
    text: str,
    content_hash: str,
    encoding: str,
    now: float,
    settings: Settings,
    server: m.ServerNote,
    footprint_mb: float | None,
    waited_s: float,
    walk_errors: Iterable[str] = (),
    loops: Collection[str] = (),
) -> stepping.Steps[m.DiagnosticsResult]:
    """The answer for `text`, in steps of about a millisecond (`script.run` takes them at
    once; `textinfo.sliced` with the loop free between them): a file of 30,000 proofs
    takes some 60 ms, which the event loop must not spend in one go while other
    clients wait.  `walk_errors` are the messages of failed goal-state walks, which
    HOL adds to the file's diagnostics but are not about the text; `loops`, the
    proofs known to loop as they are (`runaway.Loops`), are not waited for.

    A notification may arrive between steps; each proof is listed as it was
    when its step ran, and the tally is that of the proofs listed.
    """
    complete = file.settled(now, outstanding.quiet_for(file, settings))
    # While blocked (or before the server has the file) nothing of the current
    # text was checked: verdicts about an earlier text would mislead.
    unknown = file.phase == Phase.BLOCKED or file.version == 0
    entries = [] if unknown else (yield from tally.visible_steps(file, text))
    blocks = Blocks(text)
    diagnostics, omitted, errors = yield from _diagnosed(file, blocks, encoding, set(walk_errors), complete)
    parse = diagnosticlist.parse_errors(blocks, diagnostics)
    listed = yield from _listed(file, entries, now, blocks, parse, errors)
    yield from proofs.after_first_error_steps(listed, blocks, diagnostics)
    cheats = yield from _cheats(blocks)
    warnings = yield from outstanding.slow_warnings(file, entries, now, settings, footprint_mb)
    warnings += outstanding.large(footprint_mb, settings)
    statuses = yield from headline.by_status(listed)
    result = m.DiagnosticsResult(
        file=replies.path_of(file.uri),
        content_hash=content_hash,
        verdict="",
        headline="",
        complete=complete,
        tally=tally.tally_of(statuses.elements()),
        proofs=listed,
        diagnostics=diagnostics,
        cheats=cheats,
        server=server,
        blocked=m.Blocked(**file.blocked) if file.phase == Phase.BLOCKED and file.blocked else None,
        diagnostics_omitted=omitted,
        warnings=warnings,
        note=headline.compiled_note(statuses),
    )
    if not complete:
        result.outstanding = outstanding.outstanding(file, entries, now, settings)
    yield
    only_slow = outstanding.complete_but_slow(file, now, settings, loops)
    opened = tally.open_suspensions(file, entries)
    yield
    result.verdict, result.headline = headline.verdict(result, statuses, waited_s, opened, only_slow, file, loops)
    return result


def _diagnosed(
    file: FileState, blocks: Blocks, encoding: str, walk_errors: set[str], complete: bool
) -> stepping.Steps[tuple[list[m.Diagnostic], int, dict[str, m.Diagnostic]]]:
    """(the diagnostics listed, how many more there were, each theorem's compile error)."""
    diagnostics = yield from diagnosticlist.diagnostics_steps(file, encoding, walk_errors)
    # Only a completed compile has said all it will about each declaration; every
    # error counts, listed or not.
    completed = file.phase == Phase.COMPLETED
    errors = (yield from compileerrors.compile_errors_steps(blocks, diagnostics)) if completed else {}
    omitted = max(0, len(diagnostics) - diagnosticlist.MAX_DIAGNOSTICS)
    diagnostics = diagnostics[:diagnosticlist.MAX_DIAGNOSTICS]
    diagnosticlist.note_failures(blocks, diagnostics, complete)
    return diagnostics, omitted, errors


def _listed(
    file: FileState, entries: list[ProofEntry], now: float, blocks: Blocks, parse: dict[str, m.Diagnostic],
    errors: dict[str, m.Diagnostic],
) -> stepping.Steps[list[m.Proof]]:
    """Every proof of the text, the pool's `entries` and those it does not have, by line."""
    listed = []
    for chunk in stepping.chunks(entries):
        listed += [proofs.proof(file, e, now, blocks, parse, errors) for e in chunk]
        yield
    listed += yield from _unreported(file, blocks, errors)
    listed.sort(key=_line)  # two runs in order, the pool's and the unreported: one merge
    yield
    return listed


def _cheats(blocks: Blocks) -> stepping.Steps[list[m.CheatUse]]:
    cheats = []
    for some in stepping.chunks(blocks.cheats):
        cheats += [_cheat(blocks, c) for c in some]
        yield
    return cheats


def _line(proof: m.Proof) -> int:
    return proof.line


def _unreported(
    file: FileState, blocks: Blocks, errors: dict[str, m.Diagnostic]
) -> stepping.Steps[list[m.Proof]]:
    if file.phase == Phase.BLOCKED:
        why = "not checked: the file is blocked"
    elif file.version == 0:
        why = "not checked yet: the HOL server is starting"
    elif file.phase == Phase.COMPLETED:
        return (yield from proofs.unreported_steps(file.proofs, blocks, errors))
    else:
        return []
    return (yield from proofs.unreported_steps({}, blocks, {}, why))


def _cheat(blocks: Blocks, cheat) -> m.CheatUse:
    line = blocks.index.line(cheat.offset)
    return m.CheatUse(theorem=cheat.theorem, line=line, col=cheat.offset - blocks.index.start(line) + 1)
