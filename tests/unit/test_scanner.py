"""The linear scanner agrees with the character-by-character reading it replaced.

The old implementation is kept as the oracle (`scanner_oracle.py`; the
benchmark times it against the new one); the corpus is every script written into the tests, the benchmark's generated
scripts, generated nests of comments, strings and quotations, and random
text made of the characters that matter.
"""

from __future__ import annotations

import ast
import random
import re
import sys
from pathlib import Path

import msgspec
import pytest
from scanner_oracle import old_blank, old_cheats, old_edit_span, old_pool_names, old_proof_blocks

from holsrv.text import editspan, masking, stepping, textinfo

TESTS = Path(__file__).parent.parent
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
        assert masking.blank_comments_and_strings(text) == old_blank(text), text


@pytest.mark.parametrize("chunk", range(4))
def test_the_plain_patterns_for_a_python_whose_re_mishandles_possessive_repeats_agree_too(chunk, monkeypatch):
    # Python 3.11.2's `re` gets nested possessive repeats wrong; there the
    # module falls back to these, so they must be right wherever the suite runs.
    plain, plain_or_opener = (re.compile(p) for p in masking._patterns(possessive=False))
    monkeypatch.setattr(masking, "_REGION", plain)
    monkeypatch.setattr(masking, "_REGION_OR_OPENER", plain_or_opener)
    for text in _all_texts()[chunk::4]:
        assert masking.blank_comments_and_strings(text) == old_blank(text), text
        assert stepping.run(textinfo.code_steps(text)) == old_blank(text), text


@pytest.mark.parametrize("chunk", range(4))
def test_blanking_in_steps_equals_the_character_by_character_reading(chunk):
    # The daemon's sliced path: a regex loop with a depth count, not one substitution.
    for text in _all_texts()[chunk::4]:
        assert stepping.run(textinfo.code_steps(text)) == old_blank(text), text


def test_comments_nested_deeper_than_the_pattern_goes_are_still_counted():
    for depth in range(1, 12):
        text = "a " + "(* x " * depth + "‘q’ " + " *)" * depth + " ‘cheat’ (* unclosed (* "
        assert masking.blank_comments_and_strings(text) == old_blank(text)


@pytest.mark.parametrize("chunk, step", [(0, 1), (1, 3), (2, 64), (3, 1 << 18)])
def test_proof_blocks_and_cheats_equal_the_old_reading(chunk, step, monkeypatch):
    monkeypatch.setattr(textinfo, "CHARS_PER_STEP", step)  # cheats searched for a step's worth at a time
    monkeypatch.setattr(textinfo, "ITEMS_PER_STEP", max(1, step // 8))
    for text in _all_texts()[chunk::4]:
        blocks, cheats = stepping.run(textinfo.scan_steps(text))
        # The old reading knows nothing of `local … end`; its spans are tested in test_textinfo.
        assert [msgspec.structs.replace(b, local=None) for b in blocks] == old_proof_blocks(text), text
        assert cheats == old_cheats(text), text


def test_cached_answers_equal_fresh_ones():
    for text in _generated_nests(50):
        assert [msgspec.structs.replace(b, local=None) for b in textinfo.of(text).blocks] == old_proof_blocks(text)
        assert list(textinfo.of(text).cheats) == old_cheats(text)
        assert [name for name, _ in textinfo.of(text).named] == [name for name, _ in old_pool_names(text)]


@pytest.mark.parametrize("step", [1, 2, 5, 1 << 18])
def test_edit_span_equals_the_old_character_loop(monkeypatch, step):
    monkeypatch.setattr(editspan, "CHARS_PER_STEP", step)  # compared a step's worth at a time
    rng = random.Random(3)
    for _ in range(3000):
        old = _random_text(rng, rng.randrange(0, 40))
        cut = rng.randrange(len(old) + 1)
        new = old[:cut] + _random_text(rng, rng.randrange(0, 4)) + old[cut + rng.randrange(0, 3):]
        assert editspan.edit_span(old, new) == old_edit_span(old, new), (old, new)


def test_an_unterminated_comment_string_or_quotation_runs_as_before():
    for text in ["(* (* *)", '"abc\ndef"', '"abc\\', "‘x", "``x", "`x", "“x\n\n", "(*)", "(**)", '"\\\n"']:
        assert masking.blank_comments_and_strings(text) == old_blank(text)
