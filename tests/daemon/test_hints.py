"""A failed proof's hint is chosen by the class of HOL's own message, and never replaces it.

The real server's messages from the recording `error-classes.jsonl` (eleven
common mistakes), fed to the hint table and, through a `FileState`, to the
diagnostics answer; then once through the daemon and the fake HOL, as holctl
prints it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fake_hol import transcript_replay as tr

from holsrv.config.settings import Settings
from holsrv.rpc import messages as m
from holsrv.text import stepping
from holsrv.verdict import hints, proofs, verdict
from holsrv.verdict.filestate import FileState

# A proof the fake fails as decide_tac fails on a list goal, and one naming a tactic that does not exist.
HINTED_SCRIPT = """\
Theory demo
Ancestors arithmetic

Theorem not_arith:
  !p q. p /\\ q ==> q
Proof
  rpt strip_tac >> NO_TAC
QED

Theorem unknown:
  !n. n = n
Proof
  not_a_tactic
QED
"""

# Each theorem of the recording's script: a phrase its hint must have.
EXPECTED = {
    "unsolved_simp": "goalState at line 10",
    "then1_no_goal": "drop the `>-`",
    "decide_non_arith": "`simp[]` or `gvs[]` step first",
    "metis_no_lemmas": "`metis_tac[LEMMA]`",
    "unknown_tactic": "`search no_such_tac`",
    "unknown_theorem": "`search NO_SUCH_THM`",
    "statement_parse_error": "`Proof` ⏎ tactics ⏎ `QED`",
    "induct_var_not_in_goal": "`m` is not a variable of the goal",
    "irule_no_assumptions": "`rpt strip_tac` first",
    "exists_on_forall": "strip the ∀",
}


def _recording(name: str = "error-classes") -> list[dict]:
    path = os.path.join(tr.find_transcripts(), name + ".jsonl")
    if not os.path.exists(path):
        pytest.skip("recorded transcripts are not available here")
    return tr.load(path)


def _replayed(name: str = "error-classes") -> tuple[FileState, str]:
    """The file state after every notification of the recorded session."""
    records = _recording(name)
    opened = next(r["msg"]["params"]["textDocument"] for r in records
                  if r["dir"] == "C->S" and r["msg"].get("method") == "textDocument/didOpen")
    file = FileState(opened["uri"])
    file.sent(opened["version"], opened["text"], 0.0)
    for r in records:
        if r["dir"] == "S->C" and "method" in r["msg"]:
            file.apply(r["msg"]["method"], r["msg"].get("params") or {}, r["t"])
    return file, opened["text"]


def _hol_messages() -> dict[str, str]:
    """Each failing theorem's message as HOL said it: its pool detail, or its compile error."""
    records = _recording()
    said: dict[str, str] = {}
    theorems = next(r["msg"]["theorems"] for r in records if r["dir"] == "meta" and "theorems" in r["msg"])
    last = [r["msg"]["params"]["diagnostics"] for r in records
            if r["dir"] == "S->C" and r["msg"].get("method") == "textDocument/publishDiagnostics"][-1]
    for diag in last:
        start = diag["range"]["start"]["line"]
        # Statement errors are on the blank line above `Theorem` (the recording's README).
        owner = next(t["name"] for t in theorems if t["lines"][0] - 1 <= start <= t["lines"][1])
        said[owner] = diag["message"]
    for r in records:
        if r["dir"] == "S->C" and r["msg"].get("method") == "$/proofStates":
            for state in r["msg"]["params"]["states"]:
                if state["status"] == "failed":
                    said[state["name"]] = state["detail"]
    return said


def test_each_recorded_class_of_hol_error_gets_its_own_hint():
    said = _hol_messages()
    assert set(EXPECTED) <= set(said)
    for name, phrase in EXPECTED.items():
        got = hints.hint(said[name], hints.Context(line=10 if name == "unsolved_simp" else None))
        assert phrase in got, (name, said[name], got)


def test_a_type_error_in_a_statement_gets_no_hint_rather_than_a_wrong_one():
    said = _hol_messages()
    assert "Type error in function application" in said["statement_type_error"]
    assert hints.hint(said["statement_type_error"]) == ""


