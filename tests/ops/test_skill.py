"""The HOL4 proof skill: served by holmcp through the SDK's client, true to
holmcp's tools, copied into hosts' skills directories, and packed as a Claude
Code plugin."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import pytest
from click.testing import CliRunner
from mcp import Client
from mcp_types import PaginatedRequestParams, Request
from pydantic import TypeAdapter

from holctl import skillcopy
from holctl.cli import cli
from holmcp import plugin, resources, skill
from holmcp.server import build_server
from holsrv import __version__

ROOT = Path(__file__).resolve().parent.parent.parent
SKILL_DIR = ROOT / "holmcp" / "skill"
VERDICTS = ["OK", "FAILED", "ERRORS", "BLOCKED", "CHEATS", "INCOMPLETE", "STALE", "REBUILT", "UNCHECKED", "SUSPENDED"]
# The proving loop, in the order the skill teaches it.
LOOP = ["diagnostics", "goalState", "search", "try", "diagnostics", "holmake", "verify"]
# A tool call as the skill writes one: `name(argument, …)` in backticks.
_CALL = re.compile(r"`([A-Za-z_]\w*)\(([^)`]*)\)`")
_CAMEL = re.compile(r"`([a-z]+[A-Z]\w*)[`(]")


class ListSkills(Request[PaginatedRequestParams | None, Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"
    params: PaginatedRequestParams | None = None


def absent(tmp_path: Path):
    return build_server(tmp_path / "absent.sock", tmp_path, autostart=False)


def calls(text: str) -> list[tuple[str, list[str]]]:
    """Every `tool(arg, …)` in `text`, with the argument names (`line=10` names `line`)."""
    return [(name, [a.partition("=")[0].strip() for a in _arguments(args)]) for name, args in _CALL.findall(text)]


def _arguments(text: str) -> list[str]:
    """`text` split at the commas outside brackets and quotes."""
    parts, depth, quoted, current = [], 0, False, ""
    for ch in text:
        quoted ^= ch == '"'
        depth += (ch == "[") - (ch == "]") if not quoted else 0
        if ch == "," and depth == 0 and not quoted:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [p.strip() for p in [*parts, current] if p.strip()]


@pytest.mark.asyncio
async def test_the_skills_files_are_markdown_resources_at_skill_uris(tmp_path):
    async with Client(absent(tmp_path)) as client:
        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert sorted(listed) == ["skill://hol4-proof/SKILL.md", "skill://hol4-proof/reference.md"]
        assert {r.mime_type for r in listed.values()} == {"text/markdown"}
        for name in skill.FILES:
            read = await client.read_resource(f"skill://hol4-proof/{name}")
            assert [c.text for c in read.contents] == [(SKILL_DIR / name).read_text(encoding="utf-8")]


@pytest.mark.asyncio
async def test_skills_list_names_the_skill_its_description_and_files_under_the_skills_extension(tmp_path):
    async with Client(absent(tmp_path)) as client:
        assert resources.SKILLS_EXTENSION in (client.server_capabilities.extensions or {})
        answer = await client.session.send_request(ListSkills(), TypeAdapter(dict[str, Any]))
    [entry] = answer["skills"]
    assert (entry["name"], entry["uri"]) == ("hol4-proof", "skill://hol4-proof/SKILL.md")
    assert entry["description"] == skill.skill().description
    sizes = {f["uri"]: f["size"] for f in entry["files"]}
    assert sizes == {f"skill://hol4-proof/{n}": len((SKILL_DIR / n).read_bytes()) for n in skill.FILES}


@pytest.mark.asyncio
async def test_the_prompt_named_like_the_skill_gives_skill_md_without_its_frontmatter(tmp_path):
    async with Client(absent(tmp_path)) as client:
        assert [p.name for p in (await client.list_prompts()).prompts] == ["hol4-proof"]
        got = await client.get_prompt("hol4-proof")
    [message] = got.messages
    assert message.content.text.startswith("# Proving in HOL4 with holmcp")
    assert "---" not in message.content.text.splitlines()[:1]


def test_the_frontmatter_has_a_name_hosts_accept_matching_its_directory_and_a_short_description():
    the = skill.skill()
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", the.name) and the.name == skill.NAME
    assert 1 <= len(the.description) <= 1024
    assert "SKILL.md" in the.files and list(the.files)[0] == "SKILL.md"


@pytest.mark.asyncio
async def test_every_tool_the_skill_calls_exists_and_takes_the_arguments_it_names(tmp_path):
    async with Client(absent(tmp_path)) as client:
        offered = {t.name: set(t.input_schema.get("properties", {})) for t in (await client.list_tools()).tools}
    wrong = []
    for name in skill.FILES:
        for tool, arguments in calls((SKILL_DIR / name).read_text(encoding="utf-8")):
            if tool not in offered:
                wrong.append(f"{name}: no tool {tool}")
            elif unknown := sorted(set(arguments) - offered[tool]):
                wrong.append(f"{name}: {tool} takes no {unknown}")
    assert wrong == []


@pytest.mark.asyncio
async def test_every_camel_case_name_the_skill_quotes_is_a_tool(tmp_path):
    # HOL's tactics and the answers' fields are snake_case or one word; a
    # camelCase name in backticks can only mean a tool (`goalState`, `retryCompile`).
    async with Client(absent(tmp_path)) as client:
        offered = {t.name for t in (await client.list_tools()).tools}
    quoted = {word for name in skill.FILES for word in _CAMEL.findall((SKILL_DIR / name).read_text(encoding="utf-8"))}
    assert sorted(quoted - offered) == []


def test_skill_md_teaches_the_loop_in_order_and_every_verdict():
    text = skill.skill().files["SKILL.md"]
    called = [tool for tool, _ in calls(text)]
    firsts = [called.index(tool) for tool in dict.fromkeys(LOOP)]
    assert firsts == sorted(firsts), called
    assert called.count("diagnostics") >= 2
    assert "Before you say a proof is done: `verify(file)`" in text  # the last step, not an aside
    missing = [v for v in VERDICTS if not re.search(rf"\b{v}\b", text)]
    assert missing == []


def test_the_skill_links_only_files_it_ships():
    for name, text in skill.skill().files.items():
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            assert "://" in target or target in skill.FILES, f"{name} links {target}, which the skill does not ship"


def test_the_plugin_registers_holmcp_and_carries_the_skill(tmp_path):
    root = plugin.pack(tmp_path / "plugin")
    manifest = json.loads((root / ".claude-plugin" / "plugin.json").read_text())
    assert (manifest["name"], manifest["version"]) == ("holsrv", __version__)
    assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", manifest["name"])
    command = manifest["mcpServers"]["holmcp"]["command"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert command in scripts and scripts[command] == "holmcp.server:main"
    for name in skill.FILES:
        assert (root / "skills" / "hol4-proof" / name).read_text() == (SKILL_DIR / name).read_text()
    market = json.loads((tmp_path / "plugin" / ".claude-plugin" / "marketplace.json").read_text())
    [listed] = market["plugins"]
    assert (tmp_path / "plugin" / listed["source"]).resolve() == root.resolve() and listed["name"] == "holsrv"


def test_packing_the_plugin_again_leaves_nothing_of_the_last_one(tmp_path):
    (tmp_path / "plugin" / "stale").mkdir(parents=True)
    plugin.pack(tmp_path / "plugin", command="/usr/local/bin/holmcp")
    assert not (tmp_path / "plugin" / "stale").exists()
    manifest = json.loads((tmp_path / "plugin" / "holsrv" / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["mcpServers"]["holmcp"]["command"] == "/usr/local/bin/holmcp"


def install_skill(*args: str, home: Path):
    return CliRunner().invoke(cli, ["install-skill", *args], env={"HOME": str(home), "XDG_CONFIG_HOME": ""})


@pytest.mark.parametrize("host, where", [("claude", ".claude/skills"), ("codex", ".agents/skills"),
                                         ("opencode", ".config/opencode/skills")])
def test_install_skill_copies_the_skill_where_each_host_looks(tmp_path, host, where):
    result = install_skill("--host", host, home=tmp_path)
    assert result.exit_code == 0, result.output
    for name in skill.FILES:
        assert (tmp_path / where / "hol4-proof" / name).read_text() == (SKILL_DIR / name).read_text()


def test_install_skill_into_a_directory_twice_says_the_second_time_it_is_up_to_date(tmp_path):
    assert install_skill("--dir", str(tmp_path / "skills"), home=tmp_path).exit_code == 0
    again = install_skill("--dir", str(tmp_path / "skills"), home=tmp_path)
    assert again.exit_code == 0 and again.output.count("already up to date") == len(skill.FILES)


def test_install_skill_never_overwrites_other_text_without_force_and_then_writes_nothing(tmp_path):
    target = tmp_path / "skills" / "hol4-proof"
    target.mkdir(parents=True)
    (target / "SKILL.md").write_text("my own notes\n")
    refused = install_skill("--dir", str(tmp_path / "skills"), home=tmp_path)
    assert refused.exit_code == 1 and "--force" in refused.output
    assert (target / "SKILL.md").read_text() == "my own notes\n" and not (target / "reference.md").exists()
    forced = install_skill("--dir", str(tmp_path / "skills"), "--force", home=tmp_path)
    assert forced.exit_code == 0, forced.output
    assert (target / "SKILL.md").read_text() == (SKILL_DIR / "SKILL.md").read_text()


def test_an_unknown_host_is_refused_with_the_hosts_there_are():
    with pytest.raises(skillcopy.SkillError, match="claude, codex, opencode"):
        skillcopy.skills_dir("cursor", {"HOME": "/nonexistent"})
