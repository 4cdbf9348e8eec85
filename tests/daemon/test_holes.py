"""holes: every unfinished proof of a file with the goals at its hole, in one call, against the fake HOL."""

from __future__ import annotations

from click.testing import CliRunner

from holctl.cli import cli
from holctl.render import render
from holsrv.rpc import client as rpc_client
from holsrv.rpc import limits
from holsrv.rpc import messages as m

from conftest import goal_lines

# A clean proof, a cheat after a step, and a failing step after one.
SCRIPT = """\
Theory demo
Ancestors arithmetic

Theorem clean:
  !p q. p /\\ q ==> q /\\ p
Proof
  rpt strip_tac >> simp[]
QED

Theorem cheated:
  !p q. p /\\ q ==> q
Proof
  rpt strip_tac >>
  cheat
QED

Theorem fails:
  !x. x ==> x
Proof
  rpt strip_tac >>
  FAIL_TAC "nope"
QED
"""
CHEAT_LINE, FAIL_LINE = 14, 21


def goals(entry: m.GoalStateEntry | None) -> list[tuple[list[str], str]]:
    assert entry is not None
    return [(g.asms, g.goal) for g in entry.goals]


def test_holes_lists_a_cheat_and_a_failed_step_with_their_goals_and_not_the_clean_proof(daemon, write_script):
    path = write_script(SCRIPT)
    result = daemon.call(m.Holes(str(path), wait=30), timeout=120)
    assert isinstance(result, m.HolesResult)
    assert result.verdict == "FAILED" and result.complete, result.headline
    assert [(h.theorem, h.kind, h.line) for h in result.holes] == [
        ("cheated", "cheat", CHEAT_LINE), ("fails", "failed", FAIL_LINE)]
    cheat, failed = result.holes
    assert (cheat.column, cheat.theorem_line) == (3, 10)
    assert goals(cheat.goals) == [(["p", "q"], "q")]
    assert failed.column == 3 and "FAIL_TAC" in failed.detail
    assert goals(failed.goals) == [(["x"], "x")]
    assert result.walked == 2 and not result.message
    text = render(result)
    assert "HOLES: 2 unfinished proof holes (verdict FAILED)" in text
    assert f"== cheat: cheated (line 10), hole at line {CHEAT_LINE}, column 3 ==" in text
    assert "clean" not in text


def test_holes_with_progress_tells_which_hole_it_walks(daemon, write_script):
    path = write_script(SCRIPT)
    frames: list[m.Progress] = []
    with rpc_client.connect(daemon.socket, name="test", autostart=False) as client:
        result = client.call(m.Holes(str(path), wait=30, progress=True), 120, on_progress=frames.append)
    assert len(result.holes) == 2
    walks = [(f.message, f.done, f.total) for f in frames if f.message.startswith("goals at")]
    assert walks == [(f"goals at cheated's hole, line {CHEAT_LINE}", 1, 2),
                     (f"goals at fails's hole, line {FAIL_LINE}", 2, 2)]


def test_holes_on_a_finished_file_says_there_are_none(daemon, write_script):
    path = write_script(SCRIPT.replace("  cheat\n", "  simp[]\n").replace('  FAIL_TAC "nope"\n', "  simp[]\n"))
    result = daemon.call(m.Holes(str(path), wait=30), timeout=120)
    assert (result.verdict, result.holes) == ("OK", [])
    assert render(result).startswith("NO HOLES: every proof is finished (verdict OK)")


def test_more_holes_than_the_bound_lists_the_rest_without_goals_and_says_so(daemon, write_script):
    count = limits.MAX_POSITIONS + 2
    theorems = "".join(f"Theorem t{n}:\n  !p q. p /\\\\ q ==> q\nProof\n  rpt strip_tac >>\n  cheat\nQED\n\n"
                       .replace("\\\\", "\\") for n in range(count))
    path = write_script("Theory demo\nAncestors arithmetic\n\n" + theorems)
    result = daemon.call(m.Holes(str(path), wait=60), timeout=300)
    assert len(result.holes) == count and result.walked == limits.MAX_POSITIONS
    walked, rest = result.holes[:limits.MAX_POSITIONS], result.holes[limits.MAX_POSITIONS:]
    assert all(goals(h.goals) == [(["p", "q"], "q")] for h in walked)
    assert [h.theorem for h in rest] == [f"t{n}" for n in range(limits.MAX_POSITIONS, count)]
    assert all(h.goals is None and h.unwalked.startswith("Past the 64 holes") for h in rest)
    assert "2 holes past the first 64 walked are listed without goals" in result.message


def test_a_proof_the_daemon_thinks_loops_is_listed_unwalked_with_the_reason(daemon_factory, write_script, tmp_path,
                                                                           monkeypatch):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    daemon = daemon_factory(slow_after_s=1.0)
    path = write_script(SCRIPT.replace('  FAIL_TAC "nope"\n', "  REPEAT ALL_TAC\n"))
    result = daemon.call(m.Holes(str(path), wait=30), timeout=120)
    spins = next(h for h in result.holes if h.theorem == "fails")
    assert spins.kind == "checking" and spins.goals is None
    assert "far longer than the rest, so it may loop" in spins.unwalked, spins
    assert "not walked: Proof fails (line 17) has been checking for" in render(result)
    cheat = next(h for h in result.holes if h.theorem == "cheated")
    assert goals(cheat.goals) == [(["p", "q"], "q")]
    # HOL was asked no goal state in the looping proof (lines 17-22), only at the cheat.
    assert set(goal_lines(log)) == {CHEAT_LINE}, goal_lines(log)


def test_holctl_holes_prints_the_holes(daemon, write_script):
    path = write_script(SCRIPT)
    out = CliRunner().invoke(cli, ["--socket", str(daemon.socket), "--no-start", "holes", str(path), "--wait", "30"])
    assert out.exit_code == 0, out.output
    assert "HOLES: 2 unfinished proof holes" in out.output and "== failed: fails (line 17)" in out.output
