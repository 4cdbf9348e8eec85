"""try and goalDiff through the daemon, against the fake HOL: candidates in the server's
copy of the text only, other clients never answered from it, the file untouched."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from holctl.render import render
from holsrv import errors
from holsrv.disk.files import content_hash
from holsrv.rpc import messages as m

# The fake walks rpt strip_tac, then the tactic on the `simp[]` line (see
# tests/fake_hol/README.md, "Goal-state walk"); LOOP_TAC loops in the pool
# and in the walk, FAIL_TAC fails in both.
SCRIPT = """\
Theory demo
Ancestors arithmetic

Theorem swap:
  !p q. p /\\ q ==> q /\\ p
Proof
  rpt strip_tac >>
  simp[]
QED

Theorem other:
  !x. x ==> x
Proof
  rpt strip_tac >> simp[]
QED
"""
LINE = 8  # `  simp[]` in swap
# The fake's pool judges by markers, not by its walk: DIVERGE_TAC keeps it from
# calling the split candidate's proof proved, as a real HOL would (goals are left).
CANDIDATES = ["simp[]", 'FAIL_TAC "nope"', "LOOP_TAC", "conj_tac >> DIVERGE_TAC"]
# Each candidate's limit: the looping one is cut off after it, so it is what
# the test spends on it; the others take a debounce and a walk.
TIMEOUT = 5.0


def server_text(daemon, path) -> bytes | None:
    async def text():
        return daemon.daemon.pool.sessions[path].data
    return daemon.run(text())


def settled(daemon, path) -> m.DiagnosticsResult:
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    assert result.complete, result.headline
    return result


def test_each_candidate_is_answered_with_its_goals_verdict_time_and_diff(daemon, write_script):
    path = write_script(SCRIPT)
    assert settled(daemon, path).verdict == "OK"
    on_disk = path.read_bytes()
    result = daemon.call(m.Try(str(path), LINE, CANDIDATES, timeout=TIMEOUT), timeout=120)
    assert (result.theorem, result.replaced) == ("swap", "simp[]")
    assert [(g.asms, g.goal) for g in result.before] == [(["p", "q"], "q ∧ p")]
    proves, fails, loops, splits = result.candidates
    assert (proves.state, proves.proof.status, proves.goals) == ("proved", "proved", [])
    assert proves.diff.closed == result.before and proves.diff.summary == "all 1 goal closed"
    assert (fails.state, fails.proof.status) == ("failed", "failed")
    assert "FAIL_TAC" in fails.error and (fails.failed_range.line, fails.failed_range.col) == (LINE, 3)
    assert loops.state == "timed_out" and loops.time_s >= TIMEOUT and "Cut off" in loops.message
    assert "split the proof" in loops.hint and fails.hint == ""  # `FAIL_TAC "nope"`: of no class
    assert splits.state == "goals"
    assert [(g.asms, g.goal) for g in splits.goals] == [(["p", "q"], "q"), (["p", "q"], "p")]
    [change] = splits.diff.changed
    assert (change.goal_before, change.goal_after, splits.diff.added) == ("q ∧ p", "q", [splits.goals[1]])
    assert all(c.time_s > 0 for c in result.candidates) and not result.changed_on_disk
    # The file is as it was, the server has its text again, and its answers are the file's.
    assert path.read_bytes() == on_disk and server_text(daemon, path) == on_disk
    after = settled(daemon, path)
    assert (after.verdict, after.content_hash, after.tally.checking) == ("OK", content_hash(on_disk), 0)
    assert {p.name: p.status for p in after.proofs} == {"swap": "proved", "other": "proved"}


def test_a_candidate_re_checks_only_its_own_proof(daemon, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(SCRIPT)
    settled(daemon, path)
    seen = len(log.read_text().splitlines())
    daemon.call(m.Try(str(path), LINE, ["simp[]", 'FAIL_TAC "no"']), timeout=60)
    settled(daemon, path)
    later = [json.loads(line)["msg"] for line in log.read_text().splitlines()[seen:]]
    announced = {(s["name"], s["status"]) for msg in later if msg.get("method") == "$/proofStates"
                 for s in msg["params"]["states"]}
    # HOL's fast path for an edit inside one body (docs/protocol.md#what-an-edit-does-to-the-pool):
    # `other` keeps its check, only re-announced with its unchanged verdict (as the recorded server does).
    assert {name for name, _ in announced} == {"swap", "other"}
    assert {status for name, status in announced if name == "other"} == {"proved"}


def test_a_column_replaces_the_line_from_there_and_keeps_what_comes_before(daemon, write_script):
    path = write_script(SCRIPT)
    line = 14  # `  rpt strip_tac >> simp[]` in other
    result = daemon.call(m.Try(str(path), line, ["metis_tac[]", 'FAIL_TAC "no"'], column=20), timeout=60)
    assert (result.theorem, result.replaced) == ("other", "simp[]")
    assert [(g.asms, g.goal) for g in result.before] == [(["x"], "x")]
    assert [c.state for c in result.candidates] == ["proved", "failed"]
    # The last candidate's failed walk is not an error of the file.
    after = settled(daemon, path)
    assert (after.verdict, after.diagnostics) == ("OK", []), after.diagnostics


def test_the_whole_line_is_replaced_but_its_trailing_combinator_kept(daemon, write_script):
    path = write_script(SCRIPT)
    result = daemon.call(m.Try(str(path), 7, ["strip_tac"]), timeout=60)  # `  rpt strip_tac >>`
    assert result.replaced == "rpt strip_tac"
    # The goals are those after the candidate; the line's `>>` still joins it
    # to `simp[]`, which proves the theorem: the pool's verdict is the state.
    [candidate] = result.candidates
    assert (candidate.state, candidate.proof.status) == ("proved", "proved")
    assert [(g.asms, g.goal) for g in candidate.goals] == [([], "∀q. p ∧ q ⇒ q ∧ p")]
    assert "proves the theorem" in candidate.message and "left" not in candidate.message


def test_a_second_client_waits_for_the_trial_and_is_answered_about_the_file(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    looping = threading.Event()
    box: dict = {}

    def trial():
        def progress(frame: m.Progress) -> None:
            if "LOOP_TAC" in frame.message:
                looping.set()
        with daemon.client("agent") as client:
            box["result"] = client.call(m.Try(str(path), LINE, ["simp[]", "LOOP_TAC"], timeout=TIMEOUT, progress=True),
                                        120, on_progress=progress)

    thread = threading.Thread(target=trial)
    thread.start()
    try:
        assert looping.wait(60), "the trial never reached its looping candidate"
        other = daemon.call(m.Diagnostics(str(path), wait=20), name="other")
    finally:
        thread.join(120)
    assert other.content_hash == content_hash(path.read_bytes()) and other.verdict == "OK"
    assert not any("changed on disk" in w for w in other.warnings)
    # Nobody put the file's text back under the trial: the loop ran to its limit.
    assert [c.state for c in box["result"].candidates] == ["proved", "timed_out"]


def test_a_call_whose_wait_ends_during_a_trial_is_told_so_with_its_code(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    looping = threading.Event()

    def trial():
        with daemon.client("agent") as client:
            client.call(m.Try(str(path), LINE, ["LOOP_TAC"], timeout=TIMEOUT, progress=True), 120,
                        on_progress=lambda frame: looping.set())

    thread = threading.Thread(target=trial)
    thread.start()
    try:
        assert looping.wait(60), "the trial never started its candidate"
        with pytest.raises(errors.TrialRunning, match="a trial \\(try\\) is running") as caught:
            daemon.call(m.GoalState(str(path), LINE, wait=0.5), name="other")
    finally:
        thread.join(120)
    assert caught.value.code == "trial_running" and "candidate 1 of 1" in str(caught.value)


def test_a_call_in_flight_finishes_on_the_file_s_text_before_a_trial_starts(daemon, write_script):
    text = SCRIPT + "\nTheorem slow:\n  !y. y ==> y\nProof\n  rpt strip_tac >> SLOW_TAC 1500 >> simp[]\nQED\n"
    path = write_script(text)
    settled(daemon, path)
    path.write_text(text.replace("SLOW_TAC 1500", "SLOW_TAC 1501"), encoding="utf-8")  # re-check the slow proof
    waiting = threading.Event()
    box: dict = {}

    def diagnostics():
        # Settled once the slow proof is done; were the looping candidate put
        # in under it, it would wait until its own deadline, during the loop.
        with daemon.client("other") as client:
            box["result"] = client.call(m.Diagnostics(str(path), wait=6, progress=True), 60,
                                        on_progress=lambda frame: waiting.set())

    thread = threading.Thread(target=diagnostics)
    thread.start()
    try:
        assert waiting.wait(30), "diagnostics never reported waiting"
        trial = daemon.call(m.Try(str(path), LINE, ["LOOP_TAC"], timeout=8), timeout=120, name="agent")
    finally:
        thread.join(60)
    other = box["result"]
    assert other.content_hash == content_hash(path.read_bytes()), other.warnings
    assert other.verdict == "OK" and other.tally.checking == 0
    assert trial.candidates[0].state == "timed_out"


def test_a_trial_on_a_file_changed_on_disk_during_it_says_so_and_leaves_the_new_text(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    edited = SCRIPT.replace("!x. x ==> x", "!x y. x ==> x")

    def edit_at_the_second(frame: m.Progress) -> None:
        if frame.message.startswith("trying 2 of"):
            path.write_text(edited, encoding="utf-8")

    with daemon.client("agent") as client:
        result = client.call(m.Try(str(path), LINE, ["simp[]", "conj_tac"], progress=True), 120,
                             on_progress=edit_at_the_second)
    assert result.changed_on_disk and "changed on disk during the trial" in result.message
    assert server_text(daemon, path) == edited.encode()
    assert settled(daemon, path).content_hash == content_hash(edited.encode())


def test_more_candidates_than_the_bound_is_refused_with_its_code(daemon_factory, write_script):
    daemon = daemon_factory(max_try_candidates=2)
    path = write_script(SCRIPT)
    with pytest.raises(errors.TooManyCandidates, match="at most 2 candidate tactics") as caught:
        daemon.call(m.Try(str(path), LINE, ["simp[]", "rw[]", "metis_tac[]"]))
    assert caught.value.code == "too_many_candidates"


def test_a_line_outside_any_proof_is_refused(daemon, write_script):
    path = write_script(SCRIPT)
    with pytest.raises(errors.BadRequest, match="not a line of tactics"):
        daemon.call(m.Try(str(path), 1, ["simp[]"]))  # `Theory demo` (a declaration's line: its whole proof)


def test_goal_diff_between_two_lines_names_the_hypotheses_added_and_the_goal_split(daemon, write_script):
    text = SCRIPT.replace("  simp[]\nQED", "  conj_tac\nQED", 1)
    path = write_script(text)
    result = daemon.call(m.GoalDiff(str(path), 7, LINE), timeout=60)
    assert result.theorem == "swap" and [g.goal for g in result.after] == ["q", "p"]
    [change] = result.diff.changed
    assert (change.hyps_added, change.goal_before, change.goal_after) == (["p", "q"], "∀p q. p ∧ q ⇒ q ∧ p", "q")
    assert [g.goal for g in result.diff.added] == ["p"] and result.diff.closed == []


def test_goal_diff_with_no_change_says_so_once(daemon, write_script):
    path = write_script(SCRIPT)
    result = daemon.call(m.GoalDiff(str(path), LINE, LINE, column1=3, column2=3), timeout=60)
    assert result.diff.summary == "no change to the goals"
    assert render(result).count("no change to the goals") == 1


def test_goal_diff_across_two_proofs_is_refused(daemon, write_script):
    path = write_script(SCRIPT)
    with pytest.raises(errors.BadRequest, match="two positions of one proof"):
        daemon.call(m.GoalDiff(str(path), LINE, 14))


# -- candidates that do not compile, proved states, looping candidates ----------------


def test_a_candidate_with_an_undeclared_name_is_failed_with_hol_s_message_at_its_place_in_the_candidate(
        daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    result = daemon.call(m.Try(str(path), LINE, ["simp[NO_SUCH_THM]", "simp[]"], timeout=TIMEOUT), timeout=120)
    unbound, good = result.candidates
    # HOL leaves such a proof cheated, with no check and no verdict (candidate-unbound-name.jsonl).
    assert unbound.state == "failed", unbound.message
    assert unbound.error == "Value or constructor (NO_SUCH_THM) has not been declared"
    assert unbound.candidate_range == m.Range(1, 6, 1, 17)  # `NO_SUCH_THM` in `simp[NO_SUCH_THM]`
    assert unbound.failed_range == m.Range(LINE, 8, LINE, 19)
    assert "does not compile" in unbound.message and "1:6 of the candidate" in unbound.message
    assert good.state == "proved", good.message
    assert "error at 8:8-8:19 (1:6-1:17 of the candidate): Value or constructor" in render(result)
    assert settled(daemon, path).verdict == "OK"


def test_a_candidate_with_a_parse_error_hol_recovers_from_is_failed_not_proved(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    result = daemon.call(m.Try(str(path), LINE, ["simp[ADD_COMM"], timeout=TIMEOUT), timeout=120)
    [candidate] = result.candidates
    # HOL reports `expected close delimiter` on the QED as a warning and proves the proof anyway.
    assert candidate.state == "failed", candidate.message
    assert candidate.error == "expected close delimiter" and "Holmake fails on it" in candidate.message
    # The QED after the candidate: its own range is clamped to the candidate's end.
    assert candidate.candidate_range == m.Range(1, 14, 1, 14)


def test_a_candidate_whose_proof_is_proved_is_headed_proved_even_with_goals_after_it(daemon, write_script):
    path = write_script(SCRIPT)
    result = daemon.call(m.Try(str(path), 7, ["strip_tac"]), timeout=60)  # `  rpt strip_tac >>`, then simp[]
    [candidate] = result.candidates
    assert (candidate.state, candidate.proof.status) == ("proved", "proved")
    shown = render(result)
    assert "[1] strip_tac: PROVED" in shown and "closed by the tactics that follow" in shown
    assert "GOALS" not in shown and "no change to the goals" not in shown


def test_a_looping_candidate_does_not_spend_the_next_one_s_time(daemon_factory, write_script, monkeypatch):
    # HOL lets go of a looping check about 2 s after the next text (candidate-loops.jsonl):
    # longer than the candidates' own limit here.
    monkeypatch.setenv("FAKE_HOL_STOP_MS", "3000")
    daemon = daemon_factory()
    path = write_script(SCRIPT)
    settled(daemon, path)
    result = daemon.call(m.Try(str(path), LINE, ["LOOP_TAC", "simp[]"], timeout=2.0), timeout=120)
    loops, good = result.candidates
    assert loops.state == "timed_out" and "HOL may still be stopping its check" in loops.message
    assert good.state == "proved", good.message
    assert good.taken_s >= 3.0 and good.time_s < 2.0
    assert "to let go of the check before it" in result.message
    # HOL took the next candidate, so it did let go of the loop before this answer.
    assert "may still be stopping" not in result.message
    assert settled(daemon, path).verdict == "OK"


def test_candidates_after_one_hol_never_lets_go_of_are_tried_on_a_fresh_server(
        daemon_factory, write_script, monkeypatch):
    # Stopping the loop takes HOL longer than letgo_s: the server is a runaway, replaced,
    # and the candidates it did not take are tried on the fresh one, each in full.
    monkeypatch.setenv("FAKE_HOL_STOP_MS", "12000")
    daemon = daemon_factory(lookup_wait_s=30.0, letgo_s=3.0)
    path = write_script(SCRIPT)
    old = settled(daemon, path).server.pid
    result = daemon.call(m.Try(str(path), LINE, ["LOOP_TAC", "simp[]", "rw[]"], timeout=1.0), timeout=120)
    assert [c.state for c in result.candidates] == ["timed_out", "proved", "proved"], result.candidates
    assert result.server.pid != old
    assert "HOL did not start compiling the text it was sent" in result.server.note, result.server
    assert "replaced by a fresh one" in result.server.note
    assert settled(daemon, path).verdict == "OK"


def test_a_server_a_trial_bloats_is_replaced_in_the_background_and_the_answer_says_so(daemon_factory, write_script):
    # GROW_TAC grows 50 MB/s while it checks, and the fake keeps the heap, as Poly/ML does.
    daemon = daemon_factory(soft_footprint_mb=100, memory_budget_mb=0, memory_sample_s=60.0)
    path = write_script(SCRIPT)
    settled(daemon, path)
    old = daemon.daemon.pool.sessions[path]
    result = daemon.call(m.Try(str(path), LINE, ["GROW_TAC"], timeout=2.5), timeout=120)
    assert result.candidates[0].state == "timed_out"
    assert result.replacing_server and "a fresh server is starting in the background" in result.message, result.message

    async def switched():
        rep = daemon.daemon.pool.replacer.running.get(path)
        if rep is not None and rep.task is not None:
            await asyncio.wait_for(asyncio.shield(rep.task), 60)
        return daemon.daemon.pool.sessions[path]

    new = daemon.run(switched(), timeout=90)
    assert new is not old and new.alive
    after = settled(daemon, path)
    assert after.verdict == "OK" and (new.footprint_mb() or 0) < 100


def test_a_failed_candidate_carries_the_hint_of_hol_s_message_beside_it(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    result = daemon.call(m.Try(str(path), LINE, ["NO_TAC", "simp[NO_SUCH_THM]", "simp[]"], timeout=TIMEOUT),
                         timeout=120)
    no_tac, unbound, good = result.candidates
    assert no_tac.state == "failed" and "FAIL_TAC: NO_TAC" in no_tac.proof.detail
    assert no_tac.hint == "the tactic does not apply to this goal: try a `simp[]` or `gvs[]` step first"
    assert unbound.error == "Value or constructor (NO_SUCH_THM) has not been declared"  # HOL's words stay
    assert "`search NO_SUCH_THM`" in unbound.hint
    assert good.state == "proved" and good.hint == ""
    assert "    hint: `NO_SUCH_THM` is not defined here" in render(result)
