"""Copying the HOL4 proof skill into an agent host's skills directory (`holctl install-skill`).

Each host looks for `<skills dir>/<name>/SKILL.md`: Claude Code in
`~/.claude/skills`, Codex in `~/.agents/skills`, OpenCode in
`~/.config/opencode/skills`.  A file already there with other text is left
alone unless forced, and then nothing is written at all.

Standard library only, like the rest of holctl.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

HOSTS = ("claude", "codex", "opencode")


class SkillError(Exception):
    """Why the skill was not copied, and what to do; holctl prints it and exits 1."""


def skills_dir(host: str, environ: Mapping[str, str] | None = None) -> Path:
    """Where `host` looks for a user's skills."""
    env = os.environ if environ is None else environ
    home = Path(env.get("HOME") or Path.home())
    match host:
        case "claude":
            return home / ".claude" / "skills"
        case "codex":
            return home / ".agents" / "skills"
        case "opencode":
            return Path(env.get("XDG_CONFIG_HOME") or home / ".config") / "opencode" / "skills"
    raise SkillError(f"no host {host!r}: choose one of {', '.join(HOSTS)}")


def install(name: str, files: Mapping[str, str], into: Path, force: bool = False) -> list[str]:
    """Write `files` into `into/name`; one line a file saying what happened."""
    target = into / name
    differing = [f for f, text in files.items() if (target / f).exists() and _text(target / f) != text]
    if differing and not force:
        shown = ", ".join(str(target / f) for f in differing)
        raise SkillError(f"{shown}: already there with other text (your edits, or another version's); "
                         "--force replaces it")
    target.mkdir(parents=True, exist_ok=True)
    said = []
    for file, text in files.items():
        path = target / file
        if path.exists() and file not in differing:
            said.append(f"{path}: already up to date")
            continue
        partial = path.with_name(f".{file}.partial")
        partial.write_text(text, encoding="utf-8")
        partial.replace(path)
        said.append(f"{path}: {'replaced' if file in differing else 'written'}")
    return said


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
