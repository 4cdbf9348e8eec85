"""What the daemon itself reads from a HOL script's text.

The HOL server is the authority on compiling; the daemon only needs the
block structure (where each `Theorem … Proof … QED` lies, for edits that run
from one proof into the next) and the uses of `cheat` (which the server's
pool reports as proved).  Both skip comments, which nest in SML, and string
literals.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from holsrv.positions import LineIndex

# `cheat` is CHEAT_TAC; mk_thm makes a theorem without proof.  HOL's pool
# reports proofs using any of them as proved.
_WORD = re.compile(r"(?<![A-Za-z0-9_'.])(?:cheat|CHEAT_TAC|mk_thm)(?![A-Za-z0-9_'])")
_HEAD = re.compile(
    r"^(Theorem|Triviality|Resume)[ \t]+([A-Za-z0-9_']+(?:\[[^\]\n]*\])?)", re.MULTILINE
)
_PROOF = re.compile(r"^Proof\b", re.MULTILINE)
# Declarations whose text is HOL terms and names, up to `End` (or `Termination`,
# whose tactics are code); the old `Datatype `…`` form is a quotation anyway.
_TERM_HEAD = re.compile(r"^(?:Definition|Inductive|CoInductive)\b|^Datatype\s*:", re.MULTILINE)
_TERM_END = re.compile(r"^(?:End|Termination)\b", re.MULTILINE)
_THEORY_LINE = re.compile(r"^Theory\b[^\n]*", re.MULTILINE)
_QED = re.compile(r"^QED\b", re.MULTILINE)
# Any column-0 word that starts a new top-level declaration ends the previous one.
_DECL = re.compile(
    r"^(?:Theorem|Triviality|Resume|Definition|Inductive|CoInductive|Datatype|Type|"
    r"Overload|Theory|Finalise|val|fun|open|local|structure|datatype|type)\b",
    re.MULTILINE,
)


@dataclass(frozen=True)
class ProofBlock:
    """One `Theorem name: … Proof … QED` (or `Resume …: … QED`), as character offsets."""

    name: str
    start: int  # first character of the declaration keyword
    body_start: int  # first character after `Proof` (or the Resume `:`)
    body_end: int  # first character of `QED` (or the declaration's end if QED is missing)
    end: int  # just past `QED`


@dataclass(frozen=True)
class Cheat:
    theorem: str  # "" when not inside a theorem
    offset: int


# HOL term quotations: `cheat` in a term is a variable, not a tactic.
_QUOTES = (("``", "``"), ("`", "`"), ("‘", "’"), ("“", "”"))


def blank_comments_and_strings(text: str) -> str:
    """`text` with comments, string literals and term quotations replaced by
    spaces (newlines kept)."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        if text.startswith("(*", i):
            j = _comment_end(text, i)
        elif text[i] == '"':
            j = _string_end(text, i)
        elif quote := next((q for q in _QUOTES if text.startswith(q[0], i)), None):
            close = text.find(quote[1], i + len(quote[0]))
            j = n if close < 0 else close + len(quote[1])
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def _comment_end(text: str, i: int) -> int:
    depth, i = 0, i
    while i < len(text):
        if text.startswith("(*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*)", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return len(text)  # an unclosed comment runs to the end, as in SML


def _string_end(text: str, i: int) -> int:
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        elif text[i] == "\n":
            return i  # an unterminated literal ends at the line (SML rejects it anyway)
        else:
            i += 1
    return len(text)


def proof_blocks(text: str) -> list[ProofBlock]:
    """Every proof block in `text`, in order."""
    code = blank_comments_and_strings(text)
    heads = list(_HEAD.finditer(code))
    decls = [m.start() for m in _DECL.finditer(code)]
    blocks = []
    for head in heads:
        following = bisect.bisect_right(decls, head.start())
        limit = decls[following] if following < len(decls) else len(code)
        block = _block(code, head, limit)
        if block is not None:
            blocks.append(block)
    return blocks


def _block(code: str, head: re.Match, limit: int) -> ProofBlock | None:
    kind, name = head.group(1), head.group(2)
    if kind == "Resume":
        colon = code.find(":", head.end(), limit)
        if colon < 0:
            return None
        body_start = colon + 1
    else:
        name = name.split("[", 1)[0]
        proof = _PROOF.search(code, head.end(), limit)
        if proof is None:
            return None
        body_start = proof.end()
    qed = _QED.search(code, body_start, limit)
    if qed is None:
        return ProofBlock(name, head.start(), body_start, limit, limit)
    return ProofBlock(name, head.start(), body_start, qed.start(), qed.end())


def pool_names(text: str) -> list[tuple[str, ProofBlock]]:
    """Each proof block with the name HOL's proof pool gives it (PROTOCOL.md §10.2).

    A rebound theorem is `foo#2`, `foo#3`, …; a Resume block keeps `thm[label]`.
    """
    seen: dict[str, int] = {}
    named = []
    for block in proof_blocks(text):
        count = seen[block.name] = seen.get(block.name, 0) + 1
        named.append((block.name if count == 1 or "[" in block.name else f"{block.name}#{count}", block))
    return named


def cheats(text: str) -> list[Cheat]:
    """Every use of `cheat` (or CHEAT_TAC, mk_thm) in tactic or SML code, with its theorem.

    Comments, strings and HOL terms are skipped: a theorem's statement, a
    definition's body and the Theory line are terms or names, where `cheat`
    is only an identifier.
    """
    code = blank_comments_and_strings(text)
    blocks = proof_blocks(text)
    terms = [(b.start, b.body_start) for b in blocks] + _term_regions(code)
    found = []
    for match in _WORD.finditer(code):
        at = match.start()
        if any(start <= at < end for start, end in terms):
            continue
        owner = next((b.name for b in blocks if b.start <= at < b.end), "")
        found.append(Cheat(owner, at))
    return found


def _term_regions(code: str) -> list[tuple[int, int]]:
    """Definition-like bodies and the Theory line: where `cheat` is only a name.

    Each ends at its `End` or `Termination`, and never past the next
    top-level declaration, so a missing `End` cannot hide the code after it.
    """
    decls = [m.start() for m in _DECL.finditer(code)]
    regions = [(m.start(), m.end()) for m in _THEORY_LINE.finditer(code)]
    for head in _TERM_HEAD.finditer(code):
        following = bisect.bisect_right(decls, head.start())
        limit = decls[following] if following < len(decls) else len(code)
        end = _TERM_END.search(code, head.end(), limit)
        regions.append((head.start(), end.start() if end else limit))
    return regions


def line_col(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column (in characters) of a character offset."""
    return LineIndex(text).line_col(offset)


def edit_span(old: str, new: str) -> tuple[int, int, int]:
    """(first differing offset, end of the changed region in old, end in new)."""
    n = min(len(old), len(new))
    start = 0
    while start < n and old[start] == new[start]:
        start += 1
    old_end, new_end = len(old), len(new)
    while old_end > start and new_end > start and old[old_end - 1] == new[new_end - 1]:
        old_end -= 1
        new_end -= 1
    return start, old_end, new_end


def spilling_proof(old: str, new: str) -> ProofBlock | None:
    """The proof whose body an edit starts in and runs past the QED of, if any.

    The HOL server decides from where an edit starts whether it is confined to
    one proof.  Such an edit would be taken as tactic-only, leaving the checks
    of the proofs it also changed running on stale text.
    """
    start, old_end, _ = edit_span(old, new)
    for block in proof_blocks(old):
        if block.body_start <= start < block.body_end:
            return block if old_end > block.body_end else None
    return None
