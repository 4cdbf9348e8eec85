"""Properties over generated inputs (hypothesis): framing, positions, the comment scanner, the tally.

Example counts are kept modest so `make test` stays fast; the scanner's
linear time is measured in `bench/scanner_scaling.py`, not asserted here.
"""

from __future__ import annotations

import asyncio
import socket
import typing

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from holsrv.errors import FrameError, PositionOutOfRange
from holsrv.rpc import framing
from holsrv.rpc import messages as m
from holsrv.text import editspan, masking, stepping, textinfo
from holsrv.text.positions import Text, units
from holsrv.verdict import tally
from holsrv.verdict.filestate import FileState

# No example database: runs stay independent and leave no `.hypothesis/` behind.
PROPERTY = settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
ENCODINGS = ("utf-8", "utf-16")

# -- framing -------------------------------------------------------------------

seconds = st.floats(min_value=0, max_value=3600, allow_nan=False)
lines = st.integers(min_value=-(2**63), max_value=2**64 - 1)
texts = st.text(max_size=200)
files = st.text(max_size=80).map(lambda s: "/" + s)
optional_wait = st.none() | seconds

REQUESTS: dict[type, st.SearchStrategy] = {
    m.Diagnostics: st.builds(m.Diagnostics, files, seconds, st.booleans()),
    m.GoalState: st.builds(m.GoalState, files, lines, st.none() | lines, seconds, st.booleans()),
    m.Hover: st.builds(m.Hover, files, lines, lines, optional_wait),
    m.Definition: st.builds(m.Definition, files, lines, lines, optional_wait),
    m.References: st.builds(m.References, files, lines, lines, optional_wait),
    m.Completion: st.builds(m.Completion, files, lines, lines, optional_wait),
    m.DocumentSymbol: st.builds(m.DocumentSymbol, files, optional_wait),
    m.WorkspaceSymbol: st.builds(m.WorkspaceSymbol, files, texts, optional_wait, lines, lines),
    m.Eval: st.builds(m.Eval, files, texts, seconds),
    m.RetryCompile: st.builds(m.RetryCompile, files),
    m.Restart: st.builds(m.Restart, files, st.none() | st.integers(min_value=0, max_value=2**31)),
    m.Stop: st.builds(m.Stop, files),
    m.Status: st.just(m.Status()),
    m.Shutdown: st.just(m.Shutdown()),
    m.Metrics: st.just(m.Metrics()),
    m.RestartDaemon: st.just(m.RestartDaemon()),
    m.Search: st.builds(m.Search, files, texts, lines, lines, optional_wait, texts,
                        st.sampled_from(["ancestors", "all"]) | st.lists(texts, max_size=4), texts, texts, texts),
    m.Holmake: st.builds(m.Holmake, files, texts, lines, st.booleans()),
    m.Try: st.builds(m.Try, files, lines, st.lists(texts, max_size=10), st.none() | lines, optional_wait, seconds,
                     st.booleans()),
    m.GoalDiff: st.builds(m.GoalDiff, files, lines, lines, st.none() | lines, st.none() | lines, seconds),
}
REQUESTS[m.Logs] = st.builds(m.Logs, files, lines)
REQUESTS[m.Uses] = st.builds(m.Uses, files, texts, optional_wait, texts)
REQUESTS[m.Job] = st.builds(m.Job, texts, seconds, st.booleans())
REQUESTS[m.EditorAttach] = st.builds(m.EditorAttach, texts)
REQUESTS[m.Verify] = st.builds(m.Verify, files, st.lists(texts, max_size=4), texts, texts, seconds, st.booleans())
REQUESTS[m.Holes] = st.builds(m.Holes, files, seconds, st.booleans())
requests = st.one_of(*REQUESTS.values())


def test_the_generators_cover_every_request_type():
    assert set(REQUESTS) == set(typing.get_args(m.Request))


@PROPERTY
@given(requests)
def test_every_request_survives_a_frame_round_trip(request):
    frame = framing.encode(request)
    assert framing.body_length(frame[:4]) == len(frame) - 4
    assert framing.decode(framing.request_decoder, frame[4:]) == request


