"""The HOL4 proof skill: SKILL.md and the files beside it, as shipped in the package.

holmcp serves them as MCP resources (`holmcp.resources`) and holctl's
`install-skill` copies them into an agent host's skills directory.  Standard
library only: holctl imports this.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources

NAME = "hol4-proof"
# The files of the skill, SKILL.md first; the others are what it links to.
FILES = ("SKILL.md", "reference.md")


@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    files: dict[str, str]  # file name -> its text, SKILL.md first

    @property
    def body(self) -> str:
        """SKILL.md without its frontmatter."""
        return self.files["SKILL.md"].split("\n---\n", 1)[1].lstrip("\n")


def _frontmatter(text: str) -> dict[str, str]:
    """The `key: value` lines between SKILL.md's opening `---` lines."""
    lines = text.splitlines()
    if not lines or lines[0] != "---" or "---" not in lines[1:]:
        raise ValueError("SKILL.md does not start with a --- frontmatter block")
    block = lines[1 : lines.index("---", 1)]
    return {key.strip(): value.strip() for key, _, value in (line.partition(":") for line in block) if key.strip()}


@functools.cache
def skill() -> Skill:
    """The skill, read from the package once."""
    here = resources.files(__name__)
    files = {name: here.joinpath(name).read_text(encoding="utf-8") for name in FILES}
    front = _frontmatter(files["SKILL.md"])
    return Skill(name=front["name"], description=front["description"], files=files)
