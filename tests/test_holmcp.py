"""holmcp through the SDK's in-memory client: what an agent is offered, and what it gets back."""

from __future__ import annotations

import contextlib
import sys
import typing
from pathlib import Path

import psutil
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from holmcp.server import build_server
from holsrv import errors
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages

from conftest import FAILING_SCRIPT, FAKE_HOL

# An agent may not stop the daemon that every other session shares.
NOT_TOOLS = {messages.Shutdown}
TOOLS = {request.__struct_config__.tag for request in typing.get_args(messages.Request) if request not in NOT_TOOLS}


async def listed_tools(server) -> dict:
    async with Client(server) as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


@pytest.mark.asyncio
async def test_tools_are_named_like_the_holctl_commands():
    assert set(await listed_tools(build_server())) == TOOLS


@pytest.mark.asyncio
async def test_every_tool_says_what_it_does_and_every_parameter_is_described():
    for name, tool in (await listed_tools(build_server())).items():
        assert len(tool.description) > 100, name
        for param, schema in tool.input_schema["properties"].items():
            assert schema.get("description"), f"{name}.{param} has no description"


@pytest.mark.asyncio
async def test_positions_are_documented_as_one_based_and_counted_in_characters():
    goal_state = (await listed_tools(build_server()))["goalState"]
    props = goal_state.input_schema["properties"]
    assert "1-based" in props["line"]["description"]
    assert "1-based" in props["col"]["description"] and "characters" in props["col"]["description"]
    assert props["line"]["minimum"] == 1
    assert "relative to the directory holmcp was started in" in props["file"]["description"]


@pytest.mark.asyncio
async def test_diagnostics_description_explains_the_verdict():
    description = (await listed_tools(build_server()))["diagnostics"].description
    assert description.startswith("Compile a HOL4 script and check every proof in it")
    assert "OK only when Holmake would build the file" in description
    assert "parse recoveries" in description and "count as errors" in description


@pytest.mark.asyncio
async def test_every_tool_advertises_the_reply_struct_as_its_output_schema():
    tools = await listed_tools(build_server())
    for name, tool in tools.items():
        schema = tool.output_schema
        assert schema is not None and schema["type"] == "object", name
        assert "type" in schema["required"], name
    assert {"verdict", "headline", "tally", "proofs"} <= set(tools["diagnostics"].output_schema["properties"])
    assert "Goal" in tools["goalState"].output_schema["$defs"]


@pytest.mark.asyncio
async def test_waits_default_to_the_daemons_defaults():
    tools = await listed_tools(build_server())
    assert tools["diagnostics"].input_schema["properties"]["wait"]["default"] == 25.0
    assert tools["eval"].input_schema["properties"]["timeout"]["default"] == 30.0


@pytest.mark.asyncio
async def test_only_retry_and_restart_are_marked_as_changing_state():
    tools = await listed_tools(build_server())
    changing = {name for name, tool in tools.items() if not tool.annotations.read_only_hint}
    assert changing == {"retryCompile", "restart"}


@pytest.mark.asyncio
async def test_a_call_with_no_daemon_and_no_autostart_is_a_tool_error_saying_so(tmp_path: Path):
    server = build_server(tmp_path / "absent.sock", tmp_path, autostart=False)
    async with Client(server) as client:
        result = await client.call_tool("status", {})
    assert result.is_error
    text = result.content[0].text
    assert "daemon_unreachable: no holsrv daemon is listening on" in text


@pytest.mark.asyncio
async def test_a_position_before_the_first_column_is_rejected_before_reaching_the_daemon(tmp_path: Path):
    server = build_server(tmp_path / "absent.sock", tmp_path, autostart=False)
    async with Client(server) as client:
        result = await client.call_tool("hover", {"file": "aScript.sml", "line": 1, "col": 0})
    assert result.is_error
    assert "col" in result.content[0].text
    assert "daemon_unreachable" not in result.content[0].text


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
        result = await client.call_tool("goalState", {"file": str(path), "line": 7, "col": 3, "wait": 20})
    assert not result.is_error, result.content
    data = result.structured_content
    assert (data["state"], data["theorem"]) == ("ok", "add0")
    assert len(data["goals"]) == 1
    assert result.content[0].text.startswith("theorem add0, step ")


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
async def test_every_tool_answers_with_content_its_output_schema_accepts(daemon, write_script):
    # The SDK client checks structured content against the advertised schema
    # and raises if it does not conform, so each call below is that check.
    path = write_script(FAILING_SCRIPT)
    calls = {
        "hover": {"line": 7, "col": 3},
        "definition": {"line": 7, "col": 3},
        "references": {"line": 7, "col": 3},
        "completion": {"line": 7, "col": 4},
        "documentSymbol": {},
        "workspaceSymbol": {"query": "ADD"},
        "eval": {"code": "val x = 1 + 1;"},
        "retryCompile": {},
        "restart": {},
    }
    server = build_server(daemon.socket, path.parent, autostart=False)
    async with Client(server) as client:
        await client.list_tools()
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
