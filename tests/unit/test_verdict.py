"""The diagnostics verdict, built from what a server said: OK only when Holmake would build the file.

Pure: a `FileState` fed notifications (the recorded real server's where there
is a recording), the text, and a clock; no daemon, no process.
"""

from __future__ import annotations

import os

import pytest
from fake_hol import transcript_replay as tr

from holsrv.config.settings import Settings
from holsrv.rpc import messages as m
from holsrv.text import stepping, textinfo
from holsrv.verdict import compileerrors, verdict
from holsrv.verdict.filestate import FileState
from holsrv.verdict.outstanding import MAX_OUTSTANDING_PROOFS

from conftest import stepped

SETTINGS = Settings(quiet_s=0.3, quiet_clean_s=0.2)
SERVER = m.ServerNote(pid=1)
URI = "file:///p/demoScript.sml"


def answer(file: FileState, text: str, now: float = 100.0, walk_errors=()) -> m.DiagnosticsResult:
    return stepping.run(verdict.build_steps(file, text, "hash", "utf-8", now, SETTINGS, SERVER, None, 1.0, walk_errors))


def replayed(name: str) -> tuple[FileState, str]:
    """The file state after the server's notifications about the opened text, up to
    the client's next request in a recorded real session."""
    path = os.path.join(tr.find_transcripts(), name + ".jsonl")
    if not os.path.exists(path):
        pytest.skip("recorded transcripts are not available here")
    messages = [(r["dir"], r["t"], r["msg"]) for r in tr.load(path) if r["dir"] in ("C->S", "S->C")]
    start = next(i for i, (way, _, msg) in enumerate(messages)
                 if way == "C->S" and msg.get("method") == "textDocument/didOpen")
    opened = messages[start][2]["params"]["textDocument"]
    file = FileState(opened["uri"])
    file.sent(opened["version"], opened["text"], 0.0)
    for way, t, msg in messages[start + 1:]:
        if way == "C->S" and "method" in msg:
            break
        if way == "S->C" and "method" in msg:
            file.apply(msg["method"], msg.get("params") or {}, t)
    return file, opened["text"]


def test_a_recorded_parse_recovery_that_hol_calls_proved_is_an_error_not_ok():
    # The real server reported `expected close delimiter` at severity 2 and the
    # proof `proved`; Holmake fails this script.
    file, text = replayed("parse-recovery")
    result = answer(file, text)
    assert result.verdict == "ERRORS", result.headline
    assert result.headline == "ERRORS: 1 parse error"
    [diag] = result.diagnostics
    assert (diag.severity, diag.message, diag.range.line) == ("error", "expected close delimiter", 8)
    assert "Holmake fails" in diag.note
    [proof] = result.proofs
    assert (proof.name, proof.status) == ("length_rev", "parse_error")
    assert "line 8" in proof.detail
    assert (result.tally.proved, result.tally.parse_error) == (0, 1)


def test_a_recorded_clean_session_with_a_cheat_counts_it_cheated_not_proved():
    file, text = replayed("checkproofs-utf8-session")
    result = answer(file, text)
    # The pool reported `later_work` (a `cheat`) proved, like the others.
    assert file.proofs["later_work"].status == "proved"
    assert {p.name: p.status for p in result.proofs} == {
        "add0": "proved", "conj_comm": "proved", "bad": "failed", "later_work": "cheated", "double_2": "proved",
    }
    assert (result.tally.proved, result.tally.cheated, result.tally.failed) == (3, 1, 1)


SCRIPT = """\
Theory demo
Ancestors arithmetic

Theorem good:
  T
Proof
  simp[]
QED

Theorem bad:
  1 + 1 = 3
Proof
  rpt strip_tac >> DECIDE_TAC
QED
"""


def settled_with(diagnostics: list[dict], bad: str = "failed") -> FileState:
    file = FileState(URI)
    file.sent(1, SCRIPT, 0.0)
    states = [{"pos": {"line": 3, "character": 0}, "name": "good", "status": "proved"},
              {"pos": {"line": 9, "character": 0}, "name": "bad", "status": bad,
               "detail": "\nException raised at Tactical.FAIL_TAC: NO_TAC\n"}]
    file.apply("$/proofStates", {"uri": URI, "states": states}, 1.0)
    file.apply("$/compileCompleted", {"uri": URI, "version": 1, "declared": ["demo", "good", "bad"]}, 1.0)
    file.apply("textDocument/publishDiagnostics", {"uri": URI, "version": 1, "diagnostics": diagnostics}, 1.0)
    return file


def diag(line0: int, start: int, end: int, message: str, severity: int = 1) -> dict:
    return {"range": {"start": {"line": line0, "character": start}, "end": {"line": line0, "character": end}},
            "severity": severity, "message": message}


FAILURE_AT_STEP = diag(12, 19, 29, "proof failed: Exception raised at Tactical.FAIL_TAC: NO_TAC")
WALK = diag(12, 19, 29, "Tactic `DECIDE_TAC` failed to apply")


def test_a_failed_goal_state_walk_changes_neither_the_verdict_nor_the_counts():
    before = answer(settled_with([FAILURE_AT_STEP]), SCRIPT)
    after = answer(settled_with([FAILURE_AT_STEP, WALK]), SCRIPT, walk_errors=[WALK["message"]])
    assert before.headline == after.headline == "FAILED: 1 of 2 proofs failed (bad)"
    assert after.diagnostics == before.diagnostics


