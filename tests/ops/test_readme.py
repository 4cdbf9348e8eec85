"""The README's commands against the code, so the page cannot drift from it.

Every shell line of its code blocks is read: `make` targets must be in the
Makefile (`make run` is dry-run; `make test` is not run from inside the
suite), the install line must name this project, the commands a host is told
to run must end in one of the project's entry points, the JSON and TOML
snippets must parse and name holmcp, and every `holctl …` line of the tour
must parse as holctl would parse it.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import click

from holctl.cli import cli
from holsrv.config import settings

ROOT = Path(__file__).resolve().parent.parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
SCRIPTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
# The environment variables a host snippet may set: the names the daemon's settings are read from.
# HOLDIR is read where `hol` is looked for ($HOLDIR/bin/hol), not as a setting of its own.
READ_NAMES = {name for setting in settings.USER | settings.OPERATOR for name in settings.env_names(setting)}
READ_NAMES |= {"HOLDIR"}


def sections() -> dict[str, str]:
    """The README's text under each `## ` heading."""
    parts = re.split(r"^## (.+)$", README, flags=re.MULTILINE)
    return {title.strip(): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def fenced(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README, flags=re.MULTILINE | re.DOTALL)


def shell_lines(text: str) -> list[list[str]]:
    """The words of every line of `text`'s indented code blocks, comments dropped."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    lines = [line[4:] for line in text.splitlines() if line.startswith("    ") and line.strip()]
    return [words for line in lines if (words := shlex.split(line, comments=True))]


def every_shell_line() -> list[list[str]]:
    return shell_lines(README)


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, flags=re.MULTILINE))


def test_the_two_commands_are_make_run_and_make_test():
    lines = shell_lines(sections()["Two commands"])
    assert [words[:2] for words in lines] == [["make", "run"], ["make", "test"]]


def test_every_make_target_the_readme_names_is_in_the_makefile():
    named = {words[1] for words in every_shell_line() if words[0] == "make"}
    named |= set(re.findall(r"`make ([a-z][\w-]*)", README))
    assert named and sorted(named - makefile_targets()) == []


def test_make_run_checks_the_script_it_is_given_with_holctl_diagnostics():
    dry = subprocess.run(["make", "-n", "-C", str(ROOT), "run", "SCRIPT=some/fooScript.sml"],
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    assert re.search(r"holctl diagnostics some/fooScript\.sml$", dry.stdout, flags=re.MULTILINE), dry.stdout


def test_the_install_line_installs_this_checkout_and_gives_the_three_commands():
    [line] = [words for words in shell_lines(sections()["Installing"])]
    assert line == ["pipx", "install", "."]
    assert (ROOT / "pyproject.toml").is_file()
    for command in ("holsrv", "holctl", "holmcp"):
        assert command in SCRIPTS and f"`{command}`" in sections()["Installing"]


def test_every_host_command_runs_an_entry_point_of_the_project():
    registering = shell_lines(sections()["Registering holmcp with an agent host"])
    assert {words[0] for words in registering} == {"claude", "codex", "opencode"}
    for words in registering:
        assert words[1:3] == ["mcp", "add"], words
        assert "--" in words, f"{shlex.join(words)}: the command goes after --"
        command = words[words.index("--") + 1:]
        assert Path(command[0]).name in SCRIPTS, shlex.join(words)
        assert "holmcp" in words[3:words.index("--")], f"{shlex.join(words)}: the server is named holmcp"


def _holmcp_command(server: dict) -> str:
    command = server["command"]
    return Path(command[0] if isinstance(command, list) else command).name


def test_every_json_snippet_parses_and_runs_holmcp():
    snippets = [json.loads(text) for text in fenced("json")]
    assert len(snippets) >= 3
    for snippet in snippets:
        servers = snippet.get("mcpServers") or snippet["mcp"].get("servers") or snippet["mcp"]
        assert _holmcp_command(servers["holmcp"]) == "holmcp"
        assert SCRIPTS["holmcp"] == "holmcp.server:main"


def test_every_toml_snippet_parses_and_runs_holmcp():
    snippets = [tomllib.loads(text) for text in fenced("toml")]
    assert snippets
    for snippet in snippets:
        assert _holmcp_command(snippet["mcp_servers"]["holmcp"]) == "holmcp"


def test_every_environment_variable_a_snippet_sets_is_one_holsrv_reads():
    named = {w.partition("=")[0] for words in every_shell_line()
             for flag, w in zip(words, words[1:], strict=False) if flag == "--env"}
    named |= set(re.findall(r"^export ([A-Z_]+)=", README, flags=re.MULTILINE))
    for text in fenced("json"):
        named |= set(re.findall(r'"(?:env|environment)": \{"([A-Z_]+)"', text))
    for snippet in map(tomllib.loads, fenced("toml")):
        named |= set(snippet["mcp_servers"]["holmcp"].get("env", {}))
    assert "HOLDIR" in named and sorted(named - READ_NAMES) == []


def _holctl_lines() -> list[list[str]]:
    return [words[1:] for words in every_shell_line() if words[0] == "holctl"]


def test_every_holctl_line_of_the_readme_parses_as_holctl_parses_it():
    lines = _holctl_lines()
    assert len(lines) >= 10
    wrong = []
    for args in lines:
        # The tour gives no group options, so the first word is the command.
        command = cli.commands.get(args[0])
        if command is None:
            wrong.append(f"holctl {shlex.join(args)}: no command {args[0]}")
            continue
        try:
            command.make_context(args[0], list(args[1:]))
        except click.ClickException as err:
            wrong.append(f"holctl {shlex.join(args)}: {err.format_message()}")
    assert wrong == []


def test_every_holctl_command_the_readme_quotes_inline_exists():
    quoted = set(re.findall(r"`holctl ([a-z][\w-]*)", README))
    assert quoted and sorted(quoted - set(cli.commands)) == []


def test_holmcp_and_holctl_start_from_this_environment():
    bin_dir = Path(sys.executable).parent
    for command in ("holmcp", "holctl"):
        helped = subprocess.run([str(bin_dir / command), "--help"], capture_output=True, text=True, timeout=60)
        assert helped.returncode == 0 and "usage" in helped.stdout.lower(), helped.stderr


def test_the_readme_points_a_newcomer_at_the_release_notes_and_the_skill():
    table = sections()["Where to go next"]
    for target in ("docs/releasing.md", "docs/holmcp.md#the-hol4-proof-skill"):
        assert f"]({target})" in table, target
