"""Where a `try` candidate goes in the text: the tactic it replaces, and its place in it.

A `line` inside a proof body names that line's tactic (from `column`).  A
`line` on a theorem's declaration outside its body (the `Theorem` line, the
statement's, the `Proof` line, the `QED` line) names the whole body: each
candidate then replaces everything between `Proof` and `QED`.  Either way a
candidate that is itself a whole `Theorem name: … Proof … QED` of the same
theorem replaces the declaration, statement included (`for_candidate`): the
answer says when its statement differs (`statement_change`).

Pure functions over a text (its facts come from `textinfo`, computed once
per text): no server, no session.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from holsrv.errors import BadRequest
from holsrv.rpc import messages as m
from holsrv.text import textinfo
from holsrv.text.positions import LineIndex, Text

# A line's own combinators stay when its whole tactic is replaced: `>> simp[]`
# tried as `metis_tac[]` must stay `>> metis_tac[]`, or the proof no longer parses.
_LEADING = re.compile(r"(?:>>|\\\\|>-|>\||THEN1\b|THENL\b|THEN\b)\s*")
_TRAILING = re.compile(r"\s*(?:>>|\\\\|THEN\b)$")


@dataclass(frozen=True)
class Span:
    """What a candidate replaces: text[start:end], inside `block`'s body."""

    start: int
    end: int
    block: textinfo.ProofBlock
    name: str  # the proof's pool name
    # "tactic": a line's tactic; "proof": the whole body; "theorem": the whole declaration.
    kind: str = "tactic"
    # Where HOL reports an error of the candidate's text from: its proof body, or for a
    # declaration the line after the text before it (a statement that does not elaborate).
    errors_from: int = -1

    def put(self, text: str, tactic: str) -> str:
        """`text` with `tactic` in this span's place."""
        return text[:self.start] + tactic + text[self.end:]

    def goals_offset(self, tactic: str) -> int:
        """Where, in the text with `tactic` put in, the goals after the candidate are asked:
        just past its last tactic."""
        if self.kind != "theorem":
            return self.start + len(tactic)
        body_end = textinfo.of(tactic).blocks[0].body_end
        return self.start + len(tactic[:body_end].rstrip())

    @property
    def first(self) -> int:
        """The first offset whose diagnostics are the candidate's (see `errors_from`)."""
        return self.errors_from if self.errors_from >= 0 else min(self.block.body_start, self.start)


def span(text: str, line: int, column: int | None) -> Span:
    """The tactic text of `line` from `column` (or all of it) that candidates replace."""
    lines = Text(text)
    lines.to_lsp(line, column or 1, "utf-8")  # refuses a position outside the file
    info = textinfo.of(text)  # computed once per text
    start = info.index.start(line)
    chars = lines.lines[line - 1]
    whole = _whole(text, info, start, start + len(chars)) if column is None else None
    if whole is not None:
        return whole
    found = next(((n, b) for n, b in info.named if b.body_start <= start + len(chars) and start < b.body_end), None)
    if found is None:
        raise BadRequest(
            f"line {line} is not a line of tactics inside a Proof … QED block; give the line of the "
            "tactic to replace (goalState shows the goals on any line of a proof), or a theorem's Theorem "
            "or Proof line to replace its whole proof."
        )
    name, block = found
    first = start + len(chars) - len(chars.lstrip()) if column is None else start + column - 1
    a, b = max(first, block.body_start), min(start + len(chars.rstrip()), block.body_end)
    if column is None:
        lead = _LEADING.match(text, a, b)
        a = lead.end() if lead else a
        trail = _TRAILING.search(text[a:b])
        b = a + trail.start() if trail else b
    if a >= b:
        raise BadRequest(
            f"line {line}{'' if column is None else f', column {column},'} has no tactic text to replace; "
            "give a line (and column) inside the proof where a tactic is."
        )
    return Span(a, b, block, name)


