"""Goal states asked for ahead: once a verdict settles with a failure located on its step, the
goal state there is in the cache before the agent asks, within bounds, and never ahead of a real call."""

from __future__ import annotations

import msgspec
from test_cached_answers import _at_once, files_read_long_ago

from holctl.render import render
from holsrv.answers import cache
from holsrv.rpc import messages as m

from conftest import FAILING_SCRIPT, goal_lines, wait_until

# Four proofs that fail at a known step, each after a step that takes the fake's walk a while.
FOUR_FAILING = "Theory demo\nAncestors arithmetic\n" + "".join(
    f"""
Theorem wrong{n}:
  !p q. p /\\ q ==> q
Proof
  rpt strip_tac >> SLOW_TAC {{slow}} >>
  FAIL_TAC "nope {n}"
QED
""" for n in range(4))


def located(verdict: m.DiagnosticsResult) -> list[m.Diagnostic]:
    """The proof failures the verdict shows on their failing steps."""
    found = [d for d in verdict.diagnostics if d.message.startswith("proof failed") and not d.note]
    assert found, verdict.diagnostics
    return found


def answer_of(reply: m.GoalStateResult) -> m.GoalStateResult:
    """What the answer says, not which call or server got it."""
    return msgspec.structs.replace(reply, server=m.ServerNote(pid=0, start=""), cached=False, freshness=None)


async def _both_cached(daemon, path, at: tuple[int, int]) -> bool:
    """Whether the whole line's and the column's goal states at `at` are in the daemon's cache."""
    session = daemon.daemon.pool.sessions.get(path.resolve())
    if session is None or session.content_hash is None:
        return False
    return all(cache.goal_key(session, session.content_hash, line, column) in daemon.daemon.answers.cache
               for line, column in ((at[0], None), at))


def test_a_failing_proofs_goal_state_is_in_the_cache_once_its_verdict_settles(
    daemon_factory, write_script, monkeypatch, tmp_path
):
    path = write_script(FAILING_SCRIPT)
    # The same questions of a daemon that asks nothing ahead: what the answers must be.
    plain = daemon_factory(prefetch_per_pass=0)
    [failure] = located(plain.call(m.Diagnostics(str(path), wait=20)))
    at = (failure.range.line, failure.range.col)
    expected = [plain.call(m.GoalState(str(path), at[0])), plain.call(m.GoalState(str(path), *at))]
    assert not any(e.cached for e in expected) and expected[0].state == "failed"
    plain.stop()

    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    daemon = daemon_factory()
    assert located(daemon.call(m.Diagnostics(str(path), wait=20))) == [failure]
    # The line is walked before its first tactic and after its last; the column once.
    wait_until(lambda: len(goal_lines(log)) == 3, timeout=30, what="the goal states asked ahead")
    # On the wire is not yet answered: wait (bounded) until both answers are in the cache.
    wait_until(lambda: daemon.run(_both_cached(daemon, path, at)), timeout=30, what="the answers asked ahead, cached")
    got = [daemon.call(m.GoalState(str(path), at[0])), daemon.call(m.GoalState(str(path), *at))]
    assert all(g.cached for g in got)
    assert goal_lines(log) == [at[0]] * 3  # HOL was asked nothing more
    assert [answer_of(g) for g in got] == [answer_of(e) for e in expected]
    # The walks' own diagnostics change no verdict: it is still answered from the cache.
    assert daemon.call(m.Diagnostics(str(path), wait=20)).cached


