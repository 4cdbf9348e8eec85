"""The frames of an editor's channel: what `holctl lsp` and the daemon say after `EditorAttach`.

An editor's connection is long-lived and goes both ways: the editor's
documents (open, whole text on change, save, close) and its LSP requests go
up; the daemon answers each request by the editor's own id, and pushes the
notifications HOL sends about the editor's documents.  LSP params and
results cross as JSON bytes (the LSP side's encoding), as HOL wrote them,
but for one field: a notification's `version` is the editor's own version
of the text it is about, or absent (`holsrv.serve.editorversions`).  Positions in them are in the
encoding the document's server negotiated (`EditorDocument.encoding`);
`holctl lsp` converts to the editor's.
"""

from __future__ import annotations

from typing import Union

from holsrv.rpc.messages import ErrorReply, Struct

# At most this many frames wait for a slow editor; past it, progress is
# dropped first (then the oldest of anything else), and counted in status.
OUTBOX_FRAMES = 2000


class EditorFrame(Struct, tag_field="op"):
    """An editor-to-daemon frame on an attached connection."""


class EditorOpen(EditorFrame, tag="editorOpen"):
    """The editor opened `uri` (a `file://` URI of a script) with `text` in its buffer, as its `version`."""

    uri: str
    text: str
    version: int | None = None  # the editor's (LSP's textDocument.version); None: it named none


class EditorChange(EditorFrame, tag="editorChange"):
    """The buffer's whole text after an edit (`holctl lsp` applies the ranged changes), as its `version`."""

    uri: str
    text: str
    version: int | None = None


class EditorSave(EditorFrame, tag="editorSave"):
    uri: str


class EditorClose(EditorFrame, tag="editorClose"):
    uri: str


class EditorCall(EditorFrame, tag="editorCall"):
    """An LSP request for the server of `uri` ("" when it names no document: any of the editor's)."""

    id: int
    method: str
    params: bytes = b"null"  # JSON
    uri: str = ""
    notify: bool = False  # a notification (`$/hol/retryCompile`): sent, never answered


class EditorCancel(EditorFrame, tag="editorCancel"):
    """The editor cancelled the request it sent as `EditorCall.id`."""

    id: int


EditorInbound = Union[EditorOpen, EditorChange, EditorSave, EditorClose, EditorCall, EditorCancel]


class EditorEvent(Struct, tag_field="type"):
    """A daemon-to-editor frame on an attached connection."""


class EditorAttached(EditorEvent, tag="editorAttached"):
    """The channel is open: the `initialize` result of a running server (b"" when none runs yet)."""

    initialize: bytes = b""
    daemon_pid: int = 0
    # HOL's `serverInfo` (JSON) while no server runs: the last server's, else the
    # configured HOL's tree with what only a server could say as "unknown".
    server_info: bytes = b""


class EditorDocument(EditorEvent, tag="editorDocument"):
    """`uri` has its server, with `text` synced: positions for it are in `encoding`.
    `code`/`message` set: the document could not get a server (it stays open; an edit tries again)."""

    uri: str
    encoding: str = "utf-8"
    code: str = ""
    message: str = ""
    server_uri: str = ""  # the URI the server knows the file by (HOL's notes name it)


class EditorNote(EditorEvent, tag="editorNote"):
    """A notification HOL sent about one of the editor's documents, as HOL sent it."""

    method: str
    params: bytes = b"null"  # JSON
    uri: str = ""


class EditorAnswer(EditorEvent, tag="editorAnswer"):
    """The answer to `EditorCall.id`: `result` (JSON), or an LSP error code and message."""

    id: int
    result: bytes = b"null"
    error_code: int = 0
    error_message: str = ""


EditorOutbound = Union[EditorAttached, EditorDocument, EditorNote, EditorAnswer, ErrorReply]
