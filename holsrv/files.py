"""Reading a user's script from disk, with a clear error for every bad case.

The file on disk is the truth: every call re-reads it.  The daemon never
writes it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from holsrv.errors import BadRequest, FileNotFound, NotAFile, NotUtf8

MAX_SCRIPT_BYTES = 32 * 1024 * 1024
# Each file gets a HOL server costing hundreds of MB: refuse what is not SML.
SCRIPT_SUFFIXES = (".sml", ".sig", ".ML")


def content_hash(data: bytes) -> str:
    """What answers name the content they are about: a short hash of the file's bytes."""
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass(frozen=True)
class Script:
    path: Path  # resolved: symlinks and `..` gone, so two spellings share a server
    data: bytes
    text: str
    hash: str


def resolve(file: str) -> Path:
    if not file:
        raise BadRequest("no file given: pass the path of a HOL script (e.g. fooScript.sml)")
    path = Path(file)
    if not path.is_absolute():
        raise BadRequest(f"{file!r} is not an absolute path; clients send absolute paths")
    return Path(os.path.realpath(path))


def read(file: str) -> Script:
    """Read and decode `file`; raise a coded error saying what to do otherwise."""
    path = resolve(file)
    if path.suffix not in SCRIPT_SUFFIXES:
        raise BadRequest(
            f"{file} is not a HOL script: holsrv answers about SML files ({', '.join(SCRIPT_SUFFIXES)}), "
            "usually a theory script named fooScript.sml"
        )
    if not path.exists():
        raise FileNotFound(f"no such file: {file}. Check the path (absolute, or relative to where the client runs).")
    if not path.is_file():
        raise NotAFile(f"{file} is not a regular file (a directory?). Pass a HOL script such as fooScript.sml.")
    try:
        size = path.stat().st_size
        if size > MAX_SCRIPT_BYTES:
            raise BadRequest(f"{file} is {size} bytes; scripts over {MAX_SCRIPT_BYTES} bytes are refused")
        data = path.read_bytes()
    except PermissionError:
        raise NotAFile(f"cannot read {file}: permission denied") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise NotUtf8(
            f"{file} is not valid UTF-8 (bad byte 0x{data[err.start]:02x} on line {line}). "
            "HOL scripts must be UTF-8: re-save the file as UTF-8."
        ) from None
    return Script(path, data, text, content_hash(data))
