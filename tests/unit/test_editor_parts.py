"""The editor bridge's pieces that need no process: the bounded outbox, columns between encodings, edits."""

from __future__ import annotations

import asyncio

import pytest

from holctl.lsp.documents import Document
from holctl.lsp.positions import column, convert
from holsrv.server.fanout import Fanout, Outbox


def test_a_full_outbox_drops_progress_first_and_counts_what_it_dropped():
    box: Outbox[str] = Outbox(3)
    for frame, droppable in [("diagnostics 1", False), ("progress 1", True), ("proof states 1", False),
                             ("diagnostics 2", False)]:
        box.put(frame, droppable)
    assert box.dropped == 1
    assert [asyncio.run(box.get()) for _ in range(len(box))] == ["diagnostics 1", "proof states 1", "diagnostics 2"]


def test_a_full_outbox_with_no_progress_drops_its_oldest_frame():
    box: Outbox[str] = Outbox(2)
    for frame in ("diagnostics 1", "proof states 1", "diagnostics 2"):
        box.put(frame)
    assert box.dropped == 1
    assert [asyncio.run(box.get()) for _ in range(len(box))] == ["proof states 1", "diagnostics 2"]


@pytest.mark.asyncio
async def test_an_outbox_hands_out_its_frames_in_order_as_they_come():
    box: Outbox[int] = Outbox(10)
    getting = asyncio.ensure_future(box.get())
    await asyncio.sleep(0)
    box.put(1)
    box.put(2)
    async with asyncio.timeout(5):
        assert [await getting, await box.get()] == [1, 2]


def test_a_listener_that_fails_does_not_keep_the_others_from_a_notification():
    fanout = Fanout()
    got = []

    def broken(method, params):
        raise RuntimeError("bug")

    fanout.subscribe(broken)
    unsubscribe = fanout.subscribe(lambda method, params: got.append(method))
    fanout.publish("$/proofStates", {})
    unsubscribe()
    fanout.publish("$/proofStates", {})
    assert got == ["$/proofStates"]


LINE = "  ∀x. 𝔸 x ⇒ y"


def test_columns_convert_between_bytes_utf16_units_and_characters():
    at_y = LINE.index("y")
    assert column(LINE, len(LINE[:at_y].encode()), "utf-8", "utf-16") == len(LINE[:at_y].encode("utf-16-le")) // 2
    assert column(LINE, len(LINE[:at_y].encode("utf-16-le")) // 2, "utf-16", "utf-8") == len(LINE[:at_y].encode())
    assert column(LINE, 3, "utf-16", "utf-16") == 3


def test_positions_in_a_message_are_converted_on_the_line_of_the_document_they_are_about():
    lines = {"file:///a": ["x", LINE]}.get
    message = {"uri": "file:///a", "range": {"start": {"line": 1, "character": len(LINE[:6].encode())}}}
    converted = convert(message, "file:///a", lines, "utf-8", "utf-16")
    assert converted["range"]["start"]["character"] == len(LINE[:6].encode("utf-16-le")) // 2
    # A file the editor does not have open keeps its columns.
    other = {"uri": "file:///b", "range": {"start": {"line": 1, "character": 7}}}
    assert convert(other, "file:///a", lines, "utf-8", "utf-16") == other


def test_a_ranged_edit_in_utf16_units_lands_after_a_character_outside_the_basic_plane():
    doc = Document("file:///a", "p\n" + LINE)
    units = len(LINE[:LINE.index("x", 5)].encode("utf-16-le")) // 2  # the x after 𝔸
    doc.apply([{"range": {"start": {"line": 1, "character": units}, "end": {"line": 1, "character": units + 1}},
                "text": "z"}], "utf-16")
    assert doc.text == "p\n" + LINE.replace("𝔸 x", "𝔸 z")
    doc.apply([{"text": "whole"}], "utf-16")
    assert doc.text == "whole"


def test_a_ranged_edit_counts_lines_of_the_text_the_edit_before_it_left():
    doc = Document("file:///a", "ab\ncd")
    doc.apply([{"range": {"start": {"line": 0, "character": 2}, "end": {"line": 0, "character": 2}}, "text": "\nXY"},
               {"range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 0}}, "text": "Z"}],
              "utf-16")
    assert doc.text == "ab\nXY\nZcd"
