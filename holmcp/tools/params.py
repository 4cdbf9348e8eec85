"""The parameters several tools share, and the wire defaults their schemas show."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from pydantic import Field

File = Annotated[
    str,
    Field(description="Script path or file:// URI (relative to holmcp's start directory)."),
]
Line = Annotated[int, Field(ge=1, description="1-based line.")]
Column = Annotated[int, Field(ge=1, description="1-based column, counting characters.")]
LookupWait = Annotated[
    float | None,
    Field(ge=0, description="Seconds to wait for start and compile; 0: answer now. Default 25."),
]

DeferAfter = Annotated[
    float | None,
    Field(ge=0, description="Seconds; if still running then, answer a job id (see job)."),
]
ExpectHash = Annotated[
    str, Field(description="Hash from an earlier answer; the answer says if the file changed since.")
]


def default(request_type: type[msgspec.Struct], field: str) -> Any:
    """A request field's wire default, so the schema an agent sees matches the daemon's."""
    return next(f.default for f in msgspec.structs.fields(request_type) if f.name == field)
