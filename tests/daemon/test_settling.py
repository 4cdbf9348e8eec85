"""When a file counts as settled: on HOL's own signals, not on a fixed quiet period.

Each daemon here has a quiet period far longer than the call's wait, so an
answer that waits for it comes back INCOMPLETE and one that does not comes
back with the verdict: what the user sees, not how long it took.
"""

from __future__ import annotations

from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT

ENDLESS_QUIET_S = 600.0
# One proof that fails (add0), one that proves (conj_comm).
FAILING = GOOD_SCRIPT.replace("gen_tac >> simp[]", 'gen_tac >> FAIL_TAC "no"')


def _line(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def test_a_failure_whose_diagnostic_has_moved_to_its_step_holds_nothing_up(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_RELOCATE_MS", "50")
    daemon = daemon_factory(quiet_s=ENDLESS_QUIET_S)
    path = write_script(FAILING)
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    assert result.verdict == "FAILED", result.headline
    assert [d.range.line for d in result.diagnostics] == [_line(FAILING, "FAIL_TAC")]


def test_a_new_failure_still_on_its_theorems_name_is_waited_for(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_RELOCATE_MS", "600000")  # HOL has not moved it yet
    daemon = daemon_factory(quiet_s=ENDLESS_QUIET_S)
    path = write_script(FAILING)
    result = daemon.call(m.Diagnostics(str(path), wait=3))
    assert result.verdict == "INCOMPLETE", result.headline


def test_a_failure_reported_before_the_last_edit_holds_nothing_up(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_RELOCATE_MS", "600000")  # HOL never moves it
    daemon = daemon_factory(quiet_s=ENDLESS_QUIET_S)
    path = write_script(FAILING)
    assert daemon.call(m.Diagnostics(str(path), wait=3)).verdict == "INCOMPLETE"  # this pass's failure
    edited = FAILING.replace("rpt strip_tac >> simp[]", "rpt strip_tac >> fs[]")  # another proof's body
    path.write_text(edited)
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    assert result.verdict == "FAILED", result.headline
    assert [p.name for p in result.proofs if p.status == "failed"] == ["add0"]


# With both quiet periods endless, only the census can settle a file.
def _census_only(daemon_factory):
    return daemon_factory(quiet_s=ENDLESS_QUIET_S, quiet_clean_s=ENDLESS_QUIET_S)


def test_a_clean_edit_settles_on_the_census_alone(daemon_factory, write_script):
    daemon = _census_only(daemon_factory)
    path = write_script(GOOD_SCRIPT)
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "OK"
    path.write_text(GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "rpt strip_tac >> fs[]"))
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    assert (result.verdict, result.complete) == ("OK", True), result.headline


def test_a_failing_edit_settles_once_its_diagnostic_has_moved_to_its_step(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_RELOCATE_MS", "50")
    daemon = _census_only(daemon_factory)
    path = write_script(GOOD_SCRIPT)
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "OK"
    path.write_text(FAILING)
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    assert (result.verdict, result.complete) == ("FAILED", True), result.headline
    assert [d.range.line for d in result.diagnostics] == [_line(FAILING, "FAIL_TAC")]


def test_a_failing_edit_whose_diagnostic_has_not_moved_is_not_settled(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_RELOCATE_MS", "600000")
    daemon = _census_only(daemon_factory)
    path = write_script(GOOD_SCRIPT)
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "OK"
    path.write_text(FAILING)
    result = daemon.call(m.Diagnostics(str(path), wait=3))
    assert result.verdict == "INCOMPLETE", result.headline
    assert [p.name for p in result.proofs if p.status == "failed"] == ["add0"]  # the verdict is in


def test_a_proof_still_checking_holds_the_answer(daemon_factory, write_script):
    daemon = _census_only(daemon_factory)
    path = write_script(GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC"))
    result = daemon.call(m.Diagnostics(str(path), wait=3))
    assert result.verdict == "INCOMPLETE", result.headline
    assert [p.name for p in result.proofs if p.status == "checking"] == ["conj_comm"]


# conj_comm inside a column-0 `local … end`: the compile proves it, the pool never has it.
LOCAL_SCRIPT = GOOD_SCRIPT.replace("Theorem conj_comm:", "local\nTheorem conj_comm:") + "in\nend\n"


def test_a_script_whose_edited_theorem_is_in_a_local_block_settles(daemon_factory, write_script):
    daemon = _census_only(daemon_factory)
    path = write_script(LOCAL_SCRIPT)
    assert daemon.call(m.Diagnostics(str(path), wait=20)).verdict == "OK"
    path.write_text(LOCAL_SCRIPT.replace("rpt strip_tac >> simp[]", "rpt strip_tac >> fs[]"))
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    assert (result.verdict, result.complete) == ("OK", True), result.headline
    assert {p.name: p.status for p in result.proofs} == {"add0": "proved", "conj_comm": "proved"}


# A quotation left open in add0's statement: HOL's parser recovers and still
# checks proofs, the daemon's scanner sees no proof block past the open quote.
UNCENSUSED = GOOD_SCRIPT.replace("!n:num. n + 0 = n", "‘!n:num. n + 0 = n")



def test_a_text_the_scanner_cannot_census_is_not_settled_by_the_census(daemon_factory, write_script):
    daemon = _census_only(daemon_factory)
    path = write_script(UNCENSUSED)
    result = daemon.call(m.Diagnostics(str(path), wait=3))
    assert result.verdict == "INCOMPLETE", result.headline
    assert [p.status for p in result.proofs] == ["proved"]  # HOL's word is in, the census cannot vouch for it


def test_a_text_the_scanner_cannot_census_settles_after_the_quiet_period(daemon_factory, write_script):
    daemon = daemon_factory(quiet_s=ENDLESS_QUIET_S, quiet_clean_s=0.3)
    path = write_script(UNCENSUSED)
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    assert result.complete, result.headline
