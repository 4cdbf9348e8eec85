"""Every tool through the daemon, with the behaviours agents rely on."""

from __future__ import annotations

import json
import os
import time

import pytest

from holsrv import errors
from holsrv.disk.files import content_hash
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, client_messages, wait_until, waiting_call

UNICODE = """\
Theory uni
Ancestors arithmetic

Theorem imp_self:
  !p:bool. p ==> p
Proof
  (* ∀ ⇒ ‘’ ∧ 𝔸 *) rpt strip_tac >> FAIL_TAC "stuck"
QED
"""


def session_state(daemon, path) -> str:
    """The state `status` shows for `path`'s server ("" when it has none)."""
    states = [s.state for s in daemon.call(m.Status()).sessions if s.file == str(path.resolve())]
    return states[0] if states else ""


def session_tally(daemon, path) -> m.Tally:
    """The pool's tally `status` shows for `path`'s server."""
    [session] = [s for s in daemon.call(m.Status()).sessions if s.file == str(path.resolve())]
    return session.tally


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), 1) if needle in line)


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_positions_convert_both_ways_under_either_encoding(daemon_factory, write_script, encoding):
    daemon = daemon_factory(position_encodings=(encoding,))
    path = write_script(UNICODE, "uniScript.sml")
    line = line_of(UNICODE, "FAIL_TAC")
    text = UNICODE.split("\n")[line - 1]
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    [diag] = result.diagnostics
    assert (diag.range.line, diag.range.col) == (line, text.index("FAIL_TAC") + 1)
    assert diag.range.end_col == text.index('"stuck"') + len('"stuck"') + 1
    goal = daemon.call(m.GoalState(str(path), line, text.index("FAIL_TAC") + 1))
    assert (goal.state, goal.step, [g.goal for g in goal.goals]) == ("goals", 1, ["p"])
    assert goal.goals[0].asms == ["p"]


def test_cheats_make_the_verdict_never_ok_and_are_listed_with_their_theorem(daemon, write_script):
    text = GOOD_SCRIPT.replace("gen_tac >> simp[]", "cheat").replace(
        "rpt strip_tac >> simp[]", 'simp[] (* cheat *) >> print "cheat"'
    )
    result = daemon.call(m.Diagnostics(str(write_script(text)), wait=20))
    assert result.verdict == "CHEATS"
    assert result.headline == "CHEATS: 1 proof uses cheat (add0)"
    assert [(c.theorem, c.line) for c in result.cheats] == [("add0", line_of(text, "cheat"))]
    # The pool calls a cheated proof proved; the answer must not.
    assert (result.tally.proved, result.tally.cheated, result.tally.total) == (1, 1, 2)
    assert [(p.name, p.status) for p in result.proofs] == [("add0", "cheated"), ("conj_comm", "proved")]
    assert "uses cheat" in result.proofs[0].detail


def test_hover_on_a_theorem_that_is_not_proved_says_so(daemon, write_script):
    text = GOOD_SCRIPT.replace("gen_tac >> simp[]", "cheat") + (
        '\nTheorem wrong:\n  !p q. p /\\ q ==> q\nProof\n  FAIL_TAC "nope"\nQED\n'
    )
    path = write_script(text)
    daemon.call(m.Diagnostics(str(path), wait=20))
    at = {name: (line_of(text, f"Theorem {name}"), len("Theorem ") + 2) for name in ("add0", "conj_comm", "wrong")}
    statuses = {name: daemon.call(m.Hover(str(path), *pos)).proof_status for name, pos in at.items()}
    assert statuses["add0"] == "add0: its proof uses cheat: the statement is not proved"
    assert statuses["wrong"].startswith("wrong: its proof FAILED")
    assert statuses["conj_comm"] == ""


