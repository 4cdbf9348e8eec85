"""holmcp's search and holmake tools, and freshness in its answers, against a daemon with the fake HOL."""

from __future__ import annotations

import pytest
from mcp import Client

from holmcp.server import build_server

from conftest import GOOD_SCRIPT


@pytest.mark.asyncio
async def test_search_returns_matches_as_text_and_structured_content_with_freshness(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        result = await client.call_tool("search", {"file": path.name, "query": "'arithmetic' x + y = y + x"})
    assert not result.is_error, result.content
    data = result.structured_content
    assert [h["name"] for h in data["hits"]] == ["ADD_COMM"]
    assert data["freshness"]["content_hash"] and data["freshness"]["settled"] is True
    assert data["freshness"]["may_be_stale"] is False and data["freshness"]["reasons"] == []
    text = result.content[0].text
    assert text.startswith("ADD_COMM: ⊢ ∀m n. m + n = n + m  (theorem, arithmetic,")
    assert "MAY BE STALE" not in text and "freshness" not in text  # fresh answers stay short


@pytest.mark.asyncio
async def test_a_re_exported_theorem_is_one_hit_that_names_every_theory(daemon, write_script):
    path = write_script(GOOD_SCRIPT.replace("Ancestors arithmetic", "Ancestors rich_list"))  # list is below it
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        result = await client.call_tool("search", {"file": path.name, "query": '"REVERSE_REVERSE"'})
    assert not result.is_error, result.content
    assert [(h["theory"], h["also_in"]) for h in result.structured_content["hits"]] == [("list", ["rich_list"])]
    assert "also in rich_list, the same statement" in result.content[0].text


@pytest.mark.asyncio
async def test_an_expected_hash_the_file_lost_is_said_plainly_in_the_text(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        first = await client.call_tool("diagnostics", {"file": path.name})
        old = first.structured_content["content_hash"]
        path.write_text(GOOD_SCRIPT + "\n(* edited *)\n")
        again = await client.call_tool("diagnostics", {"file": path.name, "expect_hash": old[:12]})
    assert f"MAY BE STALE: file changed since: you expected content {old[:12]}" in again.content[0].text
    assert again.structured_content["freshness"]["may_be_stale"] is True


@pytest.mark.asyncio
async def test_holmake_relays_progress_and_its_output_stays_out_of_the_stdio_stream(daemon, write_script, capfd):
    path = write_script(GOOD_SCRIPT + "\n(* FAKE_HOLMAKE_FAIL *)\n")
    seen: list[str] = []

    async def on_progress(progress, total, message):
        seen.append(message or "")

    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        result = await client.call_tool("holmake", {"file": path.name}, progress_callback=on_progress)
    assert not result.is_error, result.content
    assert result.structured_content["ok"] is False and result.structured_content["failed"] == "demo"
    assert "fake failure in demo" in result.content[0].text
    assert any(message.startswith("Holmake: ") for message in seen), seen
    # Holmake wrote to a pipe the daemon reads, never to this process's stdout or stderr.
    out, err = capfd.readouterr()
    assert "Holmake (fake)" not in out + err and "FAILED!" not in out + err


@pytest.mark.asyncio
async def test_search_narrows_by_scope_kind_and_conclusion_and_uses_lists_dependencies(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        named = await client.call_tool("search", {"file": path.name, "query": '"COMM"', "scope": ["bool"],
                                                  "kind": "theorem"})
        concluding = await client.call_tool("search", {"file": path.name, "conclusion": "x <= y"})
        used = await client.call_tool("uses", {"file": path.name, "name": "arithmeticTheory.ADD_COMM"})
    assert [h["name"] for h in named.structured_content["hits"]] == ["CONJ_COMM", "DISJ_COMM"]
    assert [h["name"] for h in concluding.structured_content["hits"]] == ["LESS_EQ_REFL", "LESS_EQ_ADD"]
    assert not used.is_error, used.content
    assert [d["name"] for d in used.structured_content["depends_on"]] == ["ADD_0", "ADD_CLAUSES", "num#9"]
    assert used.content[0].text.startswith("arithmetic.ADD_COMM depends on (by HOL's dependency tags): "
                                           "arithmetic.ADD_0, arithmetic.ADD_CLAUSES, num#9")


@pytest.mark.asyncio
async def test_verify_outside_git_is_not_verified_and_says_what_it_could_not_check(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    async with Client(build_server(daemon.socket, path.parent, autostart=False)) as client:
        result = await client.call_tool("verify", {"file": path.name, "theorems": ["add0"]})
    assert not result.is_error, result.content
    data = result.structured_content
    assert data["verified"] is False and data["theorems"] == ["add0"]
    assert [c["status"] for c in data["checks"]] == ["unchecked", "passed", "passed", "passed"]
    text = result.content[0].text
    assert text.startswith("NOT VERIFIED: demoScript.sml: not checked: statements.")
    assert "is not in a git repository" in text
