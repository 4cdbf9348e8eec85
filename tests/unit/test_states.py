"""The state names are enums, each defined once, and the wire is unchanged by them: a reply built
with an enum member encodes byte for byte as one built with its string, and every name the docs
list is a member of its enum (so a rename in the code or the docs is caught here)."""

from __future__ import annotations

import enum
import re
from pathlib import Path

import msgspec
import pytest

from holsrv.answers.states import AppliedState, CandidateState, CheckStatus, PositionState
from holsrv.lsp.proofstates import ProofStatus
from holsrv.pool.pool import Start
from holsrv.rpc import framing
from holsrv.rpc import messages as m
from holsrv.server.sessionstatus import ServerState
from holsrv.verdict.filestate import Phase

DOCS = Path(__file__).resolve().parents[2] / "docs"
SKILL = Path(__file__).resolve().parents[2] / "holmcp" / "skill" / "reference.md"


def goal_state(state: str, start: str, status: str) -> m.GoalStateResult:
    return m.GoalStateResult(
        file="/p/aScript.sml", content_hash="ab" * 32, line=3, column=5, state=state, message="",
        server=m.ServerNote(pid=7, start=start), note=status,
    )


def replies(state: str, start: str, status: str, candidate: str, applied: str, server: str,
            check: str) -> list[msgspec.Struct]:
    return [
        goal_state(state, start, status),
        m.GoalStateEntry(line=3, column=None, state=state, message=""),
        m.Proof(name="t", line=4, status=status),
        m.TryCandidate(tactic="simp[]", state=candidate),
        m.Applied(state=applied, reason="", range=m.Range(1, 1, 1, 2), text="x", content_hash=""),
        m.VerifyCheck("proofs", check, "all proved"),
        m.SessionStatus(file="/p/aScript.sml", pid=7, state=server, uptime_s=1.0, idle_s=0.0, footprint_mb=None,
                        max_heap_mb=0, tally=m.Tally(), waiting_calls=0, clients=[]),
    ]


@pytest.mark.parametrize("encode", [framing.encode, msgspec.json.encode], ids=["msgpack", "json"])
def test_a_reply_built_with_enum_members_encodes_byte_identical_to_the_strings(encode):
    for members in [
        (PositionState.PROVED_HERE, Start.RESTARTED, ProofStatus.PARSE_ERROR, CandidateState.NOT_TRIED,
         AppliedState.ROLLBACK_SKIPPED, ServerState.SETTLED, CheckStatus.UNCHECKED),
        (PositionState.GOALS, Start.WARM, ProofStatus.CHECKING, CandidateState.TIMED_OUT,
         AppliedState.KEPT, ServerState.HUNG, CheckStatus.PASSED),
    ]:
        strings = tuple(str.__str__(member) for member in members)
        assert all(type(s) is str for s in strings)
        for with_enum, with_str in zip(replies(*members), replies(*strings), strict=True):
            assert encode(with_enum) == encode(with_str)


def test_a_decoded_reply_compares_equal_to_the_enum_members():
    frame = framing.encode(goal_state(PositionState.LOOPING, Start.NONE, ""))
    reply = framing.decode(framing.reply_decoder, frame[4:])
    assert reply.state == PositionState.LOOPING and type(reply.state) is str
    assert reply.server.start == Start.NONE


def table(text: str, heading: str) -> set[str]:
    """The backticked names in the first column of the table that follows the line `heading`."""
    after = text[text.index(heading) + len(heading):]
    rows = re.match(r"\s*\n((?:\|.*\n)+)", after)
    assert rows is not None, f"no table after {heading!r}"
    names = set()
    for row in rows.group(1).splitlines()[2:]:
        names |= set(re.findall(r"`(\w+)`", row.split("|")[1]))
    return names


def values(states: type[enum.StrEnum]) -> set[str]:
    return {member.value for member in states}


HOLCTL_TABLES = [
    ("A proof's status (`proofs[].status` in diagnostics; the tally counts them):", ProofStatus),
    ("A goalState position's state (`state`):", PositionState),
    ("A `try` candidate's state (`candidates[].state`):", CandidateState),
    ("What `try --apply` did (`applied.state`):", AppliedState),
    ("A `verify` check's status (`checks[].status`):", CheckStatus),
    ("A HOL server's state in `status` (`sessions[].state`):", ServerState),
    ("How the server that answered came to be running (`server.start`):", Start),
]


@pytest.mark.parametrize(("heading", "states"), HOLCTL_TABLES, ids=[s.__name__ for _, s in HOLCTL_TABLES])
def test_each_table_of_states_in_the_docs_lists_exactly_its_enums_members(heading, states):
    assert table((DOCS / "holctl.md").read_text(), heading) == values(states)


def test_the_proof_statuses_hol_sends_are_members_and_the_file_phases_are_the_documented_ones():
    text = (DOCS / "protocol.md").read_text()
    said = text[text.index("### Proof statuses"):].split("\n\n")[1]
    before_which = re.sub(r"\([^)]*\)", "", said).split(", which")[0]
    sent = set(re.findall(r"`(\w+)`", before_which))
    assert sent == {"checking", "proved", "failed", "suspended", "diverged", "cheated"}
    assert sent <= values(ProofStatus)
    assert values(Phase) == {"compiling", "completed", "blocked"}


def test_the_goal_states_the_agents_reference_lists_are_members():
    text = SKILL.read_text()
    section = text[text.index("## Goal states"):].split("\n## ")[0]
    listed = set(re.findall(r"^- `(\w+)`(?:, `(\w+)`)?", section, re.M))
    names = {name for pair in listed for name in pair if name}
    assert names and names <= values(PositionState)
    assert values(PositionState) - names == {"error"}  # a batch's alone, not a single goalState's
