"""The comment/string scanner, proof blocks, cheats and edit span as they were
before the linear scanner: the oracle `test_scanner.py` compares the new
ones with, and the baseline the benchmark times them against.  Kept as it
was: do not speed it up.
"""

from __future__ import annotations

import bisect
import re

from holsrv.text import textinfo
from holsrv.text.cheats import Cheat

_QUOTES = (("``", "``"), ("`", "`"), ("‘", "’"), ("“", "”"))
_WORD = re.compile(r"(?<![A-Za-z0-9_'.])(?:cheat|CHEAT_TAC|mk_thm)(?![A-Za-z0-9_'])")
_HEAD = re.compile(r"^(Theorem|Triviality|Resume)[ \t]+([A-Za-z0-9_']+(?:\[[^\]\n]*\])?)", re.MULTILINE)
_PROOF = re.compile(r"^Proof\b", re.MULTILINE)
_TERM_HEAD = re.compile(r"^(?:Definition|Inductive|CoInductive)\b|^Datatype\s*:", re.MULTILINE)
_TERM_END = re.compile(r"^(?:End|Termination)\b", re.MULTILINE)
_THEORY_LINE = re.compile(r"^Theory\b[^\n]*", re.MULTILINE)
_QED = re.compile(r"^QED\b", re.MULTILINE)
_DECL = re.compile(
    r"^(?:Theorem|Triviality|Resume|Definition|Inductive|CoInductive|Datatype|Type|"
    r"Overload|Theory|Finalise|val|fun|open|local|structure|datatype|type)\b",
    re.MULTILINE,
)


def old_blank(text: str) -> str:
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        if text.startswith("(*", i):
            j = _old_comment_end(text, i)
        elif text[i] == '"':
            j = _old_string_end(text, i)
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


def _old_comment_end(text: str, i: int) -> int:
    depth = 0
    while i < len(text):
        if text.startswith("(*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*)", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return len(text)


def _old_string_end(text: str, i: int) -> int:
    i += 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        elif text[i] == "\n":
            return i
        else:
            i += 1
    return len(text)


def old_proof_blocks(text: str) -> list[textinfo.ProofBlock]:
    code = old_blank(text)
    decls = [m.start() for m in _DECL.finditer(code)]
    blocks = []
    for head in _HEAD.finditer(code):
        following = bisect.bisect_right(decls, head.start())
        limit = decls[following] if following < len(decls) else len(code)
        block = _old_block(code, head, limit)
        if block is not None:
            blocks.append(block)
    return blocks


def _old_block(code, head, limit):
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
        return textinfo.ProofBlock(name, head.start(), body_start, limit, limit)
    return textinfo.ProofBlock(name, head.start(), body_start, qed.start(), qed.end())


def old_pool_names(text):
    seen: dict[str, int] = {}
    named = []
    for block in old_proof_blocks(text):
        count = seen[block.name] = seen.get(block.name, 0) + 1
        named.append((block.name if count == 1 or "[" in block.name else f"{block.name}#{count}", block))
    return named


def old_cheats(text: str) -> list[Cheat]:
    code = old_blank(text)
    blocks = old_proof_blocks(text)
    terms = [(b.start, b.body_start) for b in blocks] + _old_term_regions(code)
    found = []
    for match in _WORD.finditer(code):
        at = match.start()
        if any(start <= at < end for start, end in terms):
            continue
        owner = next((b.name for b in blocks if b.start <= at < b.end), "")
        found.append(Cheat(owner, at))
    return found


def _old_term_regions(code):
    decls = [m.start() for m in _DECL.finditer(code)]
    regions = [(m.start(), m.end()) for m in _THEORY_LINE.finditer(code)]
    for head in _TERM_HEAD.finditer(code):
        following = bisect.bisect_right(decls, head.start())
        limit = decls[following] if following < len(decls) else len(code)
        end = _TERM_END.search(code, head.end(), limit)
        regions.append((head.start(), end.start() if end else limit))
    return regions


def old_edit_span(old: str, new: str) -> tuple[int, int, int]:
    n = min(len(old), len(new))
    start = 0
    while start < n and old[start] == new[start]:
        start += 1
    old_end, new_end = len(old), len(new)
    while old_end > start and new_end > start and old[old_end - 1] == new[new_end - 1]:
        old_end -= 1
        new_end -= 1
    return start, old_end, new_end
