"""A script's statements, and where two scripts' statements differ, as HOL would read them.

`verify` compares the statements of a script's theorems and definitions with
a reference (the file at a git revision, or a file of pinned statements) so
that a proof made to go through by weakening its statement is named.  Two
statements are the same when HOL would read them the same, not when their
bytes are: comments go, whitespace counts only between two characters that
would otherwise run into one token, and HOL's ASCII spellings of its
connectives read as the Unicode ones (`!` as `∀`, `==>` as `⇒`: HOL's parser
takes both).

What is read (column-0 words of the code, comments and strings masked):

* `Theorem NAME[attrs]: statement` up to `Proof`, and `Triviality` the same;
  `Theorem NAME = expression` up to the next declaration (a derived theorem:
  its expression is its statement);
* `Definition NAME[attrs]: body` up to `End` or `Termination`, and
  `Inductive` / `CoInductive` the same; `Datatype: body End`, named by the
  first type it declares.

Attributes (`[simp]`) are not part of a statement.  Old-style
`store_thm ("name", ``…``, …)` is not read.  Pure: a function of the texts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from holsrv.rpc import messages as m
from holsrv.text import masking, scanner, stepping, textinfo
from holsrv.text.positions import LineIndex

MAX_STATEMENT_CHARS = 4000  # of a statement shown in an answer (compared whole)
_NAME = re.compile(r"[ \t]+([A-Za-z0-9_']+)(\[[^\]\n]*\])?[ \t]*(:|=)?")
_DATATYPE_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_']*)")
# HOL's parser reads these ASCII spellings as the Unicode tokens it prints; longest first.
_ASCII = [("<=>", "⇔"), ("==>", "⇒"), ("/\\", "∧"), ("\\/", "∨"), ("<=", "≤"), (">=", "≥"), ("<>", "≠"),
          ("?!", "∃!"), ("!", "∀"), ("?", "∃"), ("~", "¬"), ("\\", "λ")]
_TOKENS = re.compile("|".join(re.escape(a) for a, _ in _ASCII))
_UNICODE = dict(_ASCII)
_BRACKETS = set("()[]{},;")
_COMMENT_OR_STRING = re.compile(r'\(\*|"(?:[^"\\\n]|\\.)*"?')


@dataclass(frozen=True)
class Statement:
    """One theorem's or definition's statement: as written (trimmed) and as HOL would read it."""

    kind: str  # "theorem" | "definition"
    name: str
    offset: int  # of its declaration's keyword
    text: str
    normal: str


def steps(text: str) -> stepping.Steps[dict[str, Statement]]:
    """The statements of `text` by name (a rebound name: its last statement), in steps (a 4 MB
    script's masking and marks take tens of milliseconds)."""
    code = yield from textinfo.code_steps(text)
    marks, padded, at = scanner.Marks(), scanner.padded(code), 0
    while at < len(padded):
        at = scanner.mark(marks, padded, at, stepping.ITEMS_PER_STEP)
        yield
    found: dict[str, Statement] = {}
    for heads in stepping.chunks(marks.heads):
        for start, kind in heads:
            if kind != "Resume":
                _keep(found, _theorem(text, code, marks, start, kind))
        yield
    for terms in stepping.chunks(marks.term_heads):
        for start, end in terms:
            _keep(found, _definition(text, code, marks, start, end))
        yield
    return found


def _keep(found: dict[str, Statement], statement: Statement | None) -> None:
    if statement is not None:
        found.pop(statement.name, None)  # a rebinding: the later one stands, in its place
        found[statement.name] = statement


def _theorem(text: str, code: str, marks: scanner.Marks, start: int, kind: str) -> Statement | None:
    head = _NAME.match(code, start + len(kind))
    if head is None or head.group(3) is None:
        return None
    limit = marks.limit(start, len(code))
    end = limit
    if head.group(3) == ":":
        proof = scanner.first(marks.proofs, head.end(), limit)
        end = proof if proof is not None else limit
    body = text[head.end():end] if head.group(3) == ":" else "= " + text[head.end():end].strip()
    return _statement("theorem", head.group(1), start, body)


def _definition(text: str, code: str, marks: scanner.Marks, start: int, after_keyword: int) -> Statement | None:
    limit = marks.limit(start, len(code))
    stop = scanner.first(marks.term_ends, after_keyword, limit)
    end = stop if stop is not None else limit
    if code.startswith("Datatype", start):
        colon = code.find(":", after_keyword, end)
        named = _DATATYPE_NAME.match(code, colon + 1) if colon >= 0 else None
        if named is None:
            return None
        return _statement("definition", f"Datatype {named.group(1)}", start, text[colon + 1:end])
    head = _NAME.match(code, after_keyword)
    if head is None or head.group(3) != ":":
        return None
    return _statement("definition", head.group(1), start, text[head.end():end])


def _statement(kind: str, name: str, offset: int, body: str) -> Statement:
    shown = body.strip()
    if len(shown) > MAX_STATEMENT_CHARS:
        shown = shown[:MAX_STATEMENT_CHARS] + " …"
    return Statement(kind, name, offset, shown, normal(body))


def normal(statement: str) -> str:
    """`statement` as HOL would read it: comments gone, ASCII connectives as Unicode, whitespace
    only where two characters would otherwise join into one token."""
    pieces: list[str] = []
    at = 0
    while True:
        found = _COMMENT_OR_STRING.search(statement, at)
        if found is None:
            pieces.append(_tokens(statement[at:]))
            break
        pieces.append(_tokens(statement[at:found.start()]))
        if found.group() == "(*":  # a comment (nested, as SML's): a space, as it parts two tokens
            _, at = masking.blank_regions(statement, found.start(), 1)
            pieces.append(" ")
        else:
            pieces.append("\0" + found.group() + "\0")  # a string literal is kept as it is
            at = found.end()
    return _spaces("".join(pieces))


def _tokens(code: str) -> str:
    return _TOKENS.sub(lambda t: f" {_UNICODE[t.group()]} ", code)


def _class(char: str) -> int:
    if char.isalnum() or char in "_'":
        return 0
    return 2 if char in _BRACKETS else 1


def _spaces(code: str) -> str:
    out: list[str] = []
    for part in code.split("\0"):
        if part.startswith('"'):
            out.append(part)
            continue
        words = part.split()
        for word in words:
            if out and out[-1] and _class(out[-1][-1]) == _class(word[0]) != 2:
                out.append(" ")
            out.append(word)
    return "".join(out).strip()


def compare(reference: dict[str, Statement], current: dict[str, Statement],
            index: LineIndex | None = None) -> list[m.StatementChange]:
    """Where `current`'s statements differ from `reference`'s: changed, removed, added, and
    renamed (a removed statement that an added one states again).  A new theorem or
    definition is allowed; nothing else is."""
    changes: list[m.StatementChange] = []
    added = {n: s for n, s in current.items() if n not in reference}
    by_normal = {(s.kind, s.normal): n for n, s in added.items()}

    def line(s: Statement) -> int:
        return index.line(s.offset) if index is not None else 0

    for name, ref in reference.items():
        now = current.get(name)
        if now is None:
            moved = by_normal.pop((ref.kind, ref.normal), None)
            if moved is not None:
                new = added.pop(moved)
                changes.append(m.StatementChange(name, ref.kind, "renamed", line(new), _cut(ref.text),
                                                 _cut(new.text), renamed_to=moved))
            else:
                changes.append(m.StatementChange(name, ref.kind, "removed", 0, _cut(ref.text)))
        elif now.normal != ref.normal or now.kind != ref.kind:
            changes.append(m.StatementChange(name, now.kind, "changed", line(now), _cut(ref.text), _cut(now.text)))
    for name, new in added.items():
        changes.append(m.StatementChange(name, new.kind, "added", line(new), current=_cut(new.text), allowed=True))
    return changes


def _cut(statement: str) -> str:
    return statement if len(statement) <= MAX_STATEMENT_CHARS else statement[:MAX_STATEMENT_CHARS] + " …"
