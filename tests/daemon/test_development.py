"""A development, not a file: three theories in three directories, `base` ← `mid` ← `top`
(each Holmakefile's INCLUDES names the directory below, as in the recording
`inherited-cheat`), built with the fake's Holmake.

A cheat in an ancestor shows in the dependant's verdict (as Holmake's CHEATED
does); a rebuild two levels up makes the dependant's answers stale and names
the build still missing; a stale mark stays for as long as the server that
answers has a stale reason, whatever syncs happen meanwhile.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from holsrv.answers import common
from holsrv.rpc import messages as m

from conftest import wait_until, waiting_call

DEADLINE_S = 60.0

BASE = """\
Theory base

Definition dbl_def:
  dbl n = 2 * n
End

Theorem dbl_0:
  dbl 0 = 0
Proof
  simp[dbl_def]
QED
"""

MID = """\
Theory mid
Ancestors base

Theorem dbl_even:
  !n. ?k. dbl n = 2 * k
Proof
  cheat
QED

Theorem dbl_1:
  dbl 1 = 2
Proof
  simp[baseTheory.dbl_def]
QED
"""

MID_PROVED = MID.replace("  cheat\n", "  simp[baseTheory.dbl_def] >> metis_tac[]\n")

TOP = """\
Theory top
Ancestors mid

Theorem dbl_3_even:
  ?k. dbl 3 = 2 * k
Proof
  metis_tac[midTheory.dbl_even]
QED

Theorem dbl_2:
  dbl 2 = 4
Proof
  simp[baseTheory.dbl_def]
QED

Theorem dbl_3_even_again:
  ?k. dbl 3 = 2 * k
Proof
  metis_tac[dbl_3_even]