def test_cache_answers_a_second_client_without_touching_hol(daemon, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(GOOD_SCRIPT)
    line = line_of(GOOD_SCRIPT, "gen_tac")
    first = daemon.call(m.Diagnostics(str(path), wait=20), name="agent-1")
    daemon.call(m.GoalState(str(path), line, 3), name="agent-1")
    sent_before = client_messages(log)
    second = daemon.call(m.Diagnostics(str(path), wait=20), name="agent-2")
    goal = daemon.call(m.GoalState(str(path), line, 3), name="agent-2")
    assert second.cached and goal.cached and not first.cached
    assert second.verdict == first.verdict and goal.goals
    assert client_messages(log) == sent_before, "the cached answers went to HOL"
    status = daemon.call(m.Status())
    assert status.cache_hits == 2 and status.cache_misses == 2


def test_an_edit_invalidates_the_cache_and_the_whole_text_is_sent_once(daemon, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    daemon.call(m.Diagnostics(str(path), wait=20))
    assert [msg["method"] for msg in client_messages(log) if "didChange" in msg.get("method", "")] == []
    edited = GOOD_SCRIPT.replace("simp[]\nQED\n\nTheorem conj", "rw[]\nQED\n\nTheorem conj")
    path.write_text(edited)
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert not after.cached and after.verdict == "OK"
    changes = [msg for msg in client_messages(log) if msg.get("method") == "textDocument/didChange"]
    assert [c["params"]["contentChanges"] for c in changes] == [[{"text": edited}]]


def test_census_prunes_a_deleted_theorem_from_the_tally(daemon, write_script):
    path = write_script(GOOD_SCRIPT + '\nTheorem gone:\n  F\nProof\n  FAIL_TAC "x"\nQED\n')
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "FAILED"
    path.write_text(GOOD_SCRIPT)
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert after.verdict == "OK" and [p.name for p in after.proofs] == ["add0", "conj_comm"]
    assert after.diagnostics == []


def test_blocked_file_reports_modules_then_retry_compile_unblocks_it(daemon, write_script, tmp_path):
    text = GOOD_SCRIPT.replace("Ancestors arithmetic", "Ancestors arithmetic mylib")
    path = write_script(text)
    blocked = daemon.call(m.Diagnostics(str(path), wait=20))
    assert blocked.verdict == "BLOCKED" and blocked.blocked.modules == ["arithmeticTheory", "mylibTheory"]
    assert "retryCompile" in blocked.headline
    assert "mylibTheory" in blocked.headline and "arithmeticTheory" not in blocked.headline
    assert (blocked.tally.proved, blocked.tally.unchecked) == (0, 2)
    assert {p.detail for p in blocked.proofs} == {"not checked: the file is blocked"}
    goal = daemon.call(m.GoalState(str(path), line_of(text, "gen_tac"), 3))
    assert goal.state == "blocked" and "mylibTheory" in goal.message
    still = daemon.call(m.RetryCompile(str(path)))
    assert still.was_blocked and still.message.startswith("Still blocked") and "mylibTheory" in still.message
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "BLOCKED"
    (tmp_path / "mylibTheory.uo").write_text("built")
    unblocked = daemon.call(m.RetryCompile(str(path)))
    assert unblocked.was_blocked and unblocked.message.startswith("Unblocked")
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert after.verdict == "OK" and not any(w.startswith("REBUILT") for w in after.warnings)
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "OK"


def test_retry_compile_on_a_file_that_is_not_blocked_changes_nothing(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    reply = daemon.call(m.RetryCompile(str(path)))
    assert not reply.was_blocked and "restart" in reply.message
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert after.verdict == "OK" and after.tally.unchecked == 0


def test_retry_compile_with_no_server_running_answers_without_starting_one(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    reply = daemon.call(m.RetryCompile(str(path)))
    assert not reply.was_blocked and reply.message.startswith("Not blocked: nothing to retry.")
    assert "diagnostics" in reply.message and reply.server.pid == 0 and reply.server.start == "none"
    assert daemon.call(m.Status()).sessions == [], "retryCompile started a HOL server only to refuse"


def test_probably_looping_names_the_proof_its_line_and_the_footprint(daemon_factory, write_script):
    daemon = daemon_factory(looping_after_s=0.3)
    text = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")
    result = daemon.call(m.Diagnostics(str(write_script(text)), wait=20))
    assert result.verdict == "INCOMPLETE"
    [warning] = result.warnings
    assert warning.startswith(f"PROBABLY LOOPING: proof conj_comm (line {line_of(text, 'conj_comm')})")
    assert "server footprint" in warning and "Edit that proof" in warning
    # There is no cancel, and a restart runs the same loop again: never advise either.
    assert "Cancel" not in warning and "restarting the server would only run the same loop again" in warning
    assert any("conj_comm" in item and "slowest finished proof" in item for item in result.outstanding)


def test_a_proof_far_slower_than_its_fast_neighbours_is_reported_early(daemon_factory, write_script):
    daemon = daemon_factory(slow_after_s=0.5, slow_ratio=5)  # looping_after_s stays 180 s
    text = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")
    result = daemon.call(m.Diagnostics(str(write_script(text)), wait=60))
    # Answered as soon as only the slow proof was left, not after the whole wait.
    assert result.verdict == "INCOMPLETE" and result.headline.startswith("INCOMPLETE: everything else is done")
    assert "conj_comm (line 10" in result.headline and "Edit that proof" in result.headline
    [warning] = result.warnings
    assert warning.startswith("SLOW: proof conj_comm (line 10) has been checking for")
    assert "slowest of the 1 finished proofs" in warning and "restarting would run it again" in warning


def test_hover_definition_and_completion_answer_at_a_position(daemon, write_script):
    text = GOOD_SCRIPT + "\nTheorem use_add0:\n  !n:num. n + 0 = n\nProof\n  ACCEPT_TAC add0\nQED\n"
    path = write_script(text)
    line = line_of(text, "ACCEPT_TAC add0")
    col = text.split("\n")[line - 1].index("add0") + 1
    hover = daemon.call(m.Hover(str(path), line, col))
    assert hover.text and "add0" in hover.text
    definition = daemon.call(m.Definition(str(path), line, col))
    assert [(t.path, t.range.line) for t in definition.targets] == [(str(path), line_of(text, "Theorem add0"))]
    completion = daemon.call(m.Completion(str(path), line, col + 3))
    assert "add0" in [item.label for item in completion.items]
    assert len(completion.items) <= 50


def test_completion_lists_at_most_50_items_and_counts_all_that_hol_offered(daemon, write_script):
    lemmas = "".join(f"\nTheorem zlem{i}:\n  T\nProof\n  simp[]\nQED\n" for i in range(60))
    text = GOOD_SCRIPT + lemmas + "\nTheorem use_zlem:\n  T\nProof\n  ACCEPT_TAC zlem\nQED\n"
    path = write_script(text)
    line = line_of(text, "ACCEPT_TAC zlem")
    completion = daemon.call(m.Completion(str(path), line, text.split("\n")[line - 1].index("zlem") + 5))
    assert completion.total == 60
    assert len(completion.items) == 50
    assert len({item.label for item in completion.items}) == 50
    assert all(item.label.startswith("zlem") and item.kind == "theorem" for item in completion.items)


def test_a_goal_state_past_the_end_is_refused_even_while_the_server_is_starting(
    daemon_factory, write_script, monkeypatch
):
    monkeypatch.setenv("FAKE_HOL_STARTUP_MS", "15000")
    daemon = daemon_factory(stop_timeout_s=0.5)  # stopping a server mid-start waits this twice
    path = write_script(GOOD_SCRIPT)
    with pytest.raises(errors.PositionOutOfRange, match="out of range"):
        daemon.call(m.GoalState(str(path), 500, 1, wait=0))
    # Asked after the refusal, so the server was starting during it too.
    inside = daemon.call(m.GoalState(str(path), line_of(GOOD_SCRIPT, "gen_tac"), 3, wait=0))
    assert inside.state == "starting"


def test_references_is_reported_unsupported_in_plain_words(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    reply = daemon.call(m.References(str(path), line_of(GOOD_SCRIPT, "Theorem add0"), 9))
    assert not reply.supported and "does not support references" in reply.message


def test_document_symbol_outlines_a_file_that_does_not_compile(daemon, write_script):
    text = GOOD_SCRIPT.replace("Ancestors arithmetic", "Ancestors nosuchthing")
    reply = daemon.call(m.DocumentSymbol(str(write_script(text))))
    names = [(s.name, s.kind, s.line) for s in reply.symbols]
    assert ("add0", "theorem", line_of(text, "Theorem add0")) in names
    assert ("conj_comm", "theorem", line_of(text, "Theorem conj_comm")) in names


def test_workspace_symbol_finds_this_files_and_stored_theorems(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    reply = daemon.call(m.WorkspaceSymbol(str(path), "conj_c"))
    assert [(s.name, s.theory) for s in reply.symbols][:1] == [("conj_comm", "this file")]
    stored = daemon.call(m.WorkspaceSymbol(str(path), "ADD_COMM"))
    assert any(s.name == "ADD_COMM" and s.theory == "arithmeticTheory" for s in stored.symbols)
    with pytest.raises(errors.BadRequest, match="at least 2 characters"):
        daemon.call(m.WorkspaceSymbol(str(path), "a"))


def test_eval_returns_printed_values_errors_and_stderr(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    printed = daemon.call(m.Eval(str(path), "PolyML.print (1 + 2);"))
    assert printed.output == "3\n" and printed.errors == [] and not printed.timed_out
    assert daemon.call(m.Eval(str(path), "val x = 1 + 2;")).output == ""
    bad = daemon.call(m.Eval(str(path), "val z = 1 + true;"))
    assert bad.errors and bad.errors[0].startswith("1:")
    said = daemon.call(m.Eval(str(path), 'print "hello from eval\\n";'))
    assert said.output == "" and "hello from eval" in said.stderr


def test_eval_that_runs_too_long_is_cancelled_and_says_so(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    reply = daemon.call(m.Eval(str(path), "while true do ();", timeout=0.5))
    assert reply.timed_out and any("timed out after 0.5s" in e for e in reply.errors)
    assert daemon.call(m.Eval(str(path), "PolyML.print 7;")).output == "7\n"


def test_hol_crash_during_a_request_is_an_error_with_the_stderr_tail(daemon, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_CRASH_ON", "textDocument/hover")
    path = write_script(GOOD_SCRIPT)
    with pytest.raises(errors.ServerDied) as caught:
        daemon.call(m.Hover(str(path), 7, 3))
    assert "Fatal: fake crash" in caught.value.detail


def test_a_broken_frame_from_hol_is_a_server_death_not_a_daemon_crash(daemon, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_BROKEN_FRAME_ON", "textDocument/hover")
    path = write_script(GOOD_SCRIPT)
    with pytest.raises(errors.ServerDied, match="broke the protocol"):
        daemon.call(m.Hover(str(path), 7, 3))
    monkeypatch.delenv("FAKE_HOL_BROKEN_FRAME_ON")
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "OK"


def test_a_hung_hol_server_times_out_the_request_with_a_clear_error(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_HANG_ON", "textDocument/hover")
    daemon = daemon_factory(request_timeout_s=0.5, stop_timeout_s=0.3)  # a hung server stops slowly
    path = write_script(GOOD_SCRIPT)
    with pytest.raises(errors.ServerTimeout, match="did not answer textDocument/hover"):
        daemon.call(m.Hover(str(path), 7, 3))


def test_a_desync_report_makes_the_daemon_resend_the_whole_text(daemon, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    [session] = daemon.daemon.pool.sessions.values()

    async def report_desync() -> None:
        session._notified("$/hol/desync", {"uri": session.uri, "version": 1, "message": "test"})
        await session.wait_change(5)

    daemon.run(report_desync())
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    changes = [msg for msg in client_messages(log) if msg.get("method") == "textDocument/didChange"]
    assert [c["params"]["contentChanges"] for c in changes] == [[{"text": GOOD_SCRIPT}]]
    assert after.verdict == "OK"


def test_a_flood_of_diagnostics_is_bounded_and_counted(daemon, write_script):
    body = "".join(f"\nTheorem t{i}:\n  T\nProof\n  not_a_tactic\nQED\n" for i in range(230))
    result = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT + body)), wait=30))
    # Each of the 230 does not compile, listed error or not.
    assert result.verdict == "FAILED" and result.tally.failed == 230 and result.tally.proved == 2
    assert len(result.diagnostics) == 200 and result.diagnostics_omitted == 30


TWO_PROOFS = """\
Theory two
Ancestors arithmetic

Theorem one:
  T
Proof
  simp[]
QED

Theorem two:
  T
Proof
  LOOP_TAC
QED
"""


def test_an_edit_running_from_one_proof_into_the_next_rechecks_both(daemon, write_script, monkeypatch):
    # This fake takes any edit that starts in a body as tactic-only: without the
    # daemon's workaround, `two` would keep its old (looping) check forever.
    monkeypatch.setenv("FAKE_HOL_FAST_PATH_FROM_START", "1")
    monkeypatch.setenv("FAKE_HOL_WORKERS", "2")
    # Verdicts of other proofs keep arriving (every ~200 ms) while the daemon
    # waits for HOL to act on its interim text; they must not be taken for that.
    # They come after `two`, so `two` has a worker (and loops on it) first.
    noisy = "".join(f"\nTheorem slow{i}:\n  T\nProof\n  SLOW_TAC 400 >> simp[]\nQED\n" for i in range(12))
    text = TWO_PROOFS + noisy
    path = write_script(text, "twoScript.sml")
    daemon.call(m.Diagnostics(str(path), wait=0))  # starts its server
    # The session's state, not message text: a server still starting says no
    # "has not finished" either.
    wait_until(lambda: session_state(daemon, path) in ("checking", "settled"), timeout=20,
               what="the first compile to finish")
    before = daemon.call(m.Diagnostics(str(path), wait=0))
    assert before.verdict == "INCOMPLETE" and before.tally.checking
    path.write_text(text.replace("  simp[]\nQED\n\nTheorem two:\n  T\nProof\n  LOOP_TAC",
                                       "  rw[]\nQED\n\nTheorem two:\n  T\nProof\n  simp[]"))
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert after.verdict == "OK", after.headline
    assert after.server.pid == before.server.pid


def test_a_server_above_the_soft_footprint_is_reported_large_and_left_running(daemon_factory, write_script):
    daemon = daemon_factory(soft_footprint_mb=1, memory_sample_s=0.05)
    result = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20))
    assert result.verdict == "OK"
    assert any(w.startswith("SERVER LARGE: this file's HOL server uses") for w in result.warnings)
    [session] = daemon.call(m.Status()).sessions
    assert session.large and session.pid == result.server.pid


def test_a_failure_moved_to_its_step_after_a_cached_answer_is_not_served_stale(
    daemon_factory, write_script, monkeypatch, tmp_path
):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    monkeypatch.setenv("FAKE_HOL_RELOCATE_MS", "3000")
    daemon = daemon_factory(quiet_s=0.3)
    text = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", 'rpt strip_tac >> FAIL_TAC "x"')
    path = write_script(text)
    early = daemon.call(m.Diagnostics(str(path), wait=20))
    assert [d.range.line for d in early.diagnostics] == [line_of(text, "Theorem conj_comm")]
    wait_until(lambda: _publishes(log) >= 2, what="the failure to move to its step")
    late = daemon.call(m.Diagnostics(str(path), wait=20))
    assert not late.cached
    assert [d.range.line for d in late.diagnostics] == [line_of(text, "FAIL_TAC")]
    assert daemon.call(m.Diagnostics(str(path), wait=20)).cached


def test_lookups_during_a_compile_say_their_answer_may_be_incomplete(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_DECL_MS", "3000")
    daemon = daemon_factory(lookup_wait_s=0.3)
    path = write_script(GOOD_SCRIPT)
    hover = daemon.call(m.Hover(str(path), line_of(GOOD_SCRIPT, "gen_tac"), 3))
    assert "still compiling" in hover.note


def _publishes(log) -> int:
    if not log.exists():
        return 0
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return sum(
        1 for e in entries
        if e.get("dir") == "S->C" and e["msg"].get("method") == "textDocument/publishDiagnostics"
        and e["msg"]["params"]["diagnostics"]
    )


def test_a_proof_whose_body_does_not_compile_fails_with_the_compile_error(daemon, write_script):
    text = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "rpt strip_tac >> not_a_tactic")
    result = daemon.call(m.Diagnostics(str(write_script(text)), wait=20))
    assert result.verdict == "FAILED" and "conj_comm" in result.headline
    [failed] = [p for p in result.proofs if p.status != "proved"]
    assert (failed.name, failed.status) == ("conj_comm", "failed")
    assert "does not compile: Value or constructor (not_a_tactic) has not been declared" in failed.detail
    assert result.tally.failed == 1 and result.tally.proved == 1 and result.tally.unchecked == 0


def test_a_proof_left_suspended_without_a_resume_is_not_ok(daemon, write_script):
    text = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", 'rpt strip_tac >> suspend "later"')
    result = daemon.call(m.Diagnostics(str(write_script(text)), wait=20))
    assert result.verdict == "SUSPENDED" and "conj_comm" in result.headline


def test_cheat_tac_and_mk_thm_count_as_cheats(daemon, write_script):
    text = GOOD_SCRIPT.replace("gen_tac >> simp[]", "rw[] >> CHEAT_TAC")
    result = daemon.call(m.Diagnostics(str(write_script(text)), wait=20))
    assert result.verdict == "CHEATS" and [c.theorem for c in result.cheats] == ["add0"]


def test_a_file_with_no_proofs_is_ok_and_says_there_are_none(daemon, write_script):
    result = daemon.call(m.Diagnostics(str(write_script("Theory empty\n\nval x = 1;\n")), wait=20))
    assert result.verdict == "OK" and "no proofs in this file" in result.headline


def test_when_only_a_looping_proof_is_left_the_answer_comes_without_the_full_wait(daemon_factory, write_script):
    daemon = daemon_factory(looping_after_s=0.5)
    text = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")
    # Were the whole 600 s waited, the client would give up after 60 s and the test fail.
    result = daemon.call(m.Diagnostics(str(write_script(text)), wait=600), timeout=60)
    assert result.verdict == "INCOMPLETE" and "probably looping" in result.headline
    assert "Edit that proof" in result.headline and "conj_comm (line" in result.headline


def test_an_edit_during_a_wait_gets_an_answer_about_the_newer_text(daemon, write_script):
    # A proof that never ends keeps the first call waiting until the edit,
    # however slowly a loaded machine gets there.
    looping = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")
    path = write_script(looping)
    daemon.call(m.Diagnostics(str(path), wait=0))  # a warm server: the next call reads the file once
    waiter, outcome = waiting_call(daemon, m.Diagnostics(str(path), wait=30))
    failing = GOOD_SCRIPT.replace("gen_tac >> simp[]", 'FAIL_TAC "changed"')
    path.write_text(failing)
    newer = daemon.call(m.Diagnostics(str(path), wait=30))
    waiter.join(40)
    first = outcome["reply"]
    assert first.verdict == newer.verdict == "FAILED"
    assert first.content_hash == newer.content_hash != content_hash(looping.encode())
    assert any("changed on disk during this call" in w for w in first.warnings)
    path.write_text(GOOD_SCRIPT)
    assert daemon.call(m.Diagnostics(str(path), wait=30)).verdict == "OK"


def test_hols_own_warnings_reach_the_agent(daemon, write_script, tmp_path):
    (tmp_path / "Holmakefile").write_text("HOLHEAP = myheap\n")
    result = daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=20))
    assert any(w.startswith("HOL says:") and "falling back" in w for w in result.warnings), result.warnings


def test_an_incomplete_headline_names_the_proofs_that_already_failed(daemon, write_script):
    text = GOOD_SCRIPT.replace("gen_tac >> simp[]", 'FAIL_TAC "no"').replace("rpt strip_tac >> simp[]", "LOOP_TAC")
    path = write_script(text)
    daemon.call(m.Diagnostics(str(path), wait=0))  # starts its server
    wait_until(lambda: session_tally(daemon, path).failed == 1, timeout=20, what="add0's failure verdict")
    result = daemon.call(m.Diagnostics(str(path), wait=0.5))
    assert result.verdict == "INCOMPLETE" and "Already failed: add0." in result.headline


def test_an_ancestor_rebuilt_after_the_server_started_marks_answers_until_a_restart(daemon, write_script, tmp_path):
    text = GOOD_SCRIPT.replace("Ancestors arithmetic", "Ancestors arithmetic mylib")
    built = tmp_path / "mylibTheory.uo"
    built.write_text("built")
    os.utime(built, (time.time() - 60, time.time() - 60))
    path = write_script(text)
    first = daemon.call(m.Diagnostics(str(path), wait=20))
    assert first.verdict == "OK" and not any(w.startswith("REBUILT") for w in first.warnings)
    os.utime(built)  # Holmake rebuilt it just now
    again = daemon.call(m.Diagnostics(str(path), wait=20))
    assert not again.cached
    # A fresh server is on its way in the background (test_replacement.py has the rest).
    assert any(w.startswith("STALE: ") and "mylibTheory" in w for w in again.warnings)
    daemon.call(m.Restart(str(path)))
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert not any(w.startswith(("REBUILT", "STALE")) for w in after.warnings)


def test_a_goal_state_walk_past_a_failing_step_leaves_the_next_verdict_unchanged(daemon_factory, write_script):
    # Nothing asked ahead: a prefetch finishing after the walk below would cache the verdict again.
    daemon = daemon_factory(prefetch_per_pass=0)
    text = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", 'rpt strip_tac >> FAIL_TAC "nope"')
    path = write_script(text)
    before = daemon.call(m.Diagnostics(str(path), wait=20))
    assert before.verdict == "FAILED"
    qed = [i for i, line in enumerate(text.split("\n"), 1) if line == "QED"][-1]
    walked = daemon.call(m.GoalState(str(path), qed, 1))
    assert walked.error  # HOL now also lists this failure among the file's diagnostics
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert not after.cached  # HOL did publish the walk's diagnostic
    assert after.headline == before.headline
    assert [d.message for d in after.diagnostics] == [d.message for d in before.diagnostics]


THREE_PROOFS = "Theory three\nAncestors arithmetic\n\nTheorem zero:\n  T\nProof\n  simp[]\nQED\n\n" + \
    TWO_PROOFS.split("\n\n", 1)[1]


def dropped_after(log, version: int) -> set[str]:
    """The proofs the fake announced `cheated` once it had text `version` or later."""
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    names, current = set(), 0
    for e in entries:
        msg = e["msg"]
        if e["dir"] == "C->S" and msg.get("method") == "textDocument/didChange":
            current = msg["params"]["textDocument"]["version"]
        elif e["dir"] == "S->C" and msg.get("method") == "$/proofStates" and current >= version:
            names |= {s["name"] for s in msg["params"]["states"] if s["status"] == "cheated"}
    return names


def test_an_edit_running_from_one_proof_into_the_next_leaves_the_proof_above_checked(
    daemon, write_script, monkeypatch, tmp_path
):
    # HOL (the fake, at least) counts the blank lines after a QED as part of that
    # theorem: the two-step edit must not mark them, or `zero` is dropped too, and
    # is never checked again if the real text interrupts the interim pass in time.
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(THREE_PROOFS, "threeScript.sml")
    wait_until(lambda: daemon.call(m.Diagnostics(str(path), wait=1)).tally.proved == 2, 60,
               "zero and one proved, two looping")
    path.write_text(THREE_PROOFS.replace("  simp[]\nQED\n\nTheorem two:\n  T\nProof\n  LOOP_TAC",
                                         "  rw[]\nQED\n\nTheorem two:\n  T\nProof\n  simp[]"))
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert after.verdict == "OK", after.headline
    assert dropped_after(log, 2) == {"one", "two"}
