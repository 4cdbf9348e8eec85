"""The typed HOL layer (holsrv/lsp/hol.py) against the fake HOL's real answers, and its decoding alone."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fake_hol.lsp_client import FAST_ENV

from holsrv.errors import LspError
from holsrv.lsp import hol, replies
from holsrv.lsp.client import LspClient

from conftest import FAKE_HOL

WAIT_S = 10.0

SCRIPT = """\
Theory demo
Ancestors arithmetic

Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem wrong:
  !p q. p /\\ q ==> q
Proof
  rpt strip_tac >> FAIL_TAC "nope"
QED

Theorem uses:
  !n:num. n + 0 = n
Proof
  metis_tac[add0]
QED
"""

LOOPING_SCRIPT = """\
Theory demo
Ancestors arithmetic

Theorem spin:
  !n:num. n = n
Proof
  LOOP_TAC >> simp[]
QED
"""

BLOCKED_SCRIPT = """\
Theory demo
Ancestors nosuchthing

Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED
"""


def at(text: str, needle: str, skip: int = 0) -> replies.Position:
    """The LSP position `skip` characters into the first `needle` (the scripts are ASCII)."""
    offset = text.index(needle) + skip
    line = text.count("\n", 0, offset)
    return replies.Position(line=line, character=offset - (text.rfind("\n", 0, offset) + 1))


class Notes:
    """Every notification the server sent, and bounded waits for the ones a test needs."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, dict]] = []
        self._arrived = asyncio.Event()

    def __call__(self, method: str, params: dict) -> None:
        self.seen.append((method, params))
        self._arrived.set()

    async def until(self, wanted: Callable[[str, dict], bool], count: int = 1) -> list[dict]:
        async with asyncio.timeout(WAIT_S):
            while len(found := [p for m, p in self.seen if wanted(m, p)]) < count:
                self._arrived.clear()  # no await since the check: nothing can slip in between
                await self._arrived.wait()
        return found


def method_is(name: str) -> Callable[[str, dict], bool]:
    return lambda method, _params: method == name


@dataclass
class Hol:
    calls: hol.HolCalls
    lsp: LspClient
    notes: Notes
    path: Path
    text: str


@contextlib.asynccontextmanager
async def fake_hol(tmp_path: Path, text: str, env: dict | None = None, compiled: bool = True) -> AsyncIterator[Hol]:
    """The fake `hol lsp --lsp-check-proofs` with `text` open, once compiled unless `compiled` is False."""
    path = tmp_path / "demoScript.sml"
    path.write_text(text, encoding="utf-8")
    with open(tmp_path / "fake.stderr", "wb") as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(FAKE_HOL), "lsp", "--lsp-check-proofs", cwd=tmp_path,
            env={**os.environ, **FAST_ENV, **(env or {})},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr,
        )
    pid = proc.pid
    assert proc.stdout is not None and proc.stdin is not None
    notes = Notes()
    lsp = LspClient(proc.stdout, proc.stdin, notes)
    reader = asyncio.create_task(lsp.run())

    async def request(method: str, params: dict[str, Any], timeout: float | None) -> Any:
        return await lsp.request(method, params, timeout or WAIT_S)

    async def notify(method: str, params: dict[str, Any]) -> None:
        await lsp.notify(method, params, WAIT_S)

    uri = replies.uri_of(path)
    try:
        await lsp.initialize(WAIT_S)
        await notify("textDocument/didOpen",
                     {"textDocument": {"uri": uri, "languageId": "holscript", "version": 1, "text": text}})
        if compiled:
            await notes.until(method_is("$/compileCompleted"))
        yield Hol(hol.HolCalls(uri, request, notify), lsp, notes, path, text)
    finally:
        await lsp.shutdown(WAIT_S)
        proc.stdin.close()
        try:
            async with asyncio.timeout(WAIT_S):
                await proc.wait()
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            await proc.wait()
        await reader


# -- against the fake -------------------------------------------------------------


