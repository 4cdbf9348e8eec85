"""`$/proofStates`, the one bulk notification, decoded a transition at a time
(docs/protocol.md#proof-states-and-the-census). Pure."""

from __future__ import annotations

import msgspec


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
