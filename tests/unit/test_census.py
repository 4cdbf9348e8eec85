"""When a pass is over by HOL's own signals: the census of a text against the pool's states.

The file state is fed notifications in the order the recordings show
(edit-timing-rich-list*.jsonl, error-classes.jsonl): `cheated` and
`checking` before the pass's `$/compileCompleted`, verdicts before or after
it, a failure's diagnostic on the theorem's name and later moved.  Quiet
periods here are far longer than any instant the tests look at, so a file
settled "now" was settled by the census, not by a quiet server.
"""

from holsrv.config.settings import Settings
from holsrv.verdict import outstanding
from holsrv.verdict.filestate import FileState

URI = "file:///p/fooScript.sml"
ENDLESS = Settings(quiet_s=600.0, quiet_clean_s=600.0)
# Theorem a at line 2 (0-based), its body at line 5; b at line 8, its body at line 11.
TEXT = (
    "Theory foo\n\nTheorem a:\n  T\nProof\n  simp[]\nQED\n\n"
    "Theorem b:\n  T\nProof\n  simp[]\nQED\n"
)
# c and d are inside a column-0 `local … end`: HOL proves them while compiling.
LOCAL = (
    "Theory foo\n\nTheorem a:\n  T\nProof\n  simp[]\nQED\n\n"
    "local\nTheorem c:\n  T\nProof\n  simp[]\nQED\nTheorem d:\n  T\nProof\n  simp[]\nQED\nin\nend\n"
)
A, B = ("a", 2), ("b", 8)


def states(*entries):
    return {"uri": URI, "states": [{"pos": {"line": line, "character": 0}, "name": name, "status": status}
                                   for (name, line), status in entries]}


def completed(file, version, now, declared=("foo", "a", "b")):
    file.apply("$/compileCompleted", {"uri": URI, "version": version, "declared": list(declared)}, now)


def publish(file, now, *lines):
    diagnostics = [{"range": {"start": {"line": line, "character": 2}, "end": {"line": line, "character": 8}},
                    "severity": 1, "message": "proof failed: Exception raised at Tactical.FAIL_TAC: no"}
                   for line in lines]
    file.apply("textDocument/publishDiagnostics", {"uri": URI, "version": file.version, "diagnostics": diagnostics},
               now)


def settled(file, now, settings=ENDLESS):
    return file.settled(now, outstanding.quiet_for(file, settings))


def checked(text=TEXT, version=1):
    """A file whose first pass proved a and b, at t=1."""
    file = FileState(URI)
    file.sent(version, text, 0.0)
    file.apply("$/proofStates", states((A, "checking"), (B, "checking")), 0.5)
    completed(file, version, 0.6)
    file.apply("$/proofStates", states((A, "proved")), 0.8)
    file.apply("$/proofStates", states((B, "proved")), 1.0)
    return file


def test_the_pass_is_over_the_moment_the_last_proof_of_the_census_has_its_verdict():
    file = FileState(URI)
    file.sent(1, TEXT, 0.0)
    file.apply("$/proofStates", states((A, "checking"), (B, "checking")), 0.5)
    completed(file, 1, 0.6)
    file.apply("$/proofStates", states((A, "proved")), 0.8)
    assert not settled(file, 0.8)
    file.apply("$/proofStates", states((B, "proved")), 1.0)
    assert settled(file, 1.0)


def test_the_verdict_before_the_compile_completes_settles_with_the_completion():
    file = checked()
    edited = TEXT.replace("simp[]\nQED\n\nTheorem b", "rw[]\nQED\n\nTheorem b")
    file.sent(2, edited, 2.0)
    file.apply("$/proofStates", states((A, "cheated")), 2.3)
    file.apply("$/proofStates", states((A, "checking")), 2.4)
    file.apply("$/proofStates", states((B, "proved")), 2.4)  # the proofs below, re-announced
    file.apply("$/proofStates", states((A, "proved")), 2.41)  # as in rich_list: before the completion
    assert not settled(file, 2.41)
    completed(file, 2, 2.42)
    assert settled(file, 2.42)


def test_a_proof_dropped_in_this_pass_holds_the_answer_until_its_verdict():
    file = checked()
    edited = TEXT.replace("simp[]\nQED\n\nTheorem b", "rw[]\nQED\n\nTheorem b")
    file.sent(2, edited, 2.0)
    file.apply("$/proofStates", states((A, "cheated")), 2.3)
    completed(file, 2, 2.4)
    assert not settled(file, 2.4) and not settled(file, 100.0)  # dropped, not yet checked
    file.apply("$/proofStates", states((A, "checking")), 2.5)
    assert not settled(file, 100.0)
    file.apply("$/proofStates", states((A, "proved")), 2.6)
    assert settled(file, 2.6)


