"""The file state machine, fed notifications shaped like the recorded real server's."""

from holsrv.verdict.filestate import FileState

URI = "file:///p/fooScript.sml"


def states(*entries):
    return {
        "uri": URI,
        "states": [
            {"pos": {"line": line, "character": 0}, "name": name, "status": status, **extra}
            for name, line, status, *rest in entries
            for extra in [rest[0] if rest else {}]
        ],
    }


def opened(now=0.0):
    file = FileState(URI)
    file.sent(1, "text", now)
    return file


def test_tally_is_keyed_by_name_and_later_messages_win():
    file = opened()
    file.apply("$/proofStates", states(("add0", 3, "checking"), ("bad", 9, "checking")), 1.0)
    file.apply("$/proofStates", states(("add0", 4, "proved")), 2.0)
    assert {n: (e.status, e.line0) for n, e in file.proofs.items()} == {
        "add0": ("proved", 4),
        "bad": ("checking", 9),
    }


def test_census_drops_names_not_declared_and_keeps_cheated_ones():
    file = opened()
    file.apply("$/proofStates", states(("keep", 1, "proved"), ("gone", 5, "failed"), ("later", 9, "cheated")), 1.0)
    file.apply("$/compileCompleted", {"uri": URI, "version": 1, "declared": ["demo", "keep", "later"]}, 2.0)
    assert sorted(file.proofs) == ["keep", "later"]


def test_census_absent_changes_nothing_and_empty_drops_everything():
    file = opened()
    file.apply("$/proofStates", states(("a", 1, "proved")), 1.0)
    file.apply("$/compileCompleted", {"uri": URI}, 2.0)
    assert list(file.proofs) == ["a"]
    file.apply("$/compileCompleted", {"uri": URI, "version": 1, "declared": []}, 3.0)
    assert file.proofs == {}


def test_completion_of_an_older_version_does_not_end_the_compile():
    file = opened()
    file.sent(2, "newer", 1.0)
    file.apply("$/compileCompleted", {"uri": URI, "version": 1, "declared": []}, 2.0)
    assert file.phase == "compiling"
    file.apply("$/compileCompleted", {"uri": URI, "version": 2, "declared": []}, 3.0)
    assert file.phase == "completed"


def test_settled_needs_no_checking_proof_and_a_quiet_server():
    file = opened()
    file.apply("$/proofStates", states(("a", 1, "checking")), 1.0)
    file.apply("$/compileCompleted", {"uri": URI, "version": 1, "declared": ["a"]}, 1.0)
    assert not file.settled(10.0, 1.0)
    file.apply("$/proofStates", states(("a", 1, "proved")), 2.0)
    assert not file.settled(2.5, 1.0)
    assert file.settled(3.0, 1.0)


def test_blocked_is_settled_and_a_new_text_is_not():
    file = opened()
    file.apply("$/compileBlocked", {"uri": URI, "modules": ["xTheory"], "message": "cannot load xTheory"}, 1.0)
    assert file.phase == "blocked" and file.settled(5.0, 1.0)
    file.sent(2, "edited", 6.0)
    assert not file.settled(10.0, 1.0)


TEXT = "Theory t\n\nTheorem a:\n  T\nProof\n  simp[]\nQED\n\nTheorem slow:\n  T\nProof\n  LOOP_TAC\nQED\n"


def test_checking_time_counts_from_the_last_edit_that_reached_the_proof():
    file = FileState(URI)
    file.sent(1, TEXT, 0.0)
    file.apply("$/proofStates", states(("slow", 8, "checking")), 10.0)
    entry = file.proofs["slow"]
    assert file.checking_for(entry, 70.0) == 60.0
    file.sent(2, TEXT + "\nval x = 1;\n", 40.0)  # below it: HOL keeps its check
    assert file.checking_for(entry, 70.0) == 60.0
    file.sent(3, TEXT.replace("simp[]", "rw[]") + "\nval x = 1;\n", 45.0)  # inside another body
    assert file.checking_for(entry, 70.0) == 60.0
    file.sent(4, TEXT.replace("  T\n", "  F\n", 1), 50.0)  # a statement above it
    assert file.checking_for(entry, 70.0) == 20.0


def test_slowest_finished_proof_is_remembered():
    file = opened()
    file.apply("$/proofStates", states(("a", 1, "checking"), ("b", 2, "checking")), 1.0)
    file.apply("$/proofStates", states(("a", 1, "proved")), 3.0)
    file.apply("$/proofStates", states(("b", 2, "failed", {"detail": "\nboom\n"})), 8.0)
    assert file.slowest_s == 7.0
    assert file.proofs["b"].detail == "\nboom\n"


def test_unnamed_proofs_and_other_uris_are_ignored():
    file = opened()
    assert not file.apply("$/proofStates", {"uri": "file:///other", "states": []}, 1.0)
    file.apply("$/proofStates", states(("", 1, "checking")), 1.0)
    assert file.proofs == {}