def test_a_failure_still_on_the_theorems_name_is_marked_provisional_until_settled():
    on_name = diag(9, 8, 11, "proof failed: Exception raised at Tactical.FAIL_TAC: NO_TAC")
    file = settled_with([on_name])
    moving = answer(file, SCRIPT, now=1.1)  # within the quiet period: HOL may still move it
    assert not moving.complete and moving.diagnostics[0].note.startswith("provisional location")
    final = answer(file, SCRIPT, now=5.0)
    assert final.complete and "call goalState on lines 12-14" in final.diagnostics[0].note
    moved = answer(settled_with([FAILURE_AT_STEP]), SCRIPT, now=1.1)
    assert moved.diagnostics[0].note == ""


def test_a_diverged_warning_is_not_taken_for_a_parse_error():
    warning = diag(9, 8, 11, "proof produced 1 extra hypothesis, so what elaboration stood in for this "
                   "theorem was not what the proof gives", severity=2)
    result = answer(settled_with([warning], bad="diverged"), SCRIPT)
    assert result.diagnostics[0].severity == "warning" and result.diagnostics[0].note == ""
    assert result.verdict == "FAILED"


@pytest.mark.parametrize("message", ["expected close delimiter", "expected QED", "unclosed quotation"])
def test_parse_recoveries_turn_an_otherwise_proved_file_into_errors(message):
    file = settled_with([diag(13, 0, 3, message, severity=2)], bad="proved")
    result = answer(file, SCRIPT)
    assert result.verdict == "ERRORS" and result.headline == "ERRORS: 1 parse error"
    assert [(p.name, p.status) for p in result.proofs] == [("good", "proved"), ("bad", "parse_error")]


def test_a_file_of_thousands_of_proofs_is_answered_in_bounded_steps_with_the_same_answer():
    count = 10_000
    text = "Theory big\n\n" + "".join(f"Theorem t{i}:\n  T\nProof\n  simp[]\nQED\n\n" for i in range(count))
    file = FileState(URI)
    file.sent(1, text, 0.0)
    states = [{"name": f"t{i}", "status": "checking" if i % 2 else "proved", "pos": {"line": 2 + 6 * i}}
              for i in range(count)]
    file.apply("$/proofStates", {"uri": URI, "states": states}, 1.0)
    file.apply("$/compileCompleted", {"uri": URI, "version": 1}, 1.0)
    sliced, taken = stepped(verdict.build_steps(file, text, "hash", "utf-8", 500.0, SETTINGS, SERVER, None, 1.0))
    # The event loop gets a turn every thousand proofs or so, listing them and judging their times.
    assert taken >= 3 * (count // 1024)
    assert sliced == answer(file, text, now=500.0)
    assert sliced.tally.checking == count // 2 and len(sliced.proofs) == count
    # Thousands checking for 499 s: named up to a bound, the rest counted.
    assert len(sliced.outstanding) == MAX_OUTSTANDING_PROOFS + 1
    assert sliced.outstanding[-1] == f"and {count // 2 - MAX_OUTSTANDING_PROOFS} more proofs checking"
    assert sliced.warnings[-1].startswith(f"… and {count // 2 - MAX_OUTSTANDING_PROOFS} more proofs as slow")


def test_recorded_theorems_that_do_not_compile_fail_with_their_compile_error_each_on_its_own_theorem():
    # error-classes: on a fresh open the two unbound names and the two bad
    # statements have no pool entry; a statement's error sits zero-width on the
    # blank line above its `Theorem`.  Holmake fails the file.
    file, text = replayed("error-classes")
    result = answer(file, text)
    statuses = {p.name: (p.status, p.detail) for p in result.proofs}
    assert statuses["good_add0"] == ("proved", "")
    compiled = {name: detail for name, (status, detail) in statuses.items()
                if status == "failed" and detail.startswith("does not compile")}
    assert compiled == {
        "unknown_tactic": "does not compile: Value or constructor (no_such_tac) has not been declared (line 34); "
                          "see diagnostics",
        "unknown_theorem": "does not compile: Value or constructor (NO_SUCH_THM) has not been declared (line 43); "
                           "see diagnostics",
        "statement_type_error": "does not compile: Type error in function application. (line 45); see diagnostics",
        "statement_parse_error": "does not compile: Don't expect to find a <end of input> in this position after "
                                 "a ( (line 51); see diagnostics",
    }
    assert result.tally.failed == 11 and result.tally.proved == 1 and result.tally.unchecked == 0
    assert result.verdict == "FAILED" and result.headline.startswith("FAILED: 11 of 12 proofs failed")
    assert result.note == ""


LOCAL_TEXT = """\
Theory t
Ancestors arithmetic

local
Theorem helper:
  T
Proof
  simp[]
QED
val x = 1;
in
Theorem inner:
  T
Proof
  simp[]
QED
end
"""


def _error_at(line: int, col: int, end_line: int, end_col: int, message: str) -> m.Diagnostic:
    return m.Diagnostic(m.Range(line, col, end_line, end_col), "error", message)


@pytest.mark.parametrize(("diagnostic", "owners"), [
    # HOL's words name the theorem, wherever it puts them.
    (_error_at(4, 1, 4, 6, 'Failed to prove theorem "inner"\nException raised at …\n'), ["inner"]),
    # Zero-width in the blank line above the block: the block did not compile.
    (_error_at(3, 1, 3, 1, "Exception\n raised\n"), ["helper", "inner"]),
    # Inside the block but in no theorem.
    (_error_at(10, 9, 10, 10, "Value or constructor (y) has not been declared\n"), ["helper", "inner"]),
    # Inside a theorem's own lines.
    (_error_at(8, 3, 8, 9, "Value or constructor (simpx) has not been declared\n"), ["helper"]),
])
def test_a_compile_error_in_a_local_block_belongs_to_the_theorems_it_stops(diagnostic, owners):
    blocks = textinfo.Blocks(LOCAL_TEXT)
    assert sorted(compileerrors.compile_errors(blocks, [diagnostic])) == owners