def test_at_most_prefetch_per_pass_failures_are_asked_ahead(daemon_factory, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(FOUR_FAILING.format(slow=1))
    daemon = daemon_factory(prefetch_per_pass=2)
    failures = located(daemon.call(m.Diagnostics(str(path), wait=30)))
    assert len(failures) == 4
    wait_until(lambda: len(goal_lines(log)) == 6, timeout=30, what="two failures' goal states asked ahead")
    # Asking for the verdict again asks nothing more ahead: one plan per text.
    assert located(daemon.call(m.Diagnostics(str(path), wait=30))) == failures
    last = failures[-1].range
    assert not daemon.call(m.GoalState(str(path), last.line)).cached  # beyond the bound: asked now
    assert sorted(set(goal_lines(log))) == sorted({f.range.line for f in failures[:2]} | {last.line})


def test_a_state_asked_ahead_is_not_served_for_a_changed_text(daemon_factory, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(FAILING_SCRIPT)
    daemon = daemon_factory()
    [failure] = located(daemon.call(m.Diagnostics(str(path), wait=20)))
    wait_until(lambda: len(goal_lines(log)) == 3, timeout=30, what="the goal states asked ahead")
    path.write_text(FAILING_SCRIPT.replace('"nope"', '"still nope"'), encoding="utf-8")
    after = daemon.call(m.GoalState(str(path), failure.range.line))
    assert not after.cached and after.state == "failed" and "still nope" in after.error
    assert len(goal_lines(log)) > 3  # asked of HOL for the new text


def test_a_changed_text_drops_the_walks_still_to_be_asked_ahead(daemon_factory, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    text = FOUR_FAILING.format(slow=1500)
    path = write_script(text)
    daemon = daemon_factory(prefetch_per_pass=3)
    assert len(located(daemon.call(m.Diagnostics(str(path), wait=60)))) == 4
    wait_until(lambda: len(goal_lines(log)) >= 1, timeout=30, what="the first walk asked ahead")
    path.write_text(text.replace('FAIL_TAC "nope', 'ALL_TAC (* was "nope'), encoding="utf-8")
    assert daemon.call(m.Diagnostics(str(path), wait=60)).verdict == "OK"
    wait_until(lambda: daemon.daemon.answers.prefetches.running == 0, timeout=30, what="the prefetch to end")
    # Of the nine walks planned (three failures, three walks each), those not yet sent were dropped.
    assert len(goal_lines(log)) <= 2, goal_lines(log)


def test_a_real_call_is_not_kept_behind_the_walks_asked_ahead(daemon_factory, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    # Each walk to a failing step passes a step the fake's walk takes 2.5 s over.
    text = FOUR_FAILING.format(slow=2500) + "\nTheorem fine:\n  !n:num. n + 0 = n\nProof\n  gen_tac >> simp[]\nQED\n"
    path = write_script(text)
    daemon = daemon_factory(prefetch_per_pass=3, request_timeout_s=60.0)
    daemon.call(m.Diagnostics(str(path), wait=60))
    wait_until(lambda: len(goal_lines(log)) >= 1, timeout=30, what="the first walk asked ahead")
    fine = text.split("\n").index("  gen_tac >> simp[]") + 1
    assert daemon.call(m.GoalState(str(path), fine, wait=60)).state in ("goals", "proved_here")
    # The call's two walks (before the line, after it) went to HOL behind at most the one walk
    # already under way, and none asked ahead came between them.
    sent = goal_lines(log)
    first = sent.index(fine)
    assert first <= 1 and sent[first:first + 2] == [fine, fine], sent


def test_status_counts_the_walks_asked_ahead_and_the_calls_their_answers_served(
    daemon_factory, write_script, monkeypatch, tmp_path
):
    monkeypatch.setenv("FAKE_HOL_LOG", str(tmp_path / "wire.jsonl"))
    path = write_script(FAILING_SCRIPT)
    daemon = daemon_factory()
    [failure] = located(daemon.call(m.Diagnostics(str(path), wait=20)))
    prefetches = daemon.daemon.answers.prefetches
    wait_until(lambda: prefetches.asked == 3 and prefetches.running == 0, timeout=30,
               what="the goal states asked ahead")
    status = daemon.call(m.Status())
    assert (status.prefetch_asked, status.prefetch_hits) == (3, 0)
    files_read_long_ago(daemon)
    line, column = failure.range.line, failure.range.col
    # One answered the ordinary way, one at once (the fast path), twice.
    assert daemon.run(daemon.daemon.dispatch.answer(m.GoalState(str(path), line), "test")).cached
    for _ in range(2):
        assert daemon.run(_at_once(daemon, m.GoalState(str(path), line, column))).cached
    assert not daemon.call(m.GoalState(str(path), line + 1)).cached  # asked of HOL now: no hit
    status = daemon.call(m.Status())
    # Each answer asked ahead counts once, however often it is asked for again.
    assert (status.prefetch_asked, status.prefetch_hits) == (3, 2)
    assert "prefetch: 3 goal-state walks asked ahead, 2 hits" in render(status)