QED
"""


def stale(reply) -> list[str]:
    return [w for w in reply.warnings if w.startswith(("STALE", "REBUILT"))]


def build(daemon, script: Path) -> m.HolmakeResult:
    result = daemon.call(m.Holmake(file=str(script)), timeout=DEADLINE_S)
    assert result.ok, result.message
    return result


@pytest.fixture
def development(tmp_path, write_script):
    """`base`, `mid` and `top` in three directories, each Holmakefile naming the one below."""
    scripts = {}
    for name, text, below in (("base", BASE, None), ("mid", MID, "base"), ("top", TOP, "mid")):
        scripts[name] = write_script(text, f"{name}Script.sml", tmp_path / name)
        if below:
            (tmp_path / name / "Holmakefile").write_text(f"INCLUDES = ../{below}\n")
    return scripts


def built(daemon, development) -> None:
    for name in ("base", "mid", "top"):
        build(daemon, development[name])


def diagnostics(daemon, path: Path, wait: float = 30.0) -> m.DiagnosticsResult:
    return daemon.call(m.Diagnostics(file=str(path), wait=wait), timeout=DEADLINE_S)


# -- 1: a cheat in an ancestor ------------------------------------------------


def test_the_fake_holmake_marks_a_theory_cheated_when_a_proof_uses_a_cheated_ancestor_theorem(daemon, development):
    build(daemon, development["base"])
    assert build(daemon, development["mid"]).cheated == ["mid"]
    top = build(daemon, development["top"])
    assert top.cheated == ["top"] and "CHEATED: top" in top.message


def test_a_proof_resting_on_a_cheated_ancestor_theorem_is_not_ok_and_names_it(daemon, development):
    built(daemon, development)
    answer = diagnostics(daemon, development["top"])
    assert answer.complete and answer.tally.proved == 3  # HOL's pool says proved
    assert answer.cheats == []  # no cheat in this file's text
    assert answer.verdict == "CHEATS", answer.headline
    assert "midTheory.dbl_even" in answer.headline and "Holmake would mark this theory CHEATED" in answer.headline
    found = {c.theorem: c for c in answer.inherited_cheats}
    assert sorted(found) == ["dbl_3_even", "dbl_3_even_again"]
    assert found["dbl_3_even"].rests_on == ["midTheory.dbl_even"] and found["dbl_3_even"].line == 4
    assert found["dbl_3_even_again"].rests_on == ["midTheory.dbl_even"]
    assert found["dbl_3_even_again"].through == ["dbl_3_even"]
    [row] = [s for s in daemon.call(m.Status()).sessions if s.file == str(development["top"])]
    assert row.last_verdict == "CHEATS"
    assert row.inherited_cheats == ["dbl_3_even: midTheory.dbl_even", "dbl_3_even_again: midTheory.dbl_even"]
    # Status's tally agrees with the verdict: the two resting on the cheat are not counted proved.
    assert (row.tally.proved, row.tally.cheated) == (1, 2), row.tally
    # Asked of HOL once per server: the next answer (another text) does not ask again.
    development["top"].write_text(TOP + "\n(* a comment *)\n")
    again = diagnostics(daemon, development["top"])
    assert again.verdict == "CHEATS" and daemon.daemon.answers.ancestor_cheats.queries == 1


def test_a_file_whose_ancestors_hold_no_cheat_is_ok_and_asks_once(daemon, development):
    development["mid"].write_text(MID_PROVED)
    built(daemon, development)
    answer = diagnostics(daemon, development["top"])
    assert answer.verdict == "OK" and answer.inherited_cheats == [], answer.headline


def test_a_bare_name_of_a_cheated_ancestor_theorem_counts_unless_the_file_declares_it_first(daemon, development):
    development["top"].write_text(TOP.replace("midTheory.dbl_even", "dbl_even"))
    built(daemon, development)
    answer = diagnostics(daemon, development["top"])
    assert answer.verdict == "CHEATS" and [c.theorem for c in answer.inherited_cheats][:1] == ["dbl_3_even"]


# -- 2: a rebuild two levels up --------------------------------------------------


def test_a_rebuilt_ancestor_two_levels_up_makes_answers_stale_and_names_the_missing_build(daemon, development):
    built(daemon, development)
    first = diagnostics(daemon, development["top"])
    assert stale(first) == [] and not first.freshness.may_be_stale
    old_pid = first.server.pid

    development["base"].write_text(BASE + "\nTheorem lsum_sing:\n  dbl 0 = 0\nProof\n  simp[dbl_def]\nQED\n")
    build(daemon, development["base"])  # mid was built against the old base
    said = ""

    def says_mid_is_missing() -> bool:
        nonlocal said
        answer = diagnostics(daemon, development["top"])
        said = " ".join(stale(answer))
        return answer.freshness.may_be_stale and "must be rebuilt" in said

    wait_until(says_mid_is_missing, DEADLINE_S, "top's answers to say mid must be rebuilt")
    assert "baseTheory" in said and f"holmake {development['mid']}" in said, said
    assert diagnostics(daemon, development["top"]).server.pid == old_pid  # no successor: it could not load mid

    build(daemon, development["mid"])  # now a fresh server can load them: it is replaced as for a parent
    wait_until(lambda: diagnostics(daemon, development["top"]).server.pid != old_pid, DEADLINE_S,
               "a fresh server to take over")
    after = diagnostics(daemon, development["top"])
    assert stale(after) == [] and not after.freshness.may_be_stale


# -- 3: the stale mark stays until the switch ----------------------------------


def test_an_answer_stays_stale_across_a_sync_while_its_server_is_being_replaced(daemon, development, tmp_path,
                                                                             monkeypatch):
    build(daemon, development["base"])
    first = diagnostics(daemon, development["mid"])
    old_pid = first.server.pid
    assert not first.freshness.may_be_stale
    gate = tmp_path / "start-gate"  # absent: the successor's start waits
    monkeypatch.setenv("FAKE_HOL_START_GATE", str(gate))

    development["base"].write_text(BASE + "\n(* rebuilt *)\n")
    build(daemon, development["base"])
    wait_until(lambda: diagnostics(daemon, development["mid"]).freshness.may_be_stale, DEADLINE_S,
               "mid's answers to be marked stale")

    development["mid"].write_text(MID + "\n(* a comment *)\n")
    wait_until(lambda: daemon.call(m.Status()).sessions and any(
        s.file == str(development["mid"]) and s.replacement_pid for s in daemon.call(m.Status()).sessions),
        DEADLINE_S, "the successor to spawn")
    for _ in range(3):
        during = diagnostics(daemon, development["mid"])
        assert during.server.pid == old_pid
        assert during.freshness.may_be_stale and stale(during), during.freshness
        goal = daemon.call(m.GoalState(file=str(development["mid"]), line=12, column=3), timeout=DEADLINE_S)
        assert goal.freshness.may_be_stale, goal.freshness
    gate.touch()
    wait_until(lambda: diagnostics(daemon, development["mid"]).server.pid != old_pid, DEADLINE_S,
               "the fresh server to take over")
    # An answer the old server gave, stamped once the new one has taken over (a call that held
    # the old server while the switch happened): still stale, since the server that gave it is.
    request = m.Diagnostics(file=str(development["mid"]))
    restamped = daemon.run(common.stamp(daemon.daemon.answers, request, during))
    assert restamped.freshness.may_be_stale, restamped.freshness
    assert any(f"pid {old_pid} →" in r for r in restamped.freshness.reasons), restamped.freshness.reasons


def test_an_answer_from_a_server_replaced_while_the_call_held_it_stays_stale(daemon, development, tmp_path,
                                                                             monkeypatch):
    """The call holds the old server (its compile of the new text waits at a gate) while the
    successor catches up and takes over; the old server's answer then comes back stale."""
    old_gate, start_gate = tmp_path / "old-compile-gate", tmp_path / "successor-start-gate"
    old_gate.touch()
    monkeypatch.setenv("FAKE_HOL_COMPILE_GATE", str(old_gate))  # read by the first server only
    build(daemon, development["base"])
    old_pid = diagnostics(daemon, development["mid"]).server.pid
    monkeypatch.delenv("FAKE_HOL_COMPILE_GATE")
    monkeypatch.setenv("FAKE_HOL_START_GATE", str(start_gate))  # absent: the successor waits to start

    development["base"].write_text(BASE + "\n(* rebuilt *)\n")
    build(daemon, development["base"])
    wait_until(lambda: diagnostics(daemon, development["mid"]).freshness.may_be_stale, DEADLINE_S,
               "mid's answers to be marked stale")

    old_gate.unlink()  # the old server's next compile waits
    development["mid"].write_text(MID + "\n(* a comment *)\n")
    thread, outcome = waiting_call(daemon, m.Diagnostics(file=str(development["mid"]), wait=DEADLINE_S))
    start_gate.touch()
    wait_until(lambda: any(s.file == str(development["mid"]) and s.pid != old_pid
                           for s in daemon.call(m.Status()).sessions), DEADLINE_S, "the successor to take over")
    old_gate.touch()
    thread.join(DEADLINE_S)
    reply = outcome["reply"]
    assert reply.server.pid == old_pid  # the call's answer is the old server's
    assert reply.freshness.may_be_stale, reply.freshness
    assert any(f"pid {old_pid} →" in r for r in reply.freshness.reasons), reply.freshness.reasons


