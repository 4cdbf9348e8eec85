"""goalState at many positions in one call: one entry per position, in order, each its own."""

from __future__ import annotations

import os
import time

import msgspec
import pytest
from click.testing import CliRunner
from mcp import Client
from test_goals import SCRIPT, goals, hol_goal_requests, line_of

from holctl.cli import cli
from holmcp.server import build_server
from holsrv.errors import BadRequest, TooManyPositions
from holsrv.rpc import framing, limits
from holsrv.rpc import messages as m

from conftest import goal_lines

# The swap proof of test_goals, a line at a time: before its first tactic, after
# `rpt strip_tac >>`, after `conj_tac`, and after the first branch.
STEPS = [line_of(SCRIPT, "rpt strip_tac >>"), line_of(SCRIPT, "conj_tac"), line_of(SCRIPT, ">- simp[]")]


def batch(path, positions, **fields) -> m.GoalState:
    return m.GoalState(str(path), positions=positions, **fields)


def test_a_batch_of_positions_answers_one_entry_per_position_in_order(daemon, write_script):
    path = write_script(SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    first, second, third = STEPS
    reply = daemon.call(batch(path, [(second, None), (first, 3), (third, None)]))
    assert isinstance(reply, m.GoalStatesResult)
    assert [(e.line, e.column) for e in reply.positions] == [(second, None), (first, 3), (third, None)]
    assert [e.state for e in reply.positions] == ["goals", "goals", "goals"]
    conj, start, branch = reply.positions
    assert (goals(conj.before), goals(conj.goals), conj.line_text) == (["q ∧ p"], ["q", "p"], "  conj_tac")
    assert goals(start.goals) == ["∀p q. p ∧ q ⇒ q ∧ p"] and start.before is None
    assert goals(branch.goals) == ["p"] and branch.theorem == "swap"
    assert reply.content_hash and reply.freshness is not None and reply.freshness.settled


def test_a_bad_positions_entry_carries_its_error_and_the_others_still_answer(daemon, write_script):
    path = write_script(SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    conj = line_of(SCRIPT, "conj_tac")
    reply = daemon.call(batch(path, [(999, None), (conj, None), (1, None), (conj, 200), (conj, 3)]))
    past_end, view, outside, past_line, at = reply.positions
    assert (past_end.state, past_end.code) == ("error", "position_out_of_range") and "999" in past_end.message
    assert (past_line.state, past_line.code) == ("error", "position_out_of_range")
    assert outside.state == "not_in_proof" and "swap" in outside.message
    assert goals(view.goals) == ["q", "p"] and goals(at.goals) == ["q ∧ p"]


def test_more_positions_than_the_bound_is_refused_with_its_own_code(daemon, write_script):
    path = write_script(SCRIPT)
    many = [(1, None)] * (limits.MAX_POSITIONS + 1)
    with pytest.raises(TooManyPositions, match="split them") as refused:
        daemon.call(batch(path, many))
    assert refused.value.code == "too_many_positions"
    assert len(daemon.call(batch(path, many[:limits.MAX_POSITIONS])).positions) == limits.MAX_POSITIONS
    with pytest.raises(BadRequest, match="not both"):
        daemon.call(batch(path, [(1, None)], line=2))
    with pytest.raises(BadRequest, match="empty"):
        daemon.call(batch(path, []))


def test_a_batch_costs_the_one_freshness_check_a_single_position_does(daemon, write_script):
    path = write_script(SCRIPT)
    # Changed "in the future": every look at the file reads it again (files.Reader
    # trusts a stat only once the file is older than the clock's granularity),
    # so the daemon's count of reads counts every freshness check.
    ahead = time.time_ns() + 3600 * 10**9
    os.utime(path, ns=(ahead, ahead))
    daemon.call(m.Diagnostics(str(path), wait=20))
    reader = daemon.daemon.answers.scripts
    before = reader.reads
    daemon.call(m.GoalState(str(path), STEPS[0]))
    single = reader.reads - before
    before = reader.reads
    reply = daemon.call(batch(path, [(line, None) for line in STEPS] + [(STEPS[1], 3), (STEPS[2], 3)]))
    assert [e.state for e in reply.positions] == ["goals"] * 5
    assert reader.reads - before == single, single


def test_a_batch_reuses_the_answers_single_calls_cached_and_asks_hol_only_for_the_rest(
    daemon_factory, write_script, monkeypatch, tmp_path
):
    daemon = daemon_factory(prefetch_per_pass=0)  # `unfinished` fails: nothing asked ahead at its step
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    daemon.call(m.GoalState(str(path), STEPS[1]))  # two walks: before and after the line
    asked = hol_goal_requests(log)
    reply = daemon.call(batch(path, [(STEPS[1], None), (STEPS[2], 3)]))
    assert [e.cached for e in reply.positions] == [True, False]
    assert hol_goal_requests(log) == asked + 1
    assert daemon.call(m.GoalState(str(path), STEPS[2], 3)).cached


def test_a_single_position_request_as_an_old_client_sends_it_answers_as_before(daemon, write_script):
    path = write_script(SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    conj = line_of(SCRIPT, "conj_tac")
    # The frame a client of before batches sends: no `positions`, and `line` always.
    old = msgspec.msgpack.decode(
        msgspec.msgpack.encode({"op": "goalState", "file": str(path), "line": conj, "wait": 25.0}),
        type=m.Request,
    )
    reply = daemon.call(old)
    assert isinstance(reply, m.GoalStateResult)
    assert (reply.state, goals(reply.before), goals(reply.goals)) == ("goals", ["q ∧ p"], ["q", "p"])
    sent = msgspec.msgpack.decode(framing.encode(reply)[4:])
    assert "positions" not in sent and sent["type"] == "goalState" and sent["line"] == conj
    entry = daemon.call(batch(path, [(conj, None)])).positions[0]
    assert (entry.state, entry.message, entry.goals, entry.before) == (
        reply.state, reply.message, reply.goals, reply.before)


def test_a_batch_while_the_file_compiles_waits_for_it_once_and_says_compiling_at_every_position(
    daemon_factory, write_script, monkeypatch, tmp_path
):
    daemon = daemon_factory(prefetch_per_pass=0)  # the wire log counts this call's walks alone
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    monkeypatch.setenv("FAKE_HOL_DECL_MS", "10000")
    path = write_script(SCRIPT)
    reply = daemon.call(batch(path, [(line, None) for line in STEPS] + [(999, None)], wait=3))
    # "starting" only on a machine so loaded that the server took the whole wait to start.
    state = reply.positions[0].state
    assert state in ("compiling", "starting")
    assert [e.state for e in reply.positions] == [state] * 3 + ["error"]
    assert reply.positions[1].line_text == "  conj_tac" and not reply.freshness.settled
    # Only the first position was asked: the file's state holds for the rest.
    assert set(goal_lines(log)) == ({STEPS[0]} if state == "compiling" else set())


# -- holctl and holmcp ------------------------------------------------------


def test_holctl_prints_one_block_per_position_headed_by_it(daemon, write_script):
    path = write_script(SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    conj = line_of(SCRIPT, "conj_tac")
    result = CliRunner().invoke(cli, ["--socket", str(daemon.socket), "--no-start", "goalState", str(path),
                                      "--at", str(conj), "--at", "999", "--at", f"{conj}:3"])
    assert result.exit_code == 0, result.output
    out = result.stdout.splitlines()
    heads = [line for line in out if line.startswith("== ")]
    assert heads == [f"== line {conj} ==", "== line 999 ==", f"== line {conj}, column 3 =="]
    assert out[out.index("== line 999 ==") + 1].startswith("position_out_of_range: ")
    assert "after the line:" in out and sum(line.startswith("(about file content ") for line in out) == 1


@pytest.mark.parametrize(
    "args",
    [("f.sml", "3", "--at", "4"), ("f.sml",), ("f.sml", "--at", "4:x"), ("f.sml", *["--at", "3"] * 65)],
    ids=["both forms", "neither", "not a position", "over the bound"],
)
def test_holctl_refuses_a_bad_batch_before_asking(tmp_path, args):
    result = CliRunner().invoke(cli, ["--socket", str(tmp_path / "absent.sock"), "--no-start", "goalState", *args])
    assert result.exit_code == 2 and "daemon_unreachable" not in result.output, result.output


@pytest.mark.asyncio
async def test_holmcp_goal_state_takes_positions_and_answers_in_text_and_structured_content(daemon, write_script):
    path = write_script(SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    conj = line_of(SCRIPT, "conj_tac")
    # The SDK client checks structured content against the advertised output schema.
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        await client.list_tools()
        result = await client.call_tool("goalState", {"file": str(path), "positions": [[conj], [conj, 3]]})
        single = await client.call_tool("goalState", {"file": str(path), "line": conj})
        both = await client.call_tool("goalState", {"file": str(path), "line": conj, "positions": [[conj]]})
        many = await client.call_tool("goalState", {"file": str(path), "positions": [[conj]] * 65})
    assert not result.is_error, result.content
    entries = result.structured_content["positions"]
    assert [(e["line"], e.get("column")) for e in entries] == [(conj, None), (conj, 3)]
    assert result.content[0].text.startswith(f"== line {conj} ==")
    assert single.structured_content["type"] == "goalState" and not single.is_error
    assert both.is_error and "not both" in both.content[0].text
    assert many.is_error and many.content[0].text.startswith("too_many_positions: ")