_DECLARATION = re.compile(r"\n*(?:Theorem|Triviality)\s")


def is_declaration(candidate: str) -> bool:
    """Whether a candidate is a whole `Theorem name: … Proof … QED` rather than tactics."""
    return _DECLARATION.match(candidate) is not None


def _whole(text: str, info: textinfo.TextInfo, start: int, end: int) -> Span | None:
    """The whole body of the theorem whose declaration holds the line `start`..`end` outside
    its body, or None.  The body's layout stays: its first and last blanks are kept."""
    found = next(((n, b) for n, b in info.named
                  if b.start <= start < b.end and (end <= b.body_start or start >= b.body_end)), None)
    if found is None:
        return None
    name, block = found
    body = text[block.body_start:block.body_end]
    a = block.body_start + len(body) - len(body.lstrip())
    b = max(a, block.body_start + len(body.rstrip()))
    return Span(a, b, block, name, kind="proof")


def for_candidate(text: str, span: Span, candidate: str) -> Span:
    """`span`, or for a candidate that is a whole declaration the declaration's span:
    BadRequest unless it is one `Theorem` of the same name with a `Proof … QED`."""
    if not is_declaration(candidate):
        return span
    blocks = textinfo.of(candidate).blocks
    block = blocks[0] if len(blocks) == 1 else None
    if block is None or block.name != span.block.name or candidate[block.body_end:block.body_end + 3] != "QED":
        raise BadRequest(
            f"a candidate that starts with Theorem must be one whole `Theorem {span.block.name}: … Proof … QED` "
            f"(the theorem of line's proof, same name); got {candidate[:80]!r}"
        )
    if candidate[block.end:].strip():
        raise BadRequest(f"a Theorem candidate must end at its QED: {candidate[block.end:][:80]!r} follows it")
    before = text[:span.block.start].rstrip()
    after_previous = text.find("\n", len(before)) + 1 if before else 0
    return Span(span.block.start, span.block.end, span.block, span.name, kind="theorem",
                errors_from=min(after_previous, span.block.start))


def statement(text: str, block: textinfo.ProofBlock) -> str:
    """A theorem's statement as HOL reads it, nearly: from its name to `Proof`, comments
    left out and blanks made one (`verify` compares statements as HOL elaborates them)."""
    head = text[block.start:block.body_start]
    head = head[:max(0, head.rfind("Proof"))]
    return " ".join(_uncommented(head.split(":", 1)[-1]).split())


def statement_change(text: str, span: Span, candidate: str) -> tuple[str, str] | None:
    """(the file's statement, the candidate's) when a declaration candidate changes it, else None."""
    if span.kind != "theorem":
        return None
    was = statement(text, span.block)
    now = statement(candidate.lstrip(), textinfo.of(candidate.lstrip()).blocks[0])
    return None if was == now else (was, now)


def _uncommented(text: str) -> str:
    """`text` without its `(* … *)` comments (nested ones too)."""
    out, depth, at = [], 0, 0
    while at < len(text):
        pair = text[at:at + 2]
        if pair == "(*":
            depth, at = depth + 1, at + 2
        elif pair == "*)" and depth:
            depth, at = depth - 1, at + 2
        else:
            if not depth:
                out.append(text[at])
            at += 1
    return "".join(out)


def in_candidate(index: LineIndex, rng: m.Range, start: int, tactic: str) -> m.Range:
    """`rng` (of the trial's text) in the candidate's own text, clamped to it: line 1 is its first."""
    def own(line: int, col: int) -> tuple[int, int]:
        at = min(max(index.start(line) + col - 1 - start, 0), len(tactic))
        first = tactic.rfind("\n", 0, at) + 1
        return tactic.count("\n", 0, at) + 1, at - first + 1

    (line, col), (end_line, end_col) = own(rng.line, rng.col), own(rng.end_line, rng.end_col)
    return m.Range(line, col, end_line, end_col)
