"""The linear scanner agrees with the character-by-character reading it replaced.

The old implementation is kept at the bottom of this file as the oracle; the
corpus is every script written into the tests, the benchmark's generated
scripts, generated nests of comments, strings and quotations, and random
text made of the characters that matter.
"""

from __future__ import annotations

import ast
import bisect
import random
import re
import sys
from pathlib import Path

import pytest

from holsrv import script

TESTS = Path(__file__).parent
sys.path.insert(0, str(TESTS.parent / "bench"))
import scripts as generated  # noqa: E402  # bench/scripts.py: the benchmark's generator


def _test_scripts() -> list[str]:
    """Every string constant in the test suite that looks like a HOL script."""
    found = []
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                "Theorem" in node.value or "Proof" in node.value or "(*" in node.value
            ):
                found.append(node.value)
    return found


CORPUS = _test_scripts()
ALPHABET = ["(*", "*)", "(", ")", "*", '"', "\\", "\n", "\n", "`", "``", "‘", "’", "“", "”", " ", "x", "∀",
            "cheat", "\nTheorem t:", "\nProof", "\nQED", "\nEnd", "\nDefinition d:", "\nResume t[a]:",
            "\nTermination", "\nTheory x", "\nval", "\nDatatype:", "CHEAT_TAC", "mk_thm", ".cheat", "[", "]"]


def _random_text(rng: random.Random, pieces: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(pieces))


def _nest(rng: random.Random, depth: int) -> str:
    """A comment, string or quotation, with others nested inside to `depth`."""
    inner = _nest(rng, depth - 1) if depth else rng.choice(["", "x", "cheat", "\n", "*", "("])
    kind = rng.randrange(6)
    if kind == 0:
        return f"(* {inner} *)"
    if kind == 1:
        return '"' + inner.replace("\n", "\\n").replace('"', '\\"') + '"'
    if kind == 2:
        return f"‘{inner}’"
    if kind == 3:
        return f"“{inner}”"
    if kind == 4:
        return f"`{inner}`"
    return f"(*{inner}(*{inner}*){inner}*)"


def _generated_nests(count: int) -> list[str]:
    rng = random.Random(7)
    texts = []
    for _ in range(count):
        body = " ".join(_nest(rng, rng.randrange(5)) for _ in range(rng.randrange(1, 6)))
        texts.append(f"Theorem t:\n  T\nProof\n  {body} cheat\nQED\n{body}\n")
    return texts


def _all_texts() -> list[str]:
    rng = random.Random(11)
    randoms = [_random_text(rng, rng.randrange(1, 120)) for _ in range(1500)]
    return CORPUS + _generated_nests(400) + randoms + [generated.generate(20_000, seed=s) for s in (1, 2)]


def test_the_corpus_holds_the_test_suites_scripts():
    assert len(CORPUS) > 20 and any("Theorem add0" in text for text in CORPUS)


@pytest.mark.parametrize("chunk", range(4))
def test_blanking_equals_the_character_by_character_reading(chunk):
    texts = _all_texts()[chunk::4]
    for text in texts:
        assert script.blank_comments_and_strings(text) == old_blank(text), text


@pytest.mark.parametrize("chunk", range(4))
def test_proof_blocks_and_cheats_equal_the_old_reading(chunk):
    for text in _all_texts()[chunk::4]:
        blocks, cheats = script.scan(text)
        assert blocks == old_proof_blocks(text), text
        assert cheats == old_cheats(text), text


def test_cached_answers_equal_fresh_ones():
    for text in _generated_nests(50):
        assert script.proof_blocks(text) == old_proof_blocks(text)
        assert script.cheats(text) == old_cheats(text)
        assert [name for name, _ in script.pool_names(text)] == [name for name, _ in old_pool_names(text)]


def test_edit_span_equals_the_old_character_loop():
    rng = random.Random(3)
    for _ in range(3000):
        old = _random_text(rng, rng.randrange(0, 40))
        cut = rng.randrange(len(old) + 1)
        new = old[:cut] + _random_text(rng, rng.randrange(0, 4)) + old[cut + rng.randrange(0, 3):]
        assert script.edit_span(old, new) == old_edit_span(old, new), (old, new)


def test_an_unterminated_comment_string_or_quotation_runs_as_before():
    for text in ["(* (* *)", '"abc\ndef"', '"abc\\', "‘x", "``x", "`x", "“x\n\n", "(*)", "(**)", '"\\\n"']:
        assert script.blank_comments_and_strings(text) == old_blank(text)


# -- the oracle: the implementation the scanner replaced, as it was -----------

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


def old_proof_blocks(text: str) -> list[script.ProofBlock]:
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
        return script.ProofBlock(name, head.start(), body_start, limit, limit)
    return script.ProofBlock(name, head.start(), body_start, qed.start(), qed.end())


def old_pool_names(text):
    seen: dict[str, int] = {}
    named = []
    for block in old_proof_blocks(text):
        count = seen[block.name] = seen.get(block.name, 0) + 1
        named.append((block.name if count == 1 or "[" in block.name else f"{block.name}#{count}", block))
    return named


def old_cheats(text: str) -> list[script.Cheat]:
    code = old_blank(text)
    blocks = old_proof_blocks(text)
    terms = [(b.start, b.body_start) for b in blocks] + _old_term_regions(code)
    found = []
    for match in _WORD.finditer(code):
        at = match.start()
        if any(start <= at < end for start, end in terms):
            continue
        owner = next((b.name for b in blocks if b.start <= at < b.end), "")
        found.append(script.Cheat(owner, at))
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