@PROPERTY
@given(st.lists(requests, min_size=1, max_size=8), st.integers(min_value=1, max_value=64))
def test_frames_reassemble_however_the_stream_is_cut(batch, chunk):
    stream = b"".join(framing.encode(r) for r in batch)
    got = asyncio.run(_read_all([stream[i:i + chunk] for i in range(0, len(stream), chunk)]))
    assert [framing.decode(framing.request_decoder, body) for body in got] == batch


@PROPERTY
@given(st.binary(max_size=512))
def test_random_bytes_never_crash_a_decoder_beyond_frame_error(data):
    for decoder in (framing.request_decoder, framing.hello_decoder, framing.reply_decoder):
        try:
            framing.decode(decoder, data)
        except FrameError:
            pass


@PROPERTY
@given(st.binary(max_size=256))
def test_random_bytes_on_a_stream_are_frames_a_frame_error_or_the_end(data):
    try:
        bodies = asyncio.run(_read_all([data]))
    except FrameError:
        return
    assert sum(4 + len(b) for b in bodies) == len(data)


@PROPERTY
@given(st.binary(max_size=256))
def test_random_bytes_on_a_blocking_socket_are_frames_a_frame_error_or_the_end(data):
    left, right = socket.socketpair()
    with left, right:
        left.sendall(data)
        left.close()
        right.settimeout(5)
        try:
            while framing.recv_body(right) is not None:
                pass
        except FrameError:
            pass


@PROPERTY
@given(requests, st.data())
def test_a_mutated_request_frame_decodes_to_a_request_or_a_frame_error(request, data):
    body = bytearray(framing.encode(request)[4:])
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        at = data.draw(st.integers(min_value=0, max_value=len(body) - 1))
        body[at] = data.draw(st.integers(min_value=0, max_value=255))
    try:
        decoded = framing.decode(framing.request_decoder, bytes(body))
    except FrameError:
        return
    assert isinstance(decoded, typing.get_args(m.Request))


async def _read_all(chunks: list[bytes]) -> list[bytes]:
    """Every frame body in `chunks`, fed to a StreamReader as the network would."""
    reader = asyncio.StreamReader()  # inside the loop asyncio.run made
    for chunk in chunks:
        reader.feed_data(chunk)
    reader.feed_eof()
    bodies = []
    while (body := await framing.read_body(reader, rest_timeout=5)) is not None:
        bodies.append(body)
    return bodies


# -- positions -----------------------------------------------------------------

unicode_text = st.text(st.characters(codec="utf-8"), max_size=120)


@PROPERTY
@given(unicode_text, st.data())
def test_every_position_round_trips_through_both_encodings(text, data):
    doc = Text(text)
    line = data.draw(st.integers(min_value=1, max_value=len(doc.lines)))
    col = data.draw(st.integers(min_value=1, max_value=len(doc.lines[line - 1]) + 1))
    for encoding in ENCODINGS:
        lsp = doc.to_lsp(line, col, encoding)
        assert lsp == {"line": line - 1, "character": units(doc.lines[line - 1][: col - 1], encoding)}
        assert doc.from_lsp(lsp, encoding) == (line, col)


@PROPERTY
@given(unicode_text, st.integers(min_value=0, max_value=400))
def test_a_unit_offset_inside_a_character_lands_on_a_column_of_its_line(text, character):
    doc = Text(text)
    for line0 in range(len(doc.lines)):
        for encoding in ENCODINGS:
            line, col = doc.from_lsp({"line": line0, "character": character}, encoding)
            assert line == line0 + 1 and 1 <= col <= len(doc.lines[line0]) + 1
            # Never short of the offset, and never a whole character past it.
            covered = units(doc.lines[line0][: col - 1], encoding)
            assert covered >= min(character, units(doc.lines[line0], encoding))


@PROPERTY
@given(unicode_text, st.integers(min_value=-(2**64), max_value=2**64))
def test_a_line_or_column_outside_the_text_is_position_out_of_range(text, n):
    doc = Text(text)
    for line, col in [(n, 1), (1, n)]:
        inside = 1 <= line <= len(doc.lines) and 1 <= col <= len(doc.lines[line - 1]) + 1
        if inside:
            continue
        for encoding in ENCODINGS:
            with pytest.raises(PositionOutOfRange):
                doc.to_lsp(line, col, encoding)