@pytest.mark.parametrize(("message", "phrase"), [
    # Holmake's words for an unsolved proof (error-classes, its Holmake run) and the tactic's.
    ("Exception raised at Tactical.first subgoal not solved", "goalState"),
    ("Exception raised at numLib.DECIDE: linear arithmetic failed", "`decide_tac` for linear arithmetic"),
    ("metis: no solution found", "`metis_tac[LEMMA]`"),
    ("expected close delimiter", "a syntax error"),  # parse-recovery.jsonl
    ("PROBABLY LOOPING: proof p (line 3) has been checking for 40s", "split the proof"),
    ("timed out", "split the proof"),
    ("Exception raised at Tactical.FAIL_TAC: something new", ""),
])
def test_other_words_of_hol_get_the_hint_of_their_class(message, phrase):
    got = hints.hint(message)
    assert (phrase in got) if phrase else got == "", got


def _answer(name: str) -> m.DiagnosticsResult:
    file, text = _replayed(name)
    return stepping.run(verdict.build_steps(
        file, text, "hash", "utf-8", 100.0, Settings(quiet_s=0.3, quiet_clean_s=0.2), m.ServerNote(pid=1), None,
        1.0,
    ))


def test_the_diagnostics_answer_keeps_hols_message_and_adds_the_hint_on_each_failed_proof():
    result = _answer("error-classes")
    _, text = _replayed("error-classes")
    by_name = {p.name: p for p in result.proofs}
    assert by_name["good_add0"].hint == ""
    for name, phrase in EXPECTED.items():
        proof = by_name[name]
        assert proof.status == "failed", proof
        # The line a hint names is one goalState accepts: the proof's QED, not its Theorem line.
        qed = next(n for n, line in enumerate(text.splitlines(), 1) if n > proof.line and line.startswith("QED"))
        assert phrase.replace("line 10", f"line {qed}") in proof.hint, proof
    assert "FAIL_TAC: NO_TAC" in by_name["decide_non_arith"].detail
    assert "NO_SUCH_THM" in by_name["unknown_theorem"].detail
    assert {d.message.splitlines()[0] for d in result.diagnostics} >= {
        "proof failed: Exception raised at Tactical.FAIL_TAC: NO_TAC",
        "Value or constructor (NO_SUCH_THM) has not been declared",
    }


def test_holctl_diagnostics_prints_the_hint_indented_under_each_failed_proof(daemon, write_script):
    path = write_script(HINTED_SCRIPT)
    done = subprocess.run(
        [sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "--no-start", "diagnostics", str(path)],
        capture_output=True, text=True, timeout=120,
    )
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    failed = next(i for i, line in enumerate(lines) if "not_arith  failed" in line)
    assert "FAIL_TAC: NO_TAC" in lines[failed]  # HOL's words stay
    assert lines[failed + 1] == (
        "      hint: the tactic does not apply to this goal: try a `simp[]` or `gvs[]` step first")
    unknown = next(i for i, line in enumerate(lines) if "unknown  failed" in line)
    assert "not_a_tactic" in lines[unknown]
    assert lines[unknown + 1].startswith("      hint: `not_a_tactic` is not defined here: find it with "
                                         "`search not_a_tactic`")
    assert any("proof failed: Exception raised at Tactical.FAIL_TAC: NO_TAC" in line for line in lines)


def test_a_diverged_proof_is_hinted_to_be_split_at_its_line_and_a_proved_one_not_at_all():
    assert "split the proof at line 5" in proofs.hint_for("diverged", "", 5)
    assert proofs.hint_for("proved", "Exception raised at Tactical.FAIL_TAC: NO_TAC", 5) == ""


def test_a_proof_hol_checked_after_recovering_from_a_parse_error_is_hinted_to_the_syntax():
    # parse-recovery.jsonl: `expected close delimiter`, a warning, and the proof `proved` by HOL.
    [proof] = [p for p in _answer("parse-recovery").proofs if p.status == "parse_error"]
    assert "expected close delimiter" in proof.detail
    assert proof.hint.startswith("a syntax error:")


def test_code_given_to_eval_gets_no_proofs_advice_but_keeps_what_holds_for_any_code():
    in_eval = hints.Context(in_proof=False)
    assert "`;`" in hints.hint("expected an expression", in_eval)
    assert "Theorem" not in hints.hint("expected an expression", in_eval)
    assert hints.hint("walker timed out (>1500ms)", in_eval) == ""
    assert hints.hint("unsolved goals", in_eval) == ""
    assert "search FOO" in hints.hint("Value or constructor (FOO) has not been declared\n", in_eval)
