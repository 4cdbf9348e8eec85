"""`$/proofStates`, the one bulk notification, decoded a transition at a time
(docs/protocol.md#proof-states-and-the-census), and the names of a proof's status. Pure."""

from __future__ import annotations

import enum

import msgspec


class ProofStatus(enum.StrEnum):
    """A proof's status: HOL's pool's word (the first six, docs/protocol.md#proof-statuses), and
    the daemon's own as diagnostics lists a proof (the last three).  Defined here, where HOL's
    word is decoded, the lowest layer that compares it (`quirks`).

    A `StrEnum`: a member is its wire string (msgspec encodes it as that string), so answers and
    the wire carry it unchanged; `ProofState.status` stays `str`, since HOL may send a status
    this enum does not know (the census then distrusts the pool's word, see `census`)."""

    CHECKING = "checking"  # queued or running
    PROVED = "proved"
    FAILED = "failed"
    SUSPENDED = "suspended"  # subgoals left without a proved `Resume`
    DIVERGED = "diverged"
    # In the pool's word: not being checked (dropped by an edit, or never taken); as listed: the
    # proof uses cheat (the pool's `cheated` is listed `unchecked`, see `tally.answer_status`).
    CHEATED = "cheated"
    UNCHECKED = "unchecked"  # the pool dropped its check and has not run it since
    PARSE_ERROR = "parse_error"  # HOL checked it only after recovering from a parse error in it
    UNREPORTED = "unreported"  # nothing of the current text was checked (blocked, starting)


class StatePosition(msgspec.Struct, gc=False):
    line: int = 0
    character: int = 0


class ProofState(msgspec.Struct, gc=False):
    """One transition of the proof pool (docs/protocol.md#proof-states-and-the-census)."""

    name: str = ""
    status: str = ""
    pos: StatePosition = msgspec.field(default_factory=StatePosition)
    detail: str = ""


class ProofStates(msgspec.Struct):
    """`$/proofStates` params, with each state left undecoded: after an edit
    above them HOL re-announces every proof of a file in one batch (30,000
    entries for the largest scripts), which decoded at once would hold the
    event loop for over 10 ms.  `proof_state` decodes each, in the slices
    the batch is folded in by, into a struct the cycle collector never
    walks (as dicts, 60,000 objects it would)."""

    uri: str = ""
    states: list[msgspec.Raw] = []


_proof_state = msgspec.json.Decoder(ProofState)


def proof_state(state: msgspec.Raw | dict) -> ProofState:
    """One transition, from its JSON (read leniently if it is not of the usual shape)."""
    if isinstance(state, msgspec.Raw):
        try:
            return _proof_state.decode(state)
        except msgspec.ValidationError:
            state = msgspec.json.decode(state)
    if not isinstance(state, dict):
        return ProofState()
    pos = state.get("pos")
    line = pos.get("line") if isinstance(pos, dict) else 0
    return ProofState(
        name=str(state.get("name") or ""), status=str(state.get("status") or ""),
        pos=StatePosition(line=line if isinstance(line, int) else 0), detail=str(state.get("detail") or ""),
    )


# Notifications whose params are decoded into structs rather than dicts.
TYPED_PARAMS: dict[str, type] = {"$/proofStates": ProofStates}
