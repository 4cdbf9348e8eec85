"""Answers that tell one story: each answer's state and sentences agree with each
other, with the file's diagnostics at the same content hash, and with status.

Through the daemon and the fake HOL.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import ClientServerConfig
from test_trials import LINE, SCRIPT  # the fake walks rpt strip_tac, then the `simp[]` line

from holctl.render import render
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT


def line_of(text: str, needle: str, nth: int = 1) -> int:
    found = [n for n, line in enumerate(text.splitlines(), 1) if needle in line]
    return found[nth - 1]


def settled(daemon, path) -> m.DiagnosticsResult:
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    assert result.complete, result.headline
    return result


# -- try on a blocked file, try's freshness -------------------------------------


def test_try_on_a_blocked_file_answers_blocked_as_goal_state_does_not_an_error(daemon, write_script):
    text = SCRIPT.replace("Ancestors arithmetic", "Ancestors arithmetic mylib")
    path = write_script(text)
    assert settled(daemon, path).verdict == "BLOCKED"
    view = daemon.call(m.GoalState(str(path), LINE))
    assert view.state == "blocked"
    result = daemon.call(m.Try(str(path), LINE, ["simp[]", "rw[]"]), timeout=60)
    assert result.blocked is not None and "mylibTheory" in result.blocked.message
    assert [c.state for c in result.candidates] == ["not_tried", "not_tried"]
    assert "blocked" in result.message and "mylibTheory" in result.message
    shown = render(result)
    assert "No candidate was tried: The file is blocked" in shown
    assert "proved at this point" not in shown  # no goals before, which is not a proof


def test_a_try_answer_carries_its_freshness_as_every_answer_about_a_file(daemon, write_script):
    path = write_script(SCRIPT)
    checked = settled(daemon, path)
    result = daemon.call(m.Try(str(path), LINE, ["simp[]"]), timeout=60)
    assert result.freshness is not None
    assert (result.freshness.content_hash, result.freshness.may_be_stale) == (checked.content_hash, False)
    assert result.freshness.settled


# -- status: its tally agrees with the verdict, and a trial leaves no trace -----


def test_status_counts_a_cheated_proof_as_cheated_beside_the_verdict_cheats(daemon, write_script):
    path = write_script(GOOD_SCRIPT.replace("gen_tac >> simp[]", "gen_tac >> cheat"))
    assert settled(daemon, path).verdict == "CHEATS"
    [row] = daemon.call(m.Status()).sessions
    assert (row.tally.proved, row.tally.cheated, row.tally.total) == (1, 1, 2)
    assert "2/2 proved" not in render(daemon.call(m.Status()))


def test_a_trial_s_failed_candidate_never_shows_in_the_file_s_tally(daemon_factory, write_script, monkeypatch):
    # A long debounce keeps the first candidate's `failed` in the server's file state
    # while the second candidate's text waits to be compiled.
    monkeypatch.setenv("FAKE_HOL_DEBOUNCE_MS", "3000")
    daemon = daemon_factory()
    path = write_script(SCRIPT)
    assert settled(daemon, path).verdict == "OK"
    second = threading.Event()
    box: dict = {}

    def trial():
        def progress(frame: m.Progress) -> None:
            if frame.message.startswith("trying 2 of 2"):
                second.set()
        with daemon.client("agent") as client:
            box["result"] = client.call(
                m.Try(str(path), LINE, ['FAIL_TAC "nope"', "simp[]"], timeout=20, progress=True), 120,
                on_progress=progress)

    thread = threading.Thread(target=trial)
    thread.start()
    try:
        assert second.wait(60), "the trial never reached its second candidate"
        during = daemon.call(m.Status(), name="other").sessions[0].tally
    finally:
        thread.join(120)
    assert [c.state for c in box["result"].candidates] == ["failed", "proved"]
    assert during.failed == 0 and during.proved == 2, during
    after = daemon.call(m.Status()).sessions[0].tally
    assert after.failed == 0


# -- goalState on a cheated proof -----------------------------------------------


def test_the_qed_line_of_a_cheated_proof_is_not_proved_here_and_no_sentence_says_it_is_proved(
        daemon, write_script):
    text = GOOD_SCRIPT.replace("gen_tac >> simp[]", "gen_tac >> cheat")
    path = write_script(text)
    checked = settled(daemon, path)
    assert checked.verdict == "CHEATS"
    view = daemon.call(m.GoalState(str(path), line_of(text, "QED")))
    assert view.content_hash == checked.content_hash
    assert (view.state, view.goals) == ("cheated", [])
    cheat = line_of(text, "cheat")
    assert view.message.startswith(f"This is the QED line: add0 is not proved: it uses cheat at line {cheat}.")
    assert "prove the goal" not in view.message and "proved at this point" not in render(view)
    assert "only because of cheat" in view.message


# -- a try candidate's hint names a line goalState accepts ----------------------


def test_a_candidate_s_hint_never_sends_goal_state_to_the_theorem_line(daemon, write_script):
    from holsrv.answers.trials import candidates, placement

    # HOL puts a proof's failure (`unsolved goals`) on the theorem's name: the Theorem line.
    span = placement.span(SCRIPT, LINE, None)
    trial = span.put(SCRIPT, "conj_tac")
    theorem_line = line_of(SCRIPT, "Theorem swap")
    out = m.TryCandidate(
        tactic="conj_tac", state="failed", error="proof failed: Exception raised at Tactical.TAC_PROOF: unsolved goals",
        failed_range=m.Range(theorem_line, 9, theorem_line, 13),
    )
    hinted = candidates.hinted(out, candidates.hint_lines(trial, span))
    assert f"ask goalState at line {LINE} " in hinted.hint
    # goalState takes that line in the file (the Theorem line it refuses as not in a proof).
    path = write_script(SCRIPT)
    settled(daemon, path)
    assert daemon.call(m.GoalState(str(path), LINE)).state != "not_in_proof"
    assert daemon.call(m.GoalState(str(path), theorem_line)).state == "not_in_proof"
    # A failure in the body before the candidate keeps its own line.
    body = line_of(SCRIPT, "rpt strip_tac >>")
    out.failed_range = m.Range(body, 3, body, 16)
    assert f"at line {body} " in candidates.hinted(out, candidates.hint_lines(trial, span)).hint


# -- after a compile error, one story --------------------------------------------

HEAD = "Theory demo\nAncestors arithmetic\n\n"
LATER = """\
Theorem b:
  !p q. p /\\ q ==> q /\\ p