@pytest.mark.asyncio
async def test_goal_state_inside_a_proof_decodes_theorem_step_and_goals(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        reply = await h.calls.goal_state(at(h.text, "simp[]"))
    assert isinstance(reply, replies.GoalState)
    assert (reply.theorem, reply.step, reply.status) == ("add0", 1, "ok")
    assert reply.goals == [replies.Goal(asms=[], goal="n + 0 = n")]
    assert reply.error == "" and reply.failed_range is None and reply.note == ""
    assert hol.strip_ansi(reply.pretty).strip().endswith("n + 0 = n")
    assert hol.is_settled(reply) and not hol.is_pending(reply) and not hol.walk_timed_out(reply)


@pytest.mark.asyncio
async def test_goal_state_outside_a_proof_is_none(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        assert await h.calls.goal_state(at(h.text, "Theorem add0")) is None
        assert await h.calls.goal_state(at(h.text, "Ancestors")) is None


@pytest.mark.asyncio
async def test_goal_state_past_a_failing_step_decodes_the_error_and_failed_range(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        reply = await h.calls.goal_state(at(h.text, '"nope"\nQED', len('"nope"\n')))
    assert isinstance(reply, replies.GoalState)
    assert reply.error == 'Tactic `FAIL_TAC "nope"` failed to apply'
    assert reply.failed_range is not None
    assert reply.failed_range.start == at(SCRIPT, 'FAIL_TAC "nope"')
    assert reply.failed_range.end == at(SCRIPT, 'FAIL_TAC "nope"', len('FAIL_TAC "nope"'))
    assert reply.goals and not hol.walk_timed_out(reply)


@pytest.mark.asyncio
async def test_goal_state_is_pending_while_the_first_compile_runs_and_full_once_it_completes(tmp_path):
    # Each declaration takes a second, so the request lands while the compile runs.
    async with fake_hol(tmp_path, SCRIPT, env={"FAKE_HOL_DECL_MS": "1000"}, compiled=False) as h:
        early = await h.calls.goal_state(at(h.text, "simp[]"))
        await h.notes.until(method_is("$/compileCompleted"))
        late = await h.calls.goal_state(at(h.text, "simp[]"))
    assert early == replies.PENDING and hol.is_pending(early) and not hol.is_settled(early)
    assert isinstance(late, replies.GoalState) and late.theorem == "add0" and not hol.is_pending(late)


@pytest.mark.asyncio
async def test_a_walk_that_runs_out_of_time_is_recognised_and_not_settled(tmp_path):
    async with fake_hol(tmp_path, LOOPING_SCRIPT) as h:
        reply = await h.calls.goal_state(at(h.text, "simp[]"))
    assert isinstance(reply, replies.GoalState) and reply.theorem == "spin"
    assert hol.walk_timed_out(reply) and not hol.is_settled(reply)
    assert reply.goals == [] and reply.pretty == ""


@pytest.mark.asyncio
async def test_hover_decodes_markdown_contents_and_range(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        reply = await h.calls.hover(at(h.text, "add0]"))
        blank = await h.calls.hover(at(h.text, "\n\nTheorem wrong", 1))
    assert reply is not None and isinstance(reply.contents, replies.MarkupContent)
    assert reply.contents.kind == "markdown"
    assert reply.text == "```\nval add0: Thm.thm\n```\n\n---\n\n```\n⊢ ∀n. n + 0 = n\n```"
    assert reply.range == replies.Range(start=at(SCRIPT, "add0]"), end=at(SCRIPT, "add0]", 4))
    assert blank is None


@pytest.mark.asyncio
async def test_definition_of_a_theorem_in_the_file_gives_its_declaration_and_name(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        targets = await h.calls.definition(at(h.text, "add0]"))
        nothing = await h.calls.definition(at(h.text, "\n\nTheorem wrong", 1))
    assert len(targets) == 1
    target = targets[0]
    assert target.path == str(h.path)
    assert target.range.start == at(SCRIPT, "Theorem add0")
    assert target.selection_range == replies.Range(start=at(SCRIPT, "add0:"), end=at(SCRIPT, "add0:", 4))
    assert nothing == []


@pytest.mark.asyncio
async def test_references_refused_by_hol_are_unsupported_not_an_error(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        reply = await h.calls.references(at(h.text, "add0]"))
    assert reply == replies.Unsupported("textDocument/references", "unknown method: textDocument/references")


@pytest.mark.asyncio
async def test_a_json_rpc_error_carries_its_code_apart_from_its_message(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        with pytest.raises(LspError) as caught:
            await h.lsp.request("textDocument/formatting", {"textDocument": {"uri": h.calls.uri}}, WAIT_S)
    assert caught.value.rpc_code == hol.UNKNOWN_METHOD and caught.value.detail == ""
    assert hol.is_unknown_method(caught.value, "textDocument/formatting")
    assert not hol.is_unknown_method(caught.value, "textDocument/references")


@pytest.mark.asyncio
async def test_completion_of_a_prefix_lists_the_files_theorems(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        items, incomplete = await h.calls.completion(at(h.text, "add0]", 2))
        _, empty_is_incomplete = await h.calls.completion(at(h.text, "\n\nTheorem wrong", 1))
    mine = [i for i in items if i.label == "add0"]
    assert mine == [replies.CompletionItem(label="add0", kind=21, detail="demoTheory")]
    assert incomplete is False and empty_is_incomplete is True


@pytest.mark.asyncio
async def test_document_symbols_come_as_a_tree_of_the_declarations(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        symbols = await h.calls.document_symbol()
    assert [(s.name, s.kind, s.detail) for s in symbols] == [
        ("demo", 2, "Theory"), ("add0", 14, "Theorem"), ("wrong", 14, "Theorem"), ("uses", 14, "Theorem"),
    ]
    add0 = symbols[1]
    assert add0.selection_range.start == at(SCRIPT, "add0:") and add0.range.start == at(SCRIPT, "Theorem add0")
    assert add0.children == []


@pytest.mark.asyncio
async def test_workspace_symbol_finds_the_files_theorem_and_stored_ones(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        found = await h.calls.workspace_symbol("add0")
        stored = await h.calls.workspace_symbol("ADD_COMM")
    assert [(s.name, s.kind, s.container_name, s.location.uri) for s in found] == [
        ("add0", 14, "this file", h.calls.uri)
    ]
    assert found[0].location.range.start.line == at(SCRIPT, "Theorem add0").line
    assert any(s.name == "ADD_COMM" and s.container_name == "arithmeticTheory" for s in stored)


@pytest.mark.asyncio
async def test_eval_decodes_printed_output_and_type_errors(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        printed = await h.calls.eval("PolyML.print (1 + 2);", WAIT_S)
        wrong = await h.calls.eval("val x = 1;\nPolyML.print (x + true);", WAIT_S)
    assert printed == [replies.ToplevelOut(pos=replies.Position(0, 0), body="3\n")]
    assert replies.eval_output(printed) == "3\n"
    errors = [r for r in wrong if isinstance(r, replies.ErrorReport)]
    assert len(errors) == 1 and errors[0].hard
    assert errors[0].msg.startswith("Type error in function application.")
    assert errors[0].pos is not None and errors[0].pos.start.line == 1
    assert replies.eval_output(wrong) == ""


@pytest.mark.asyncio
async def test_retry_compile_makes_hol_retry_a_blocked_file(tmp_path):
    wire = tmp_path / "wire.jsonl"
    async with fake_hol(tmp_path, BLOCKED_SCRIPT, env={"FAKE_HOL_LOG": str(wire)}, compiled=False) as h:
        await h.notes.until(method_is("$/compileBlocked"))
        [shown] = await h.notes.until(method_is("window/showMessage"))  # HOL's notice follows the block
        assert await h.calls.goal_state(at(h.text, "simp[]")) is None  # blocked: no goal state
        await h.calls.retry_compile()
        await h.notes.until(method_is("$/compileBlocked"), count=2)
    assert hol.is_not_compiling_notice(shown["message"])
    # The fake also takes the manual's {uri}; the real server reads only textDocument.uri
    # (docs/protocol.md#client-notifications).
    sent = [json.loads(line)["msg"] for line in wire.read_text().splitlines()]
    retries = [m["params"] for m in sent if m.get("method") == "$/hol/retryCompile"]
    assert retries == [{"textDocument": {"uri": h.calls.uri}}]


@pytest.mark.asyncio
async def test_the_pools_proof_failure_diagnostic_is_recognised(tmp_path):
    async with fake_hol(tmp_path, SCRIPT) as h:
        def proof_failed(method: str, params: dict) -> bool:
            return method == "textDocument/publishDiagnostics" and any(
                hol.is_proof_diagnostic(d["message"]) for d in params["diagnostics"]
            )

        published = (await h.notes.until(proof_failed))[0]["diagnostics"]
    failures = [d for d in published if hol.is_proof_failure(d["message"])]
    assert len(failures) == 1 and "FAIL_TAC: nope" in failures[0]["message"]
    assert not any(hol.is_parse_recovery(d) for d in published)


# -- decoding alone ----------------------------------------------------------------


def _rng(line: int, a: int, b: int) -> dict:
    return {"start": {"line": line, "character": a}, "end": {"line": line, "character": b}}


def test_flat_symbol_information_is_nested_under_its_container():
    flat = [
        {"name": "demo", "kind": 2, "location": {"uri": "file:///d", "range": _rng(0, 0, 11)}},
        {"name": "ty", "kind": 10, "location": {"uri": "file:///d", "range": {
            "start": {"line": 2, "character": 0}, "end": {"line": 4, "character": 3}}}},
        {"name": "A", "kind": 9, "containerName": "ty", "location": {"uri": "file:///d", "range": _rng(3, 2, 3)}},
        # A container of that name that does not enclose it: stays at the top.
        {"name": "B", "kind": 9, "containerName": "ty", "location": {"uri": "file:///d", "range": _rng(9, 2, 3)}},
    ]
    symbols = replies.decode_document_symbols(flat)
    assert [s.name for s in symbols] == ["demo", "ty", "B"]
    assert [(c.name, c.kind, c.range) for c in symbols[1].children] == [
        ("A", 9, replies.Range(replies.Position(3, 2), replies.Position(3, 3)))
    ]
    assert symbols[1].children[0].selection_range == symbols[1].children[0].range


def test_hierarchical_symbols_keep_their_children():
    raw = [{"name": "ty", "kind": 10, "range": _rng(2, 0, 9), "selectionRange": _rng(2, 9, 11),
            "children": [{"name": "A", "kind": 9, "range": _rng(2, 2, 3), "selectionRange": _rng(2, 2, 3)}]}]
    [ty] = replies.decode_document_symbols(raw)
    assert ty.selection_range.start.character == 9 and [c.name for c in ty.children] == ["A"]


def test_location_link_and_plain_location_normalise_to_one_target():
    link = {"targetUri": "file:///a.sml", "targetRange": _rng(1, 0, 9), "targetSelectionRange": _rng(1, 8, 9),
            "originSelectionRange": _rng(5, 0, 1)}
    bare_link = {"targetUri": "file:///b.sml", "targetRange": _rng(2, 0, 4)}
    plain = {"uri": "file:///c%20d.sml", "range": _rng(3, 1, 2)}
    a, b, c = replies.decode_locations([link, bare_link, plain])
    assert (a.path, a.range.start.character, a.selection_range.start.character) == ("/a.sml", 0, 8)
    assert b.selection_range == b.range and b.path == "/b.sml"
    assert c == replies.Target("file:///c%20d.sml", replies.Range(replies.Position(3, 1), replies.Position(3, 2)),
                           replies.Range(replies.Position(3, 1), replies.Position(3, 2)))
    assert replies.decode_locations(plain) == [c] and replies.decode_locations(None) == []


def test_a_bare_completion_list_is_complete_and_a_completion_list_says_if_not():
    items, incomplete = replies.decode_completion([{"label": "ADD_COMM", "kind": 21, "detail": None}, {"label": "x"}])
    assert items == [replies.CompletionItem("ADD_COMM", 21), replies.CompletionItem("x")] and incomplete is False
    listed, more = replies.decode_completion({"isIncomplete": True, "items": [{"label": "y", "sortText": "0y"}]})
    assert listed == [replies.CompletionItem("y", sort_text="0y")] and more is True


def test_an_unknown_eval_report_kind_is_kept_and_the_rest_decoded():
    raw = [
        {"kind": "compilerOut", "pos": {"line": 0, "character": 0}, "body": "val x = 3: int\n"},
        {"kind": "futureKind", "what": 1},
        {"kind": "toplevelOut", "pos": {"line": 1, "character": 0}, "body": "3\n"},
        {"kind": "error", "hard": False, "pos": _rng(2, 0, 4), "msg": "warning"},
        {"kind": "compileProgress", "pos": {"line": 3, "character": 0}},
        {"kind": "compileCompleted"},
        {"kind": "interrupted"},
    ]
    reports = replies.decode_eval_reports(raw)
    assert [type(r) for r in reports] == [
        replies.CompilerOut, replies.UnknownReport, replies.ToplevelOut, replies.ErrorReport, replies.ProgressReport,
        replies.CompletedReport, replies.InterruptedReport,
    ]
    assert reports[1] == replies.UnknownReport("futureKind", {"kind": "futureKind", "what": 1})
    assert replies.eval_output(reports) == "val x = 3: int\n3\n"
    assert isinstance(reports[3], replies.ErrorReport) and reports[3].hard is False


def test_hover_contents_may_be_a_plain_string_or_a_list():
    assert replies.decode_hover({"contents": "val x: int"}) == replies.Hover(contents="val x: int")
    assert replies.decode_hover({"contents": "val x: int"}).text == "val x: int"  # type: ignore[union-attr]
    listed = replies.decode_hover({"contents": [{"language": "sml", "value": "a"}, "b"], "range": None})
    assert listed is not None and listed.text == "a\n\n---\n\nb" and listed.range is None
    assert replies.decode_hover(None) is None


def test_goal_state_nulls_take_defaults_and_a_bare_pending_keeps_its_error():
    full = replies.decode_goal_state({"theorem": "t", "step": 0, "goals": [{"asms": ["p"], "goal": "q"}], "note": None,
                                  "error": None, "failedRange": None, "status": "pending", "segments": None})
    assert isinstance(full, replies.GoalState) and full.note == "" and full.error == "" and full.segments == []
    assert hol.is_provisional(full) and not hol.is_pending(full) and not hol.is_settled(full)
    assert replies.decode_goal_state({"status": "pending"}) is not None
    assert replies.decode_goal_state({"status": "pending", "error": "no label x"}) == replies.Pending("no label x")
    assert hol.is_pending(replies.decode_goal_state({"status": "pending"}))


def test_a_reply_of_the_wrong_shape_is_an_lsp_error_not_an_empty_answer():
    with pytest.raises(LspError, match=r"goalState in a shape holsrv does not read"):
        replies.decode_goal_state({"theorem": "t", "goals": "not a list"})
    with pytest.raises(LspError, match="workspace/symbol"):
        replies.decode_workspace_symbols({"name": "x"})


def test_unknown_method_needs_the_code_and_the_message():
    said = "unknown method: textDocument/references"
    assert hol.is_unknown_method(LspError(said, rpc_code=-32600), "textDocument/references")
    assert not hol.is_unknown_method(LspError(said, rpc_code=-32603))
    assert not hol.is_unknown_method(LspError(said))
    assert not hol.is_unknown_method(LspError("json decode failed", rpc_code=-32600))
    assert not hol.is_unknown_method(ValueError(said))


def test_parse_recovery_is_a_warning_that_says_expected_or_unclosed_quotation():
    rng = replies.Range(replies.Position(0, 0), replies.Position(0, 1))
    assert hol.is_parse_recovery({"severity": 2, "message": "expected identifier"})
    assert hol.is_parse_recovery(replies.Diagnostic(rng, 2, "Unclosed quotation at end"))
    assert not hol.is_parse_recovery({"severity": 1, "message": "expected identifier"})
    assert not hol.is_parse_recovery(replies.Diagnostic(rng, 2, "proof produced 1 extra hypothesis"))
    assert not hol.is_parse_recovery({"severity": 2, "message": "unexpectedly slow"})


def test_proof_diagnostics_are_the_pools_failure_and_branch_end():
    assert hol.is_proof_diagnostic("proof failed: Exception raised at Tactical.FAIL_TAC: x")
    assert hol.is_failing_branch_end("end of the failing branch")
    assert hol.is_proof_diagnostic("end of the failing branch")
    assert not hol.is_proof_failure("end of the failing branch")
    assert not hol.is_proof_diagnostic("Value or constructor (x) has not been declared")


def test_not_compiling_notice_and_ansi_stripping():
    assert hol.is_not_compiling_notice("HOL: not compiling fooScript.sml: cannot load x")
    assert not hol.is_not_compiling_notice("HOL LSP: copy out of step -- resynchronising")
    assert hol.strip_ansi("\x1b[1mn\x1b[0m + 0") == "n + 0"
