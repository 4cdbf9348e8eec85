"""Every answer about a file says how fresh it is: its content, settled or not, age, and why it may be stale."""

from __future__ import annotations

import os
import time

import pytest

from holctl.render import render
from holsrv import errors
from holsrv.answers.cache import AnswerCache
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT


def test_a_fresh_answer_says_its_content_settled_and_not_stale_and_renders_no_extra_line(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    for reply in (daemon.call(m.Diagnostics(str(path))), daemon.call(m.Hover(str(path), 5, 3)),
                  daemon.call(m.Search(str(path), '"ADD_COMM"'))):
        fresh = reply.freshness
        assert fresh is not None, type(reply).__name__
        assert fresh.content_hash == daemon.call(m.Diagnostics(str(path))).content_hash
        assert fresh.settled and not fresh.may_be_stale and fresh.reasons == [] and fresh.age_s >= 0
        assert "MAY BE STALE" not in render(reply)


def test_the_expected_hash_matching_the_file_is_not_stale(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    content = daemon.call(m.Diagnostics(str(path))).content_hash
    reply = daemon.call(m.Hover(str(path), 5, 3, expect_hash=content[:12]))
    assert reply.freshness is not None and not reply.freshness.may_be_stale
    assert reply.freshness.expected_hash == content[:12]


def test_an_expected_hash_the_file_no_longer_has_says_file_changed_since(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    old = daemon.call(m.Diagnostics(str(path))).content_hash
    path.write_text(GOOD_SCRIPT + "\n(* edited *)\n")
    reply = daemon.call(m.GoalState(str(path), 7, 3, expect_hash=old[:12]))
    fresh = reply.freshness
    assert fresh is not None and fresh.may_be_stale and fresh.content_hash == reply.content_hash != old
    assert fresh.reasons[0].startswith(f"file changed since: you expected content {old[:12]}, but the file now has")
    assert f"MAY BE STALE: file changed since: you expected content {old[:12]}" in render(reply)


def test_a_rebuilt_dependency_marks_every_answer_possibly_stale(daemon, write_script):
    lib = write_script("Theory mylib\n\nTheorem t: T\nProof\n  simp[]\nQED\n", name="mylibScript.sml")
    objs = lib.parent / ".hol" / "objs"
    objs.mkdir(parents=True)
    built = objs / "mylibTheory.uo"
    built.write_text("built")
    path = write_script(GOOD_SCRIPT.replace("Ancestors arithmetic", "Ancestors arithmetic mylib"))
    assert daemon.call(m.Diagnostics(str(path))).verdict == "OK"
    later = time.time_ns() + 5_000_000_000
    os.utime(built, ns=(later, later))  # Holmake wrote it again
    reply = daemon.call(m.Hover(str(path), 5, 3))
    assert reply.freshness is not None and reply.freshness.may_be_stale
    assert reply.freshness.reasons[0].startswith("STALE: mylibTheory changed after this HOL server loaded it")


def test_a_cached_answer_is_as_old_as_its_computation():
    now = [100.0]
    cache = AnswerCache(8, clock=lambda: now[0])
    cache.put("k", "answer")
    now[0] += 42.5
    assert cache.get("k") == "answer" and cache.age("k") == 42.5
    assert cache.age("other") == 0.0


def test_a_cached_diagnostics_answer_carries_its_age(daemon, write_script):
    now = [1000.0]
    daemon.daemon.cache.clock = lambda: now[0]  # the cache's own clock: ages without waiting
    path = write_script(GOOD_SCRIPT)
    first = daemon.call(m.Diagnostics(str(path)))
    now[0] += 30.0
    second = daemon.call(m.Diagnostics(str(path)))
    assert not first.cached and second.cached
    assert first.freshness is not None and first.freshness.age_s == 0.0
    assert second.freshness is not None and second.freshness.age_s == 30.0 and second.freshness.settled


@pytest.mark.parametrize("bad", ["xyz", "abc", "0123456789ABCDEF"])
def test_an_expected_hash_that_is_no_hash_is_refused(daemon, write_script, bad):
    path = write_script(GOOD_SCRIPT)
    with pytest.raises(errors.BadRequest, match="is not a content hash"):
        daemon.call(m.Hover(str(path), 5, 3, expect_hash=bad))


def test_an_answer_before_the_file_settled_says_it_is_not_settled(daemon, write_script):
    path = write_script(GOOD_SCRIPT.replace("gen_tac >> simp[]", "gen_tac >> LOOP_TAC"))
    reply = daemon.call(m.Diagnostics(str(path), wait=0.0))
    assert not reply.complete
    assert reply.freshness is not None and not reply.freshness.settled
    symbols = daemon.call(m.DocumentSymbol(str(path)))
    assert symbols.freshness is not None and symbols.freshness.content_hash == reply.content_hash