Proof
  rpt strip_tac >> simp[]
QED

Theorem c:
  !x. x ==> x
Proof
  rpt strip_tac >> simp[]
QED
"""


def test_a_theorem_hol_proved_past_an_earlier_error_gets_one_story_from_diagnostics_and_goal_state(
        daemon, write_script):
    # A Definition without End swallows b (fh_recover); HOL carries on and proves c.
    text = HEAD + "Definition f_def:\n  f x = x + 1\n\n" + LATER
    path = write_script(text)
    checked = settled(daemon, path)
    assert checked.verdict != "OK"
    first = min(d.range.line for d in checked.diagnostics if d.severity == "error")
    assert first == line_of(text, "Definition f_def")
    c = next(p for p in checked.proofs if p.name == "c")
    assert c.status == "proved"  # HOL's word
    story = f"earlier error at line {first}"
    assert story in c.detail and "Holmake stops at that first error" in c.detail
    view = daemon.call(m.GoalState(str(path), line_of(text, "rpt strip_tac", 2)))
    assert view.content_hash == checked.content_hash
    assert view.state == "proved_here", view
    assert story in view.message and "Holmake stops at that first error" in view.message
    assert "does not count this proof proved" not in view.message


def test_what_a_declaration_leaves_unfinished_is_not_put_on_the_next_theorem_s_layout(daemon, write_script):
    # `Termination` without `End`: HOL reports `expected 'End'` on the next declaration's keyword.
    text = HEAD + "Definition f_def:\n  f x = x + 1\nTermination\n  simp[]\n\n" + LATER
    path = write_script(text)
    checked = settled(daemon, path)
    [error] = [d for d in checked.diagnostics if d.severity == "error"]
    assert "expected 'End'" in error.message and error.range.line == line_of(text, "Theorem b")
    assert checked.verdict != "OK"
    b = next(p for p in checked.proofs if p.name == "b")
    assert b.status == "proved" and b.hint == "", b  # b's layout is fine: the Definition is not
    assert f"earlier error at line {error.range.line}" in b.detail
    view = daemon.call(m.GoalState(str(path), line_of(text, "rpt strip_tac")))
    assert view.state == "proved_here" and "Holmake stops at that first error" in view.message


def test_the_hint_of_an_error_stays_on_the_theorem_that_holds_it(daemon, write_script):
    text = HEAD + "Theorem a:\n  !n:num. n + 0 = n\nProof\n  gen_tac >> rw[foo\nQED\n\n" + LATER
    path = write_script(text)
    checked = settled(daemon, path)
    by_name = {p.name: p for p in checked.proofs}
    assert by_name["a"].status == "parse_error" and "syntax error" in by_name["a"].hint
    assert [by_name[n].hint for n in ("b", "c")] == ["", ""]
    assert all("Holmake stops at that first error" in by_name[n].detail for n in ("b", "c"))


# -- smaller: status names a HOL build that does not name itself ------------------


def test_status_names_the_hol_build_when_its_server_info_says_unknown(daemon_factory, write_script, monkeypatch,
                                                                      tmp_path):
    from test_doctor import git_tree

    tree = git_tree(tmp_path / "HOL")
    monkeypatch.setenv("FAKE_HOL_VERSION", "unknown")  # as the recorded servers say
    monkeypatch.setenv("FAKE_HOL_HOLDIR", str(tree))
    daemon = daemon_factory()
    settled(daemon, write_script(SCRIPT))
    [row] = daemon.call(m.Status()).sessions
    assert row.hol_version == "unknown"
    assert row.hol_build.startswith(f"HOLDIR {tree}, hol ") and row.hol_build.endswith("git trindemossen-2")
    assert f"HOL: unknown (HOLDIR {tree}, hol " in render(daemon.call(m.Status()))


# -- smaller: an eval of several expressions says that only the last is printed ----


def test_an_eval_of_several_expressions_says_only_the_last_value_is_printed(daemon, write_script):
    path = write_script(SCRIPT)
    result = daemon.call(m.Eval(str(path), "1 + 2;\n3 + 4;\n5 + 6;"))
    assert result.errors == [] and result.output.strip() == "11"  # HOL prints nothing for a bare expression
    [note] = [w for w in result.warnings if "only the last expression's value is printed" in w]
    assert "lines 1, 2" in note and "PolyML.print" in note
    alone = daemon.call(m.Eval(str(path), "val x = 1;\nx + 1;"))
    assert alone.output.strip() == "2" and not any("only the last" in w for w in alone.warnings)


# -- smaller: the editor bridge's initialize names HOL before a server runs -------


async def bridged(daemon, progress: bool):
    """`holctl lsp` on `daemon`'s socket and a pygls client, with its initialize result."""
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "--no-start", "lsp"],
        server_env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent.parent)},
    )
    client = await config.start()
    window = types.WindowClientCapabilities(work_done_progress=True) if progress else None
    result = await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(window=window), client_info=types.ClientInfo(name="pytest-lsp")))
    return client, result