def test_a_fresh_server_blocked_on_a_theory_built_against_an_old_ancestor_names_the_build(daemon, development):
    built(daemon, development)
    development["base"].write_text(BASE + "\n(* rebuilt *)\n")
    build(daemon, development["base"])  # mid was built against the old base: HOL will not load it
    top2 = development["top"].parent / "top2Script.sml"
    top2.write_text(TOP.replace("Theory top", "Theory top2"))
    blocked = diagnostics(daemon, top2)
    assert blocked.verdict == "BLOCKED", blocked.headline
    assert "`mid` must be rebuilt against the new `base`" in blocked.headline
    assert f"holmake {development['mid']}" in blocked.headline

    build(daemon, development["mid"])  # the block lifts by itself: the daemon retries the compile
    wait_until(lambda: diagnostics(daemon, top2).verdict == "CHEATS", DEADLINE_S, "top2 to compile")


def test_verify_names_a_proof_resting_on_a_cheated_ancestor_theorem_and_only_named_ones_escape_it(
        daemon, development):
    built(daemon, development)
    reply = daemon.call(m.Verify(file=str(development["top"]), wait=30.0), timeout=DEADLINE_S)
    checks = {c.name: c for c in reply.checks}
    assert not reply.verified
    assert "dbl_3_even (line 4): rests on cheated midTheory.dbl_even" in checks["proofs"].evidence
    assert checks["build"].summary == "Holmake built topTheory but reported it CHEATED."
    assert "dbl_3_even, dbl_3_even_again rest on cheat" in checks["oracles"].summary  # HOL's tags carry it up
    only = daemon.call(m.Verify(file=str(development["top"]), theorems=["dbl_2"], wait=30.0), timeout=DEADLINE_S)
    assert [c.status for c in only.checks][1] == "passed"  # dbl_2's proof is its own
    assert not only.verified  # the theory still rests on the cheat: its build and HOL's record say so