def test_a_proof_dropped_by_a_pass_nobody_asked_for_holds_a_completed_file():
    file = checked()
    assert settled(file, 1.0)
    # A suspended or diverged proof makes HOL run an extra pass: its `cheated`
    # comes while the last completion still stands (rich_list: 60 ms before any progress).
    file.apply("$/proofStates", states((B, "cheated")), 1.5)
    assert not settled(file, 100.0)
    file.apply("$/proofStates", states((B, "checking")), 1.6)
    file.apply("$/proofStates", states((B, "proved")), 1.7)
    assert settled(file, 1.7)


def test_a_new_failure_waits_for_its_diagnostic_to_leave_the_theorems_name():
    file = FileState(URI)
    file.sent(1, TEXT, 0.0)
    file.apply("$/proofStates", states((A, "checking"), (B, "checking")), 0.5)
    completed(file, 1, 0.6)
    file.apply("$/proofStates", states((A, "proved")), 0.8)
    file.apply("$/proofStates", states((B, "failed")), 1.0)
    assert not settled(file, 1.0)  # its diagnostic is not even published yet
    publish(file, 1.01, B[1])
    assert not settled(file, 1.01)  # on the theorem's name
    assert settled(file, 601.01)  # HOL did not move it: at most quiet_s
    publish(file, 1.2, 11)
    assert settled(file, 1.2)


def test_a_moved_diagnostic_of_the_failure_before_the_edit_is_not_this_failures_move():
    file = FileState(URI)
    file.sent(1, TEXT, 0.0)
    file.apply("$/proofStates", states((A, "checking"), (B, "checking")), 0.5)
    completed(file, 1, 0.6)
    file.apply("$/proofStates", states((A, "proved"), (B, "failed")), 0.8)
    publish(file, 0.9, 11)
    assert settled(file, 0.9)
    file.sent(2, TEXT.replace("  simp[]\nQED\n", "  rw[]\nQED\n").replace("rw[]", "simp[]", 1), 2.0)
    file.apply("$/proofStates", states((B, "cheated")), 2.3)
    file.apply("$/proofStates", states((B, "checking")), 2.4)
    completed(file, 2, 2.5)
    file.apply("$/proofStates", states((B, "failed")), 2.6)
    assert not settled(file, 2.6)  # the moved diagnostic is the old failure's
    publish(file, 2.7, 11)
    assert settled(file, 2.7)


def test_theorems_inside_a_local_block_are_not_waited_for():
    file = FileState(URI)
    file.sent(1, LOCAL, 0.0)
    file.apply("$/proofStates", states((A, "checking")), 0.5)
    completed(file, 1, 0.6, ("foo", "a", "c", "d"))
    assert not settled(file, 0.6)
    file.apply("$/proofStates", states((A, "proved")), 0.8)
    assert settled(file, 0.8)


def test_a_theorem_whose_declaration_does_not_compile_is_not_waited_for():
    file = FileState(URI)
    broken = TEXT.replace("  simp[]\nQED\n\n", "  simp[NO_SUCH_THM]\nQED\n\n", 1)
    file.sent(1, broken, 0.0)
    error = {"range": {"start": {"line": 5, "character": 7}, "end": {"line": 5, "character": 18}}, "severity": 1,
             "message": "Value or constructor (NO_SUCH_THM) has not been declared\n"}
    file.apply("textDocument/publishDiagnostics", {"uri": URI, "version": 1, "diagnostics": [error]}, 0.4)
    file.apply("$/proofStates", states((B, "checking")), 0.5)  # a gets no entry (error-classes)
    completed(file, 1, 0.6)
    file.apply("$/proofStates", states((B, "proved")), 0.8)
    assert settled(file, 0.8)


def test_where_the_census_and_the_pool_disagree_the_quiet_period_stands_in():
    short = Settings(quiet_s=600.0, quiet_clean_s=5.0)
    unknown = checked()
    unknown.apply("$/proofStates", states((("zzz", 20), "proved")), 1.0)  # a proof the text does not declare
    completed(unknown, 1, 1.0, ("foo", "a", "b", "zzz"))
    missing = FileState(URI)  # b never gets an entry, and nothing says it does not compile
    missing.sent(1, TEXT, 0.0)
    missing.apply("$/proofStates", states((A, "checking")), 0.5)
    completed(missing, 1, 0.6)
    missing.apply("$/proofStates", states((A, "proved")), 1.0)
    unsaid = checked()  # the completion names no version
    unsaid.apply("$/compileCompleted", {"uri": URI, "declared": ["foo", "a", "b"]}, 1.0)
    for file in (unknown, missing, unsaid):
        assert not settled(file, 1.0, short) and not settled(file, 5.9, short)
        assert settled(file, 6.0, short)