async def initialized_info(daemon):
    """The serverInfo of `holctl lsp`'s initialize reply to a fresh editor."""
    client, result = await bridged(daemon, progress=False)
    await client.shutdown_session()
    await client.stop()
    return result.server_info


@pytest.mark.asyncio
async def test_the_editor_bridge_sends_progress_only_to_an_editor_that_declares_work_done_progress(
        daemon, write_script):
    path = write_script(SCRIPT)
    for declared in (False, True):
        await _opened_with_progress(daemon, path, declared)


async def _opened_with_progress(daemon, path, declared: bool) -> None:
    from test_editor import until

    client, _ = await bridged(daemon, progress=declared)
    try:
        uri = path.as_uri()
        text = SCRIPT + f"\n(* {declared} *)\n"  # a new text each time: HOL compiles it, with progress
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="holscript", version=1, text=text)))
        await until(client, "textDocument/publishDiagnostics", lambda: uri in client.diagnostics,
                    "the editor's diagnostics")
        if declared:
            await until(client, "$/progress", lambda: any(client.progress_reports.values()), "progress")
        else:
            assert client.progress_reports == {}
    finally:
        await client.shutdown_session()
        await client.stop()


@pytest.mark.asyncio
async def test_the_editor_bridge_initialize_carries_hol_s_server_info_before_a_server_runs(daemon, write_script):
    info = await initialized_info(daemon)
    assert info is not None and (info.name, info.version) == ("HOL4", "unknown")
    # Once a server has run, its own serverInfo, though none runs any more.
    path = write_script(SCRIPT)
    await asyncio.to_thread(settled, daemon, path)
    await asyncio.to_thread(daemon.call, m.Stop(str(path)))
    info = await initialized_info(daemon)
    assert info is not None and (info.name, info.version) == ("HOL4", "fake")


def test_a_goal_diff_answer_carries_its_freshness_too(daemon, write_script):
    path = write_script(SCRIPT)
    checked = settled(daemon, path)
    result = daemon.call(m.GoalDiff(str(path), LINE - 1, LINE))
    assert result.freshness is not None and result.freshness.content_hash == checked.content_hash


def test_the_qed_line_of_a_proof_proved_past_an_earlier_error_is_proved_here_with_the_same_story(
        daemon, write_script):
    text = HEAD + "Definition f_def:\n  f x = x + 1\n\n" + LATER
    path = write_script(text)
    checked = settled(daemon, path)
    view = daemon.call(m.GoalState(str(path), line_of(text, "QED", 2)))
    assert view.content_hash == checked.content_hash
    assert (view.state, view.goals) == ("proved_here", []), view
    assert "Holmake stops at that first error" in view.message and "diagnostics reports c proved" in view.message


def test_status_counts_a_parse_recovered_proof_as_a_parse_error_beside_the_verdict_errors(daemon, write_script):
    text = HEAD + "Theorem a:\n  !n:num. n + 0 = n\nProof\n  gen_tac >> rw[foo\nQED\n\n" + LATER
    path = write_script(text)
    assert settled(daemon, path).verdict == "ERRORS"
    [row] = daemon.call(m.Status()).sessions
    assert (row.tally.proved, row.tally.parse_error, row.tally.total) == (2, 1, 3)
