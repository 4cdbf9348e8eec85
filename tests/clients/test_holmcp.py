"""holmcp through the SDK's in-memory client: what an agent is offered, and what it gets back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import typing
from pathlib import Path
from urllib.parse import quote

import psutil
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from test_wire import FakeDaemon, _result_for

from holmcp.progress import HEARTBEAT_S, NUDGE, ProgressRelay
from holmcp.server import INSTRUCTIONS, build_server
from holsrv import errors
from holsrv.rpc import client as rpc_client
from holsrv.rpc import connecting, messages

from conftest import FAILING_SCRIPT, FAKE_HOL, GOOD_SCRIPT

# An agent may not stop the daemon that every other session shares.
# logs: for a person at a shell (`holctl logs`); server_died already brings an agent the stderr tail.
# editorAttach: an editor's channel (`holctl lsp`), not a question.
# metrics: for an operator's monitoring (`holctl metrics`, /metrics); an agent has status.
# restartDaemon: an operator's (`holctl restart-daemon`, `systemctl --user reload`), as a shutdown is.
NOT_TOOLS = {messages.Shutdown, messages.Logs, messages.EditorAttach, messages.Metrics, messages.RestartDaemon}
TOOLS = {request.__struct_config__.tag for request in typing.get_args(messages.Request) if request not in NOT_TOOLS}
# The reference tool's parameter names, which agents and skills written for it use.
POSITION = {"file", "line", "column", "wait"}
PARAMETERS = {
    "diagnostics": {"file", "wait", "expect_hash", "defer_after"},
    "goalState": POSITION | {"expect_hash", "positions"},
    "holes": {"file"},
    "hover": POSITION,
    "definition": POSITION,
    "references": POSITION,
    "completion": POSITION,
    "documentSymbol": {"file", "wait"},
    "workspaceSymbol": {"file", "query", "limit", "page", "wait"},
    "eval": {"file", "code", "timeout"},
    "retryCompile": {"file"},
    "restart": {"file", "max_heap_mb"},
    "stop": {"file"},
    "status": set(),
    "search": {"file", "query", "limit", "page", "expect_hash", "scope", "kind", "conclusion", "hypothesis"},
    "uses": {"file", "name"},
    "holmake": {"file", "target", "defer_after"},
    "try": {"file", "line", "column", "tactics", "timeout", "apply", "defer_after"},
    "goalDiff": {"file", "line1", "column1", "line2", "column2"},
    "job": {"id", "wait", "cancel"},
    "verify": {"file", "theorems"},
}
READ_ONLY = {"diagnostics", "goalState", "holes", "hover", "definition", "references", "completion", "documentSymbol",
             "workspaceSymbol", "status", "search", "uses", "goalDiff"}
# What an agent host pays for the tool list in every context, in characters
# (12,000 until search, holmake, try and goalDiff came, with expect_hash;
# 16,000 until goalState's positions, eval's word on shared state, defer_after and job,
# search's scope, kind, conclusion and hypothesis, and uses: 18,360 then; 18,500 until
# verify (an entry kept to a file and theorems, some 600 more) and holes, a tool of one
# parameter, with try on a whole proof (some 500 more)).
MAX_TOOL_LIST_CHARS = 19_700


async def listed(server):
    async with Client(server) as client:
        return await client.list_tools()


async def listed_tools(server) -> dict:
    return {tool.name: tool for tool in (await listed(server)).tools}


def absent(tmp_path: Path):
    """A holmcp whose daemon cannot be reached: what it says comes from holmcp alone."""
    return build_server(tmp_path / "absent.sock", tmp_path, autostart=False)


def text(result) -> str:
    return "\n".join(block.text for block in result.content)


@pytest.mark.asyncio
async def test_tools_are_named_like_the_holctl_commands():
    assert set(await listed_tools(build_server())) == TOOLS


@pytest.mark.asyncio
async def test_tools_take_the_reference_tools_parameter_names():
    tools = await listed_tools(build_server())
    assert {name: set(tool.input_schema["properties"]) for name, tool in tools.items()} == PARAMETERS
    # goalState's column is optional: omitted, the whole line is shown; its line, when positions are given.
    assert tools["goalState"].input_schema["required"] == ["file"]
    assert tools["hover"].input_schema["required"] == ["file", "line", "column"]


@pytest.mark.asyncio
async def test_every_tool_says_what_it_does_and_every_parameter_is_described():
    for name, tool in (await listed_tools(build_server())).items():
        assert len(tool.description) > 90, name
        for param, schema in tool.input_schema["properties"].items():
            assert len(schema.get("description", "")) > 10, f"{name}.{param} has no description"


@pytest.mark.asyncio
async def test_the_tool_list_fits_the_size_an_agent_pays_for_in_every_context():
    listing = (await listed(build_server())).model_dump(by_alias=True, exclude_none=True, mode="json")
    size = len(json.dumps(listing, ensure_ascii=False))
    assert size < MAX_TOOL_LIST_CHARS, size
    # No schema repeats a parameter's name as its title.
    assert '"title"' not in json.dumps([t["inputSchema"] for t in listing["tools"]])


@pytest.mark.asyncio
async def test_the_instructions_teach_the_edit_check_inspect_loop_in_512_characters():
    async with Client(build_server()) as client:
        instructions = client.instructions
    assert instructions == INSTRUCTIONS and len(instructions) <= 512
    for step in ["diagnostics", "goalState", "restart", "INCOMPLETE", "your own tools"]:
        assert step in instructions


@pytest.mark.asyncio
async def test_positions_are_documented_as_one_based_and_counted_in_characters():
    tools = await listed_tools(build_server())
    for name in ["goalState", "hover"]:
        props = tools[name].input_schema["properties"]
        assert "1-based" in props["line"]["description"] and props["line"]["minimum"] == 1
        assert "1-based" in props["column"]["description"] and "characters" in props["column"]["description"]
        assert "relative to holmcp's start directory" in props["file"]["description"]
        assert "file://" in props["file"]["description"]
    assert "Omit it for the whole line" in tools["goalState"].input_schema["properties"]["column"]["description"]


@pytest.mark.asyncio
async def test_goal_state_describes_the_line_view_and_the_states_an_agent_branches_on():
    tool = (await listed_tools(build_server()))["goalState"]
    assert "without one, before the line's first tactic and after its last" in tool.description
    assert "on the QED line" in tool.description
    for state in ["goals", "proved_here", "failed", "not_in_proof", "compiling", "starting", "blocked"]:
        assert state in tool.description and state in tool.output_schema["properties"]["state"]["description"]


@pytest.mark.asyncio
async def test_diagnostics_description_explains_the_verdict_and_what_to_do_next():
    tool = (await listed_tools(build_server()))["diagnostics"]
    assert tool.description.startswith("Check a HOL4 script: compile it and replay every proof")
    assert "OK only if Holmake would build it" in tool.description
    for verdict in ["FAILED", "ERRORS", "CHEATS", "SUSPENDED", "UNCHECKED", "BLOCKED", "INCOMPLETE"]:
        assert verdict in tool.description and verdict in tool.output_schema["properties"]["verdict"]["description"]
    assert "goalState" in tool.description and "retryCompile" in tool.description


@pytest.mark.asyncio
async def test_lookups_can_skip_the_wait_and_symbol_search_pages():
    tools = await listed_tools(build_server())
    for name in ["hover", "definition", "references", "completion", "documentSymbol", "workspaceSymbol"]:
        wait = tools[name].input_schema["properties"]["wait"]
        assert "0: answer now" in wait["description"] and "default" not in wait, name
    props = tools["workspaceSymbol"].input_schema["properties"]
    assert props["limit"]["default"] == 20 and props["page"]["minimum"] == 1
    assert "2 characters" in props["query"]["description"]


@pytest.mark.asyncio
async def test_waits_default_to_the_daemons_defaults():
    tools = await listed_tools(build_server())
    assert tools["diagnostics"].input_schema["properties"]["wait"]["default"] == 25.0
    assert tools["goalState"].input_schema["properties"]["wait"]["default"] == 25.0
    assert tools["eval"].input_schema["properties"]["timeout"]["default"] == 120.0


@pytest.mark.asyncio
async def test_annotations_say_which_tools_only_ask_and_which_act():
    tools = await listed_tools(build_server())
    hints = {name: tool.annotations for name, tool in tools.items()}
    assert {name for name, h in hints.items() if h.read_only_hint} == READ_ONLY
    for name in READ_ONLY:
        assert hints[name].idempotent_hint and hints[name].open_world_hint is False, name
    # eval runs any SML as the user: it may do anything, more than once.
    assert (hints["eval"].destructive_hint, hints["eval"].idempotent_hint, hints["eval"].open_world_hint) == (
        True, False, True)
    # restart and stop end the checks in flight; retryCompile loses nothing.
    assert hints["restart"].destructive_hint and hints["stop"].destructive_hint
    assert hints["stop"].idempotent_hint and not hints["restart"].idempotent_hint
    assert hints["retryCompile"].destructive_hint is False


@pytest.mark.asyncio
async def test_diagnostics_and_goal_state_publish_output_schemas_of_the_reply_fields():
    tools = await listed_tools(build_server())
    for name, fields in [("diagnostics", {"verdict", "complete", "tally", "proofs"}),
                         ("goalState", {"state", "goals", "before", "line_text", "error"})]:
        schema = tools[name].output_schema
        assert schema["type"] == "object" and fields <= set(schema["properties"]), name
        assert "type" in schema["required"] and "theorem" not in schema["required"]
    # The others return their structured content without a schema (see holmcp.tools.OUTPUT_SCHEMAS).
    assert {name for name, tool in tools.items() if tool.output_schema} == {"diagnostics", "goalState"}


# -- arguments holmcp refuses itself -------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("tool", "arguments", "meant"),
    [
        ("goalState", {"file": "aScript.sml", "line": 3, "col": 5}, "column"),
        ("hover", {"file": "aScript.sml", "line": 3, "character": 5}, "column"),
        ("diagnostics", {"uri": "aScript.sml"}, "file"),
        ("diagnostics", {"file": "aScript.sml", "wait_s": 5}, "wait"),
        ("diagnostics", {"file": "aScript.sml", "timeout": 5}, "wait"),
        ("eval", {"file": "aScript.sml", "code": "1;", "wait": 5}, "timeout"),
    ],
    ids=["col", "character", "uri", "wait_s", "timeout-for-wait", "wait-for-timeout"],
)
async def test_an_unknown_argument_is_refused_naming_the_one_meant(tmp_path, tool, arguments, meant):
    async with Client(absent(tmp_path)) as client:
        result = await client.call_tool(tool, arguments)
    assert result.is_error
    message = text(result)
    assert message.startswith(f"bad_request: {tool} does not take `")
    assert f"(did you mean `{meant}`?)" in message
    assert "It takes: file" in message
    assert "daemon_unreachable" not in message  # refused before any daemon was asked


@pytest.mark.asyncio
async def test_a_bad_value_is_refused_in_one_line_without_pydantic_links(tmp_path):
    async with Client(absent(tmp_path)) as client:
        result = await client.call_tool("hover", {"file": "aScript.sml", "line": 0, "column": "x"})
        missing = await client.call_tool("goalState", {"file": "aScript.sml"})
    assert result.is_error and missing.is_error
    message = text(result)
    assert message.startswith("bad_request: hover: `line`: Input should be greater than or equal to 1 (got 0); "
                              "`column`: ")
    assert "http" not in message and "pydantic" not in message and "\n" not in message
    assert text(missing).startswith("bad_request: goalState: give line (and column) for one position, or positions")


@pytest.mark.asyncio
async def test_no_daemon_and_no_autostart_is_a_tool_error_with_its_code_and_a_next_step(tmp_path: Path):
    async with Client(absent(tmp_path)) as client:
        result = await client.call_tool("status", {})
    assert result.is_error
    assert text(result).startswith("daemon_unreachable: no holsrv daemon is listening on")
    assert "Next: " in text(result)


# -- against a fake daemon: frames the real one sends only sometimes -------------


@pytest.mark.asyncio
async def test_progress_frames_reach_a_client_that_gave_a_progress_token(short_tmp, write_script):
    path = write_script(FAILING_SCRIPT)

    def script(request, n):
        assert request.progress  # holmcp asks for them
        return [messages.Progress("loading the heap"), messages.Progress("checking proofs", 1, 2),
                messages.Progress("checking proofs", 2, 2), messages.Progress("waiting for HOL to settle", 2, 2),
                _diagnostics_result(str(path))]

    fake = await FakeDaemon(short_tmp / "fake.sock", script).start()
    seen: list[tuple] = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    try:
        async with Client(build_server(fake.socket, path.parent, autostart=False)) as client:
            result = await client.call_tool("diagnostics", {"file": path.name}, progress_callback=on_progress)
            quiet = await client.call_tool("diagnostics", {"file": path.name})  # no token: no notifications
    finally:
        await fake.stop()
    assert not result.is_error and not quiet.is_error
    assert [message for _, _, message in seen] == [
        "loading the heap", "checking proofs (1/2)", "checking proofs (2/2)", "waiting for HOL to settle (2/2)"]
    values = [progress for progress, _, _ in seen]
    assert values == sorted(set(values)), "MCP progress must grow with every notification"
    assert seen[2][:2] == (2.0, 2.0)
    # A frame that does not advance the count still advances progress, past the total it then leaves out.
    assert seen[3][0] > 2.0 and seen[3][1] is None


@pytest.mark.asyncio
async def test_a_call_the_daemon_says_nothing_about_still_reports_progress_every_few_seconds():
    now = [100.0]
    sent: list[tuple] = []

    async def report(progress, total, message):
        sent.append((progress, total, message))

    relay = ProgressRelay(report, clock=lambda: now[0])
    await relay.beat()
    now[0] += HEARTBEAT_S
    await relay.beat()
    await relay.frame(messages.Progress("checking proofs", 1, 3))
    now[0] += HEARTBEAT_S / 2
    await relay.beat()  # the frame just now was news enough
    assert sent == [(NUDGE, None, f"waiting for the daemon ({HEARTBEAT_S:.0f} s)"),
                    (1.0, 3.0, "checking proofs (1/3)")]


@pytest.mark.asyncio
async def test_a_heartbeat_is_reported_every_few_seconds_while_a_call_waits(monkeypatch):
    from holmcp import progress

    monkeypatch.setattr(progress, "HEARTBEAT_S", 0.05)
    sent: list[str] = []
    beaten = asyncio.Event()

    async def report(progress, total, message):
        sent.append(message)
        if len(sent) == 2:
            beaten.set()

    relay = ProgressRelay(report)
    async with relay.heartbeat():
        await asyncio.wait_for(beaten.wait(), 30)  # two beats, each once the one before was 0.05 s old
    assert all(m.startswith("waiting for the daemon") for m in sent)


@pytest.mark.asyncio
async def test_settings_the_daemon_does_not_share_are_a_warning_in_text_and_structured_content(
    short_tmp, write_script, monkeypatch
):
    monkeypatch.setenv("HOLSRV_MAX_HEAP_MB", "999")
    path = write_script(FAILING_SCRIPT)
    warning = "HOLSRV_MAX_HEAP_MB=999 was given to this client, but the running daemon uses 2048"
    welcome = messages.Welcome(messages.PROTOCOL_VERSION, "fake", 1, settings_warnings=[warning])
    fake = await FakeDaemon(short_tmp / "fake.sock", lambda r, n: [_diagnostics_result(str(path))], welcome).start()
    try:
        async with Client(build_server(fake.socket, path.parent, autostart=False)) as client:
            result = await client.call_tool("diagnostics", {"file": path.name})
    finally:
        await fake.stop()
    assert fake.hellos[0].settings["HOLSRV_MAX_HEAP_MB"] == "999"
    assert text(result).splitlines()[-1] == f"warning: {warning}"
    assert text(result).count(warning) == 1
    assert result.structured_content["warnings"] == ["theorem slow is slow", warning]


@pytest.mark.asyncio
async def test_servers_busy_reaches_the_agent_with_its_code_and_the_stop_tool_as_a_way_out(short_tmp, tmp_path):
    busy = messages.ErrorReply("servers_busy", "all 4 HOL servers are busy: /p/aScript.sml, /p/bScript.sml")
    fake = await FakeDaemon(short_tmp / "fake.sock", lambda r, n: [busy]).start()
    try:
        async with Client(build_server(fake.socket, tmp_path, autostart=False)) as client:
            result = await client.call_tool("hover", {"file": "cScript.sml", "line": 1, "column": 1})
    finally:
        await fake.stop()
    assert result.is_error
    lines = text(result).splitlines()
    assert lines[0] == f"servers_busy: {busy.message}"
    assert lines[-1].startswith("Next: Call status") and "stop" in lines[-1]


@pytest.mark.asyncio
async def test_a_cancelled_tool_call_leaves_no_reply_for_the_next_call(short_tmp, tmp_path):
    never = asyncio.Event()

    async def script(request, n):
        if n == 1:
            await never.wait()
        return [messages.StatusResult("fake", messages.PROTOCOL_VERSION, 1, 1.0, "/s", 4, [], 0, n)]

    fake = await FakeDaemon(short_tmp / "fake.sock", script).start()
    try:
        async with Client(build_server(fake.socket, tmp_path, autostart=False)) as client:
            call = asyncio.create_task(client.call_tool("status", {}))
            await fake.first_request()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            result = await client.call_tool("status", {})
    finally:
        never.set()
        await fake.stop()
    assert result.structured_content["cache_misses"] == 2


def _diagnostics_result(file: str) -> messages.DiagnosticsResult:
    return messages.DiagnosticsResult(
        file=file, content_hash="0" * 20, verdict="INCOMPLETE", headline="INCOMPLETE: 1 proof still checking",
        complete=False, tally=messages.Tally(proved=1, checking=1), proofs=[], diagnostics=[], cheats=[],
        server=messages.ServerNote(pid=1), warnings=["theorem slow is slow"],
    )


# -- against a daemon with the fake HOL server ----------------------------------



@pytest.mark.asyncio
async def test_diagnostics_returns_the_verdict_as_structured_content_and_text(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    # A relative path is taken from the directory holmcp was started in.
    server = build_server(daemon.socket, path.parent, autostart=False)
    async with Client(server) as client:
        result = await client.call_tool("diagnostics", {"file": path.name, "wait": 20})
    assert not result.is_error, result.content
    data = result.structured_content
    assert (data["file"], data["verdict"]) == (str(path), "FAILED")
    assert data["tally"] == {"proved": 1, "failed": 1}
    text = result.content[0].text.splitlines()
    assert text[0] == data["headline"]
    assert text[1] == "proofs: 1 proved, 1 failed (2 total)"


@pytest.mark.asyncio
async def test_goal_state_returns_the_goals_inside_a_proof(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    server = build_server(daemon.socket, path.parent, autostart=False)
    async with Client(server) as client:
        result = await client.call_tool("goalState", {"file": str(path), "line": 7, "column": 3, "wait": 20})
    assert not result.is_error, result.content
    data = result.structured_content
    assert (data["state"], data["theorem"]) == ("goals", "add0")
    assert len(data["goals"]) == 1
    assert result.content[0].text.startswith("theorem add0, step ")


@pytest.mark.asyncio
async def test_goal_state_without_a_column_shows_the_goals_before_and_after_the_line(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        result = await client.call_tool("goalState", {"file": path.name, "line": 7, "wait": 20})
    assert not result.is_error, result.content
    data = result.structured_content
    assert data["column"] is None and data["line_text"].strip() == FAILING_SCRIPT.splitlines()[6].strip()
    assert data["state"] in {"goals", "proved_here"} and "before" in data
    assert "before the line:" in text(result) and "after the line:" in text(result)


@pytest.mark.asyncio
async def test_try_answers_each_candidate_and_goal_diff_names_what_changed(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    line = FAILING_SCRIPT.splitlines().index("  gen_tac >> simp[]") + 1
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        tried = await client.call_tool("try", {"file": path.name, "line": line, "column": 14,
                                               "tactics": ["simp[]", 'FAIL_TAC "no"']})
        diff = await client.call_tool("goalDiff", {"file": path.name, "line1": line, "line2": line})
    assert not tried.is_error and not diff.is_error, (tried.content, diff.content)
    assert [c["state"] for c in tried.structured_content["candidates"]] == ["proved", "failed"]
    assert "[2] FAIL_TAC \"no\": FAILED" in text(tried)
    assert diff.structured_content["diff"]["summary"] == "all 1 goal closed"


@pytest.mark.asyncio
async def test_try_with_apply_writes_the_proved_candidate_into_the_file(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    line = FAILING_SCRIPT.splitlines().index('  rpt strip_tac >> FAIL_TAC "nope"') + 1
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        tried = await client.call_tool("try", {"file": path.name, "line": line, "column": 20,
                                               "tactics": ['FAIL_TAC "no"', "simp[]"], "apply": True})
    assert not tried.is_error, tried.content
    applied = tried.structured_content["applied"]
    assert (applied["state"], applied["text"]) == ("kept", "simp[]")
    assert path.read_text() == FAILING_SCRIPT.replace('rpt strip_tac >> FAIL_TAC "nope"', "rpt strip_tac >> simp[]")


@pytest.mark.asyncio
async def test_a_file_uri_is_taken_as_the_path_it_names(daemon, write_script, tmp_path):
    path = write_script(FAILING_SCRIPT, dir=tmp_path / "my proofs ∀")
    uri = "file://" + quote(str(path))
    assert "%20" in uri
    # The directory holmcp started in must not matter for a URI.
    async with Client(build_server(daemon.socket, Path("/"), autostart=False)) as client:
        result = await client.call_tool("diagnostics", {"file": uri, "wait": 20})
    assert not result.is_error, result.content
    assert result.structured_content["file"] == str(path)


@pytest.mark.asyncio
async def test_a_setting_the_running_daemon_does_not_have_is_named_in_every_answer(
    daemon, write_script, monkeypatch
):
    monkeypatch.setenv("HOLSRV_MAX_HEAP_MB", "999")  # the test daemon caps heaps at 2048
    path = write_script(FAILING_SCRIPT)
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        answers = [await client.call_tool("status", {}),
                   await client.call_tool("documentSymbol", {"file": path.name, "wait": 20})]
    for result in answers:
        assert not result.is_error, result.content
        warnings = [w for w in result.structured_content["warnings"] if "HOLSRV_MAX_HEAP_MB=999" in w]
        assert len(warnings) == 1 and "2048" in warnings[0]
        assert text(result).count("HOLSRV_MAX_HEAP_MB=999") == 1


@pytest.mark.asyncio
async def test_holmcp_reconnects_when_the_daemon_restarts_on_the_same_socket(daemon_factory, short_tmp, tmp_path):
    sock = short_tmp / "same.sock"
    first = daemon_factory(socket=sock)
    async with Client(build_server(sock, tmp_path, autostart=False)) as client:
        before = await client.call_tool("status", {})
        first.stop()
        daemon_factory(socket=sock)
        after = await client.call_tool("status", {})
    assert not first.thread.is_alive()
    # The connection holmcp kept died with the first daemon; the call went to the second.
    assert not before.is_error and not after.is_error, after.content


@pytest.mark.asyncio
async def test_a_daemon_that_cannot_be_started_is_a_tool_error_with_its_code_not_a_crash(short_tmp, tmp_path):
    shared = short_tmp / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: no daemon is started there, and the start says why
    async with Client(build_server(shared / "x.sock", tmp_path, autostart=True)) as client:
        result = await client.call_tool("status", {})
        again = await client.call_tool("status", {})  # the server carries on
    assert result.is_error and text(result).startswith("daemon_unreachable: "), text(result)
    assert str(shared) in text(result) and again.is_error


@pytest.mark.asyncio
async def test_a_tool_call_the_daemon_refuses_as_it_restarts_is_answered_by_the_next_daemon(short_tmp, tmp_path):
    restarting = messages.ErrorReply("daemon_restarting", "the daemon is restarting to hand its servers over")
    fake = FakeDaemon(short_tmp / "fake.sock", lambda r, n: [restarting] if n == 1 else _result_for(r, n))
    fake.close_after = {1}  # as a restarting daemon closes every connection
    await fake.start()
    try:
        async with Client(build_server(fake.socket, tmp_path, autostart=False)) as client:
            result = await client.call_tool("status", {})
    finally:
        await fake.stop()
    assert not result.is_error, text(result)
    assert result.structured_content["cache_misses"] == 2 and fake.connections == 2


@pytest.mark.asyncio
async def test_a_tool_call_in_flight_when_the_daemon_is_replaced_is_answered_by_the_next_one(
        daemon_factory, short_tmp, write_script, monkeypatch):
    monkeypatch.setattr(connecting, "SWITCH_WAIT_S", 120.0)  # generous: the machine is shared
    sock = short_tmp / "same.sock"
    first = daemon_factory(socket=sock)
    # Its proof takes minutes on the first daemon: the call is still waiting when that one stops.
    path = write_script(GOOD_SCRIPT.replace("gen_tac >> simp[]", "SLOW_TAC 600000 >> gen_tac >> simp[]"))
    async with Client(build_server(sock, path.parent, autostart=False)) as client:
        call = asyncio.create_task(client.call_tool("diagnostics", {"file": path.name, "wait": 60}))
        async with asyncio.timeout(60):
            while not any(s.waiting_calls for s in (await asyncio.to_thread(first.call, messages.Status())).sessions):
                await asyncio.sleep(0.05)  # polls a condition, bounded above
        await asyncio.to_thread(first.stop)  # the call is cut short: daemon_stopping
        path.write_text(GOOD_SCRIPT)  # so the next daemon's answer is quick, and tells which daemon gave it
        second = daemon_factory(socket=sock)
        async with asyncio.timeout(120):
            result = await call
    assert not result.is_error, text(result)
    assert result.structured_content["verdict"] == "OK"
    [row] = (await asyncio.to_thread(second.call, messages.Status())).sessions
    assert row.file == str(path)


@pytest.mark.asyncio
async def test_stop_frees_the_files_server_and_the_next_call_starts_another(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        first = await client.call_tool("diagnostics", {"file": path.name, "wait": 20})
        stopped = await client.call_tool("stop", {"file": path.name})
        status = await client.call_tool("status", {})
        again = await client.call_tool("diagnostics", {"file": path.name, "wait": 20})
    assert not stopped.is_error, stopped.content
    assert stopped.structured_content["pid"] == first.structured_content["server"]["pid"]
    assert all(s["state"] in ("stopping", "stopped", "dead") for s in status.structured_content["sessions"])
    assert again.structured_content["server"]["pid"] != first.structured_content["server"]["pid"]


@pytest.mark.asyncio
async def test_diagnostics_that_waits_sends_the_daemons_progress_to_the_client(daemon, write_script):
    path = write_script(FAILING_SCRIPT.replace('FAIL_TAC "nope"', "SLOW_TAC 1500 >> simp[]"))
    seen: list[tuple] = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        result = await client.call_tool("diagnostics", {"file": path.name, "wait": 20}, progress_callback=on_progress)
    assert result.structured_content["verdict"] == "OK", result.content
    assert seen, "no progress notification reached the client"
    # The file has two proofs: the daemon counts them as they finish.
    assert any(total == 2.0 and message.endswith("/2)") for _, total, message in seen), seen
    values = [progress for progress, _, _ in seen]
    assert values == sorted(set(values))


@pytest.mark.asyncio
async def test_a_missing_file_is_a_tool_error_with_the_daemons_code(daemon, tmp_path):
    server = build_server(daemon.socket, tmp_path, autostart=False)
    async with Client(server) as client:
        result = await client.call_tool("diagnostics", {"file": "missingScript.sml"})
    assert result.is_error
    assert "file_not_found: " in result.content[0].text
    assert str(tmp_path / "missingScript.sml") in result.content[0].text


@pytest.mark.asyncio
async def test_status_lists_the_server_an_earlier_call_started(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    server = build_server(daemon.socket, path.parent, autostart=False)
    async with Client(server) as client:
        await client.call_tool("diagnostics", {"file": str(path), "wait": 20})
        result = await client.call_tool("status", {})
    assert not result.is_error, result.content
    assert [s["file"] for s in result.structured_content["sessions"]] == [str(path)]


@pytest.mark.asyncio
async def test_every_tool_answers_with_text_and_structured_content(daemon, write_script):
    # The SDK client checks structured content against an advertised schema
    # and raises if it does not conform, so the goalState and diagnostics calls check that too.
    path = write_script(FAILING_SCRIPT)
    calls = {
        "hover": {"line": 7, "column": 3},
        "definition": {"line": 7, "column": 3},
        "references": {"line": 7, "column": 3, "wait": 0},
        "completion": {"line": 7, "column": 4},
        "documentSymbol": {},
        "workspaceSymbol": {"query": "ADD"},
        "eval": {"code": "val x = 1 + 1;"},
        "retryCompile": {},
        "restart": {},
        "stop": {},
    }
    server = build_server(daemon.socket, path.parent, autostart=False)
    async with Client(server) as client:
        await client.list_tools()
        await client.call_tool("diagnostics", {"file": str(path), "wait": 20})
        for name, arguments in calls.items():
            result = await client.call_tool(name, {"file": str(path), **arguments})
            assert not result.is_error, (name, result.content)
            assert result.structured_content["type"] == name
            assert result.content[0].text


# The loop here is only the SDK client's: one is enough.
@pytest.mark.asyncio(loop_factories=["asyncio"])
async def test_an_agent_restart_finds_the_same_warm_hol_server(short_tmp, write_script):
    """holmcp as an agent host runs it: a subprocess on stdio that starts the daemon itself."""
    sock = short_tmp / "mcp.sock"
    path = write_script(FAILING_SCRIPT)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "holmcp", "--socket", str(sock)],
        env={"HOL_BIN": str(FAKE_HOL)},
        cwd=str(path.parent),
    )
    try:
        async with Client(params) as agent:
            first = await agent.call_tool("diagnostics", {"file": path.name, "wait": 20})
        async with Client(params) as restarted_agent:
            again = await restarted_agent.call_tool("diagnostics", {"file": path.name, "wait": 20})
        assert not first.is_error and not again.is_error
        assert first.structured_content["server"]["start"] == "started"
        assert again.structured_content["server"]["pid"] == first.structured_content["server"]["pid"]
        assert again.structured_content["cached"] is True
    finally:
        with contextlib.suppress(errors.DaemonUnreachable):
            with rpc_client.connect(sock, name="test", autostart=False) as client:
                daemon_pid = client.welcome.pid
                client.call(messages.Shutdown(), 30)
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(daemon_pid).wait(30)