def test_astral_characters_are_two_utf16_units_and_four_utf8_bytes():
    doc = Text("a𝔸b")
    assert doc.to_lsp(1, 3, "utf-16") == {"line": 0, "character": 3}
    assert doc.to_lsp(1, 3, "utf-8") == {"line": 0, "character": 5}


# -- the comment and string scanner --------------------------------------------

# Generated SML as (text, kind) pieces: "code" must come out unchanged, and
# every other kind (comments, strings, quotations) blanked.  The alphabets
# keep each piece's delimiters out of the pieces around it.
_CODE = st.text(st.sampled_from("abcxyz_'019 \t\n.,;:=+-<>[]{}|!#$%&^~/\\∀⇒λ"), min_size=1, max_size=12)
_COMMENT_TEXT = st.text(st.sampled_from('abc \n")`‘’“”\\∀'), max_size=8)
_STRING_TEXT = st.lists(
    st.sampled_from(list("abc ∀(*)`‘’“”")) | st.sampled_from(["\\\\", '\\"', "\\n", "\\t", "\\\n"]), max_size=8
).map("".join)


def _comment(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.lists(inner | _COMMENT_TEXT, max_size=4).map(lambda parts: "(*" + "".join(parts) + "*)")


_COMMENTS = st.recursive(_comment(st.nothing()), _comment, max_leaves=8)
_QUOTATIONS = st.one_of(
    st.text(st.sampled_from("ab ∀\n(*)\""), min_size=1, max_size=8).map(lambda s: f"`{s}`"),
    st.text(st.sampled_from("ab ∀\n(*)\""), max_size=8).map(lambda s: f"``{s}``"),
    st.text(st.sampled_from("ab ∀\n(*)\"`"), max_size=8).map(lambda s: f"‘{s}’"),
    st.text(st.sampled_from("ab ∀\n(*)\"`"), max_size=8).map(lambda s: f"“{s}”"),
)
_PIECES = st.one_of(
    _CODE.map(lambda s: (s, "code")),
    _COMMENTS.map(lambda s: (s, "comment")),
    _STRING_TEXT.map(lambda s: (f'"{s}"', "string")),
    _QUOTATIONS.map(lambda s: (s, "quotation")),
)


@st.composite
def _sml(draw) -> list[tuple[str, str]]:
    pieces = draw(st.lists(_PIECES, max_size=25))
    # Code between any two blanked pieces, so `*)` and `(*` never meet by accident.
    spaced: list[tuple[str, str]] = []
    for piece in pieces:
        if spaced and piece[1] != "code" and spaced[-1][1] != "code":
            spaced.append((" ", "code"))
        spaced.append(piece)
    tail = draw(st.sampled_from(["", "(* unclosed (* nested *) ", '"unterminated']))
    if tail:
        spaced.append((" " + tail, "open"))
    return spaced


@PROPERTY
@given(_sml())
def test_the_scanner_blanks_comments_strings_and_quotations_and_keeps_code_and_newlines(pieces):
    text = "".join(piece for piece, _ in pieces)
    blanked = masking.blank_comments_and_strings(text)
    assert len(blanked) == len(text)
    assert [i for i, c in enumerate(blanked) if c == "\n"] == [i for i, c in enumerate(text) if c == "\n"]
    at = 0
    for piece, kind in pieces:
        out = blanked[at:at + len(piece)]
        if kind == "code":
            assert out == piece, f"code {piece!r} became {out!r} in {text!r}"
        elif kind == "open":
            # `" (* …` runs to the end; `"…` to the end of its line (here the end).
            assert out[0] == " " and set(out[1:]) <= {" ", "\n"}, f"{piece!r} became {out!r}"
        else:
            assert set(out) <= {" ", "\n"}, f"{kind} {piece!r} became {out!r} in {text!r}"
        at += len(piece)


@PROPERTY
@given(_sml())
def test_cheat_inside_comments_strings_or_quotations_is_never_reported(pieces):
    hidden = "".join(
        piece.replace("a", "cheat", 1) if kind not in ("code", "open") else piece for piece, kind in pieces
    )
    text = "Theorem t:\n  T\nProof\n  " + hidden.replace("\nQED", "\n QED") + "\nQED\n"
    assert list(textinfo.of(text).cheats) == [], text


# -- the tally -----------------------------------------------------------------

URI = "file:///p/tallyScript.sml"
NAMES = ["a", "b", "c", "b#2", "t[x]", "d"]
STATUSES = ["checking", "proved", "failed", "suspended", "diverged", "cheated"]

_STATE = st.fixed_dictionaries({
    "name": st.sampled_from(NAMES + [""]),
    "status": st.sampled_from(STATUSES),
    "pos": st.fixed_dictionaries({"line": st.integers(min_value=0, max_value=50), "character": st.just(0)}),
})
_EVENTS = st.one_of(
    st.tuples(st.just("$/proofStates"), st.lists(_STATE, max_size=6)),
    st.tuples(st.just("$/compileCompleted"), st.lists(st.sampled_from(NAMES), unique=True)),
    st.tuples(st.just("edit"), st.integers(min_value=0, max_value=3)),
)


@PROPERTY
@given(st.lists(st.tuples(_EVENTS, st.floats(min_value=0, max_value=30, allow_nan=False)), max_size=40))
def test_the_tally_follows_the_last_word_on_each_proof_and_the_census_prunes_it(events):
    file = FileState(URI)
    now, version = 0.0, 1
    file.sent(version, "Theory t\n", now)
    model: dict[str, str] = {}
    for (kind, payload), step in events:
        now += step
        if kind == "$/proofStates":
            assert file.apply(kind, {"uri": URI, "states": payload}, now)
            for state in payload:
                if state["name"]:
                    model[state["name"]] = state["status"]
        elif kind == "$/compileCompleted":
            assert file.apply(kind, {"uri": URI, "version": version, "declared": payload}, now)
            model = {name: status for name, status in model.items() if name in payload}
            assert set(file.proofs) <= set(payload), "the census kept an undeclared proof"
        else:
            version += 1
            file.sent(version, "Theory t\n" + "\n" * payload, now)
        _check_tally(file, model, now)


def _check_tally(file: FileState, model: dict[str, str], now: float) -> None:
    assert {name: entry.status for name, entry in file.proofs.items()} == model
    for entry in file.proofs.values():
        assert (entry.checking_since is not None) == (entry.status == "checking")
        assert file.checking_for(entry, now) >= 0
    assert file.slowest_s >= 0 and file.finished >= 0 and file.attempts >= 0
    assert [e.name for e in file.checking()] == [n for n, s in model.items() if s == "checking"]
    text = " ".join(name.split("#")[0].split("[")[0] for name in model)
    counts = tally.tally_of(tally.answer_status(e.status) for e in stepping.run(tally.visible_steps(file, text)))
    assert all(value >= 0 for value in msgspec.structs.asdict(counts).values())
    assert counts.total == len(model)
    assert counts.unchecked == sum(status == "cheated" for status in model.values())
    assert counts.checking == sum(status == "checking" for status in model.values())


# -- where an edit falls among the proofs ----------------------------------------

_DECL = st.sampled_from([
    "Theorem a:\n  T\nProof\n  simp[]\nQED\n",
    "Theorem b:\n  T\nProof\n  simp[] >> fs[]\n",  # no QED: ends where the next declaration starts
    "Resume b[l]:\n  simp[]\nQED\n",
    "Definition f_def:\n  f x = x\nEnd\n",
    "val _ = ();\n",
    "\n",
])


@st.composite
def _edited(draw) -> tuple[str, str]:
    old = "Theory t\n\n" + "".join(draw(st.lists(_DECL, max_size=12)))
    start = draw(st.integers(0, len(old)))
    end = draw(st.integers(start, min(len(old), start + 40)))
    return old, old[:start] + draw(st.sampled_from(["", "x", "\n", "QED\n", "Proof\n"])) + old[end:]


@PROPERTY
@given(_edited())
def test_an_edits_proof_is_the_one_a_walk_over_every_block_finds(edit):
    old, new = edit
    start, old_end, _ = editspan.edit_span(old, new)
    blocks = textinfo.of(old).blocks
    spill = next((b if old_end > b.body_end else None for b in blocks if b.body_start <= start < b.body_end), None)
    assert textinfo.spilling_proof(old, new) == spill
    confined = any(b.body_start <= start and old_end <= b.body_end for b in blocks)
    file = FileState("file:///p/tScript.sml")
    file.sent(1, old, 0.0)
    file.sent(2, new, 0.0)
    assert file.restarts_from == (float("inf") if confined else old.count("\n", 0, start))
