"""A text's facts are computed once, kept, and computed in slices when large."""

from __future__ import annotations

import asyncio
import random
import sys
import uuid
from pathlib import Path

import pytest
from scanner_oracle import old_pool_names

from holsrv.rpc import messages as m
from holsrv.text import positions, stepping, textinfo

from conftest import GOOD_SCRIPT

sys.path.insert(0, str(Path(__file__).parent.parent.parent / "bench"))
import scripts as generated  # noqa: E402  # bench/scripts.py: the benchmark's generator

BIG = generated.generate(200_000)


def test_a_text_is_computed_once_however_often_and_by_whom_it_is_asked():
    cache = textinfo.TextCache()
    first = cache.of(GOOD_SCRIPT)
    copy = "".join(list(GOOD_SCRIPT))  # equal, but another string object
    assert copy is not GOOD_SCRIPT
    assert cache.of(GOOD_SCRIPT) is first and cache.of(copy) is first
    assert cache.computed == 1
    cache.of(GOOD_SCRIPT + "\n")
    assert cache.computed == 2


def test_the_cache_forgets_the_least_recently_used_text_beyond_its_bound():
    cache = textinfo.TextCache(max_entries=2)
    texts = [GOOD_SCRIPT + f"(* {i} *)\n" for i in range(3)]
    for text in texts:
        cache.of(text)
    cache.of(texts[2])
    assert cache.computed == 3
    cache.of(texts[0])
    assert cache.computed == 4


def test_the_facts_are_those_the_script_functions_give():
    info = textinfo.TextCache().of(BIG)
    blocks, cheats = stepping.run(textinfo.scan_steps(BIG))
    assert list(info.blocks) == blocks and list(info.cheats) == cheats
    assert [name for name, _ in info.named] == [name for name, _ in old_pool_names(BIG)]
    assert info.ancestors == ("arithmetic", "list")
    first, body, last = info.block_lines["thm_1"]
    lines = BIG.split("\n")
    assert lines[first - 1].startswith("Theorem thm_1:") and lines[last - 1] == "QED" and first < body < last


def test_a_name_only_in_a_comment_is_not_mentioned():
    info = textinfo.TextCache().of(GOOD_SCRIPT + "(* gone_thm was here *)\nval kept_thm = 1;\n")
    words = stepping.run(info.words_steps())
    assert "add0" in info.block_names and "kept_thm" in words
    assert "gone_thm" not in words and "gone_thm" not in info.block_names


@pytest.mark.asyncio
async def test_a_large_text_is_computed_in_slices_with_the_loop_free_between_them():
    cache = textinfo.TextCache()
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    other = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    before = ticks
    info = await cache.prepare(BIG)
    other.cancel()
    assert ticks - before > 5  # the other task ran between the slices
    assert list(info.blocks) == stepping.run(textinfo.scan_steps(BIG))[0] and cache.of(BIG) is info


@pytest.mark.asyncio
async def test_callers_preparing_one_text_at_once_share_one_computation():
    cache = textinfo.TextCache()
    first, second = await asyncio.gather(cache.prepare(BIG), cache.prepare(BIG))
    assert first is second and cache.computed == 1


def test_one_text_is_computed_once_for_every_kind_of_question(daemon, write_script):
    text = GOOD_SCRIPT + f"(* {uuid.uuid4()} *)\n"  # a text no earlier test computed
    path = write_script(text)
    before = textinfo.shared.computed
    daemon.call(m.Diagnostics(str(path), wait=20))
    daemon.call(m.Status())
    daemon.call(m.GoalState(str(path), 7, 3))
    daemon.call(m.Hover(str(path), 4, 10))
    daemon.call(m.Diagnostics(str(path), wait=20))
    daemon.call(m.Status())
    assert textinfo.shared.computed - before == 1


