"""The Claude Code plugin: holmcp and the HOL4 proof skill, in the layout Claude Code installs.

`make pack-plugin` runs `python -m holmcp.plugin build/plugin`, which writes
a one-plugin marketplace there:

    build/plugin/.claude-plugin/marketplace.json
    build/plugin/holsrv/.claude-plugin/plugin.json   # registers holmcp
    build/plugin/holsrv/skills/hol4-proof/SKILL.md    # found by Claude Code in skills/
    build/plugin/holsrv/skills/hol4-proof/reference.md

`claude --plugin-dir build/plugin/holsrv` tries it for one session;
`/plugin marketplace add ./build/plugin` then `/plugin install holsrv@holsrv`
installs it.  A plugin cannot install Python packages: holmcp must be
installed (`pipx install .`) and the manifest names its command, `holmcp`
on PATH unless `--command` gives a path.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

from holmcp import skill
from holsrv import __version__

NAME = "holsrv"
DESCRIPTION = "Warm HOL4 language servers for proving: the holmcp tools and the hol4-proof skill."


def manifest(command: str = "holmcp") -> dict[str, Any]:
    """`.claude-plugin/plugin.json`: the plugin's name, version and holmcp as its MCP server."""
    return {
        "name": NAME,
        "version": __version__,
        "description": DESCRIPTION,
        "license": "BSD-3-Clause",
        "keywords": ["hol4", "theorem-proving", "mcp"],
        "mcpServers": {"holmcp": {"command": command, "args": []}},
    }


def marketplace() -> dict[str, Any]:
    """`.claude-plugin/marketplace.json` of a marketplace holding just this plugin."""
    return {
        "name": NAME,
        "owner": {"name": "holsrv"},
        "plugins": [{"name": NAME, "source": f"./{NAME}", "description": DESCRIPTION, "version": __version__}],
    }


def pack(out: Path, command: str = "holmcp") -> Path:
    """Write the marketplace with the plugin into `out` (emptied first); the plugin's directory."""
    if out.exists():
        shutil.rmtree(out)
    root = out / NAME
    _write(out / ".claude-plugin" / "marketplace.json", json.dumps(marketplace(), indent=2) + "\n")
    _write(root / ".claude-plugin" / "plugin.json", json.dumps(manifest(command), indent=2) + "\n")
    the = skill.skill()
    for name, text in the.files.items():
        _write(root / "skills" / the.name / name, text)
    return root


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m holmcp.plugin", description="Build the Claude Code plugin.")
    parser.add_argument("out", type=Path, help="the directory to write the marketplace and plugin into (emptied)")
    parser.add_argument("--command", default="holmcp", help="holmcp's command in the manifest (default: holmcp)")
    args = parser.parse_args()
    print(f"plugin written to {pack(args.out, args.command)}")


if __name__ == "__main__":
    main()
