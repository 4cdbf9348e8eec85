"""Is holmcp registered with Claude Code, Codex or OpenCode, and with which command?

Reads the hosts' configuration files as each documents them, never writes
one: Claude Code's `~/.claude.json` (user scope `mcpServers`, local scope
`projects[DIR].mcpServers`) and a project's `.mcp.json`; Codex's
`~/.codex/config.toml` (`$CODEX_HOME`) and a project's `.codex/config.toml`,
`[mcp_servers.NAME]`; OpenCode's `opencode.json` (`.jsonc`) of the project
and of `~/.config/opencode`, `mcp.servers.NAME` (current) or `mcp.NAME`
(older versions).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from holctl.doctor.report import Check, Status


@dataclass(frozen=True)
class Entry:
    """One server a host's configuration names."""

    where: str  # the file, and the scope or table in it
    name: str
    argv: list[str]


def holmcp_command() -> str:
    """The holmcp of this installation, for the command to register."""
    beside = Path(sys.executable).parent / "holmcp"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside.absolute())
    return shutil.which("holmcp") or "/path/to/holmcp"


def is_holmcp(entry: Entry) -> bool:
    """Named holmcp, or running it (`…/holmcp`, `python -m holmcp`, `uvx holmcp`)."""
    return entry.name == "holmcp" or "holmcp" in [Path(word).name for word in entry.argv]


def checks(home: Path, cwd: Path, environ: Mapping[str, str]) -> list[Check]:
    command = holmcp_command()
    hosts = [
        ("claude_code", "Claude Code", _claude(home, cwd), f"claude mcp add --scope user holmcp -- {command}"),
        ("codex", "Codex", _codex(home, cwd, environ), f"codex mcp add holmcp -- {command}"),
        ("opencode", "OpenCode", _opencode(home, cwd, environ), f"opencode mcp add holmcp -- {command}"),
    ]
    return [_check(name, label, found, fix) for name, label, found, fix in hosts]


def _check(name: str, label: str, found: tuple[list[Entry], list[str], list[Path]], fix: str) -> Check:
    entries, problems, read = found
    ours = [e for e in entries if is_holmcp(e)]
    unreadable = f" Could not read: {'; '.join(problems)}." if problems else ""
    if ours:
        shown = "; ".join(f"as {e.name} in {e.where}: {' '.join(e.argv)}" for e in ours)
        gone = [e for e in ours if e.argv and shutil.which(e.argv[0]) is None]
        if gone:
            return Check(name, Status.WARN, False, f"registered {shown}, but {gone[0].argv[0]} is not an executable "
                         f"there.{unreadable}", f"register it again: {fix}")
        return Check(name, Status.OK, False, f"registered {shown}.{unreadable}")
    if not read and not problems:
        return Check(name, Status.SKIP, False, f"{label} not set up here (none of its configuration files).")
    files = ", ".join(str(p) for p in read)
    return Check(name, Status.WARN, False, f"holmcp is not registered ({files or 'nothing readable'}).{unreadable}",
                 f"`{fix}`")


def _ancestors(cwd: Path) -> Iterator[Path]:
    yield cwd
    yield from cwd.parents


def _argv(server: object) -> list[str]:
    """A server entry's command line, whichever way the host spells it."""
    if not isinstance(server, dict):
        return []
    command = server.get("command")
    given = server.get("args")
    args: list = given if isinstance(given, list) else []
    if isinstance(command, list):
        return [str(c) for c in command]
    return [str(command), *map(str, args)] if isinstance(command, str) else []


def _read(path: Path, reader, problems: list[str], read: list[Path]) -> object:
    if not path.is_file():
        return None
    try:
        found = reader(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:  # JSON and TOML errors are ValueErrors
        problems.append(f"{path} ({err})")
        return None
    read.append(path)
    return found


def _servers(table: object, where: str) -> list[Entry]:
    if not isinstance(table, dict):
        return []
    return [Entry(where, str(name), _argv(server)) for name, server in table.items() if isinstance(server, dict)]


def _claude(home: Path, cwd: Path) -> tuple[list[Entry], list[str], list[Path]]:
    entries: list[Entry] = []
    problems: list[str] = []
    read: list[Path] = []
    user = home / ".claude.json"
    config = _read(user, json.loads, problems, read)
    if isinstance(config, dict):
        entries += _servers(config.get("mcpServers"), f"{user} (user scope)")
        known = config.get("projects")
        projects: dict = known if isinstance(known, dict) else {}
        for directory in _ancestors(cwd):
            project = projects.get(str(directory))
            if isinstance(project, dict):
                entries += _servers(project.get("mcpServers"), f"{user} (local scope, {directory})")
    for directory in _ancestors(cwd):
        project = _read(directory / ".mcp.json", json.loads, problems, read)
        if isinstance(project, dict):
            entries += _servers(project.get("mcpServers"), f"{directory / '.mcp.json'} (project scope)")
    return entries, problems, read


def _codex(home: Path, cwd: Path, environ: Mapping[str, str]) -> tuple[list[Entry], list[str], list[Path]]:
    entries: list[Entry] = []
    problems: list[str] = []
    read: list[Path] = []
    codex_home = Path(environ["CODEX_HOME"]) if environ.get("CODEX_HOME") else home / ".codex"
    places = [codex_home / "config.toml", *(d / ".codex" / "config.toml" for d in _ancestors(cwd))]
    for path in dict.fromkeys(places):
        config = _read(path, tomllib.loads, problems, read)
        if isinstance(config, dict):
            entries += _servers(config.get("mcp_servers"), f"{path} [mcp_servers]")
    return entries, problems, read


def _opencode(home: Path, cwd: Path, environ: Mapping[str, str]) -> tuple[list[Entry], list[str], list[Path]]:
    entries: list[Entry] = []
    problems: list[str] = []
    read: list[Path] = []
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config") / "opencode"
    places = [Path(environ["OPENCODE_CONFIG"])] if environ.get("OPENCODE_CONFIG") else []
    places += [config_home / name for name in ("opencode.json", "opencode.jsonc")]
    places += [d / name for d in _ancestors(cwd) for name in ("opencode.json", "opencode.jsonc")]
    for path in dict.fromkeys(places):
        config = _read(path, _jsonc, problems, read)
        mcp = config.get("mcp") if isinstance(config, dict) else None
        if not isinstance(mcp, dict):
            continue
        nested = mcp.get("servers")
        if isinstance(nested, dict) and all(isinstance(v, dict) for v in nested.values()):
            entries += _servers(nested, f"{path} (mcp.servers)")
        older = {k: v for k, v in mcp.items() if k != "servers" and isinstance(v, dict) and "command" in v}
        entries += _servers(older, f"{path} (mcp, the older form)")
    return entries, problems, read


_JSONC_NOISE = re.compile(r'("(?:\\.|[^"\\])*")|//[^\n]*|/\*.*?\*/|,(?=\s*[}\]])', re.DOTALL)


def _jsonc(text: str) -> object:
    """JSON with comments and trailing commas, as OpenCode accepts it."""
    return json.loads(_JSONC_NOISE.sub(lambda m: m.group(1) or "", text))