def test_one_text_is_split_into_lines_once_for_every_answer(daemon, write_script, monkeypatch):
    text = GOOD_SCRIPT + f"(* {uuid.uuid4()} *)\n"
    path = write_script(text)
    splits = []
    split = positions.Text.__init__

    def counted(self, given: str, lines=None) -> None:
        splits.append(given == text)
        split(self, given, lines)

    monkeypatch.setattr(positions.Text, "__init__", counted)
    daemon.call(m.Diagnostics(str(path), wait=20))
    for line, column in ((7, 3), (7, None), (13, 5)):
        daemon.call(m.GoalState(str(path), line, column))
    daemon.call(m.Hover(str(path), 4, 10))
    daemon.call(m.DocumentSymbol(str(path)))
    daemon.call(m.Diagnostics(str(path), wait=0))
    # A 300 KB script takes milliseconds to split: once per text, never per answer.
    assert splits.count(True) == 1


@pytest.mark.parametrize("chars", [1, 2, 3, 7, 256 * 1024])
def test_lines_found_in_steps_are_the_lines_a_split_gives(monkeypatch, chars):
    monkeypatch.setattr(positions, "SPLIT_CHARS_PER_STEP", chars)
    rng = random.Random(chars)
    texts = ["", "\n", "a", "a\n", "\n\n", "ab\ncd\n\nef", GOOD_SCRIPT]
    texts += ["".join(rng.choice("ab\n∀") for _ in range(rng.randint(0, 400))) for _ in range(200)]
    for text in texts:
        starts = stepping.run(textinfo.starts_steps(text))
        split = text.split("\n")
        assert list(starts) == [sum(len(line) + 1 for line in split[:i]) for i in range(len(split))], text
        lines = positions.Text(text, starts).lines
        assert list(lines) == split and lines[-1] == split[-1] and list(lines[1:3]) == split[1:3], text
        with pytest.raises(IndexError):
            lines[len(split)]


# Blocks that meet on a line (a missing QED), a rebound name, Resume labels,
# cheats on a shared line, in a comment, in a statement and outside theorems.
_ODD = """Theory odd
Ancestors arithmetic

Theorem a:
  T
Proof
  cheat
Theorem b:
  T
Proof
  simp[] >> cheat
QED

Theorem a:
  (* cheat *) T
Proof
  simp[]
QED

val _ = cheat;

Theorem s:
  T /\\ T
Proof
  conj_tac >- suspend "l" >> simp[]
QED

Resume s[l]:
  cheat
QED
"""


@pytest.mark.parametrize("text", [_ODD, BIG, _ODD * 3])
def test_a_lines_owner_and_a_proofs_first_cheat_are_what_a_walk_over_the_blocks_finds(text):
    info = textinfo.TextCache().of(text)
    line = info.index.line
    spans = [(name, line(b.start), line(b.end)) for name, b in info.named]  # in order; a name may recur

    def walk_owner(at: int) -> str | None:
        return next((name for name, first, last in spans if first <= at <= last), None)

    def walk_cheat(name: str) -> int | None:
        cheats = [line(c.offset) for c in info.cheats]
        return min((at for n, first, last in spans if n == name for at in cheats if first <= at <= last), default=None)

    for at in range(0, text.count("\n") + 3):
        assert info.owner(at) == walk_owner(at), at
    for name in [*info.block_lines, "nothing"]:
        assert info.cheat_line(name) == walk_cheat(name), name
    if text is _ODD:
        assert info.owner(7) == "a" and info.cheat_line("a") == 7 and info.cheat_line("b") == 11
        assert info.cheat_line("a#2") is None and info.cheat_line("s[l]") is not None


def test_the_word_set_is_built_in_steps_and_only_when_a_name_is_not_a_theorems():
    info = textinfo.TextCache().of(_ODD)
    assert "b" in info.block_names and info._words is None
    words = stepping.run(info.words_steps())
    assert "conj_tac" in words and "cheat_in_comment" not in words
    assert info._words is not None


def test_theorems_inside_a_column_0_local_block_are_known_with_the_block_lines():
    text = (
        "Theory t\n\nlocal\nTheorem a:\n  T\nProof\n  simp[]\nQED\nin\nTheorem b:\n  T\nProof\n  simp[]\nQED\n"
        "end\n\nTheorem c:\n  T\nProof\n  simp[]\nQED\n"
    )
    info = textinfo.TextInfo
    facts = stepping.run(info.steps(text))
    assert facts.locals == ((3, 15, ("a", "b")),)
