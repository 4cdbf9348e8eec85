"""What holmcp offers besides its tools: the HOL4 proof skill, as MCP resources and a prompt.

Each file of the skill is a resource at `skill://hol4-proof/<file>` (markdown),
as the agent-skills-over-MCP convention has it; `skills/list`, the skills
extension's method (`io.modelcontextprotocol/skills`), names the skill, its
description and its files, so a host that knows the extension can offer it
the way it offers an installed skill.  The prompt of the same name gives
SKILL.md as a user message, for hosts that show prompts (Claude Code: as a
slash command) but not resources.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding, ResourceBinding
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.prompts.base import UserMessage
from mcp.server.mcpserver.resources import TextResource
from mcp_types import PaginatedRequestParams

from holmcp import skill

SKILLS_EXTENSION = "io.modelcontextprotocol/skills"
MARKDOWN = "text/markdown"


def uri(file: str) -> str:
    """The resource URI of one of the skill's files."""
    return f"skill://{skill.NAME}/{file}"


def _resources() -> list[TextResource]:
    the = skill.skill()

    def description(name: str) -> str:
        return the.description if name == "SKILL.md" else f"The {the.name} skill's {name}, which SKILL.md links."

    return [
        TextResource(uri=uri(name), name=f"{the.name}/{name}", mime_type=MARKDOWN, text=text,
                     description=description(name))
        for name, text in the.files.items()
    ]


def listing() -> dict[str, Any]:
    """The `skills/list` result: the one skill, its entry file and every file's size."""
    the = skill.skill()
    return {
        "skills": [{
            "name": the.name,
            "description": the.description,
            "uri": uri("SKILL.md"),
            "files": [{"uri": uri(name), "mimeType": MARKDOWN, "size": len(text.encode())}
                      for name, text in the.files.items()],
        }]
    }


async def _list_skills(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
    return listing()


class Skills(Extension):
    """The skill's files as resources, and `skills/list`."""

    identifier = SKILLS_EXTENSION

    def resources(self) -> Sequence[ResourceBinding]:
        return [ResourceBinding(resource) for resource in _resources()]

    def methods(self) -> Sequence[MethodBinding]:
        return [MethodBinding("skills/list", PaginatedRequestParams, _list_skills)]


def prompt() -> Prompt:
    """The skill's SKILL.md as a prompt named like the skill."""
    the = skill.skill()

    def body() -> list[UserMessage]:
        return [UserMessage(the.body)]

    return Prompt.from_function(body, name=the.name, title="Proving in HOL4 with holmcp", description=the.description)
