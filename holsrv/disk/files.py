"""Reading a user's script from disk, with a clear error for every bad case.

The file on disk is the truth: every call re-reads it.  The daemon writes
it only for `try --apply`, and only through `filewrite`.
"""

from __future__ import annotations

import codecs
import errno
import hashlib
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from holsrv.errors import BadRequest, FileNotFound, NotAFile, NotUtf8, PermissionDenied
from holsrv.text import stepping

MAX_SCRIPT_BYTES = 32 * 1024 * 1024
# Each file gets a HOL server costing hundreds of MB: refuse what is not SML.
SCRIPT_SUFFIXES = (".sml", ".sig", ".ML")
# Linux's limits, in bytes: one file or directory name, and a whole path.
NAME_MAX = 255
PATH_MAX = 4096


def content_hash(data: bytes) -> str:
    """What answers name the content they are about: a short hash of the file's bytes."""
    return stepping.run(content_hash_steps(data))


def content_hash_steps(data: bytes) -> stepping.Steps[str]:
    """`content_hash` in steps: a 4 MB script takes some 10 ms in one go."""
    digest = hashlib.sha256()
    for start in range(0, len(data), stepping.CHARS_PER_STEP):
        digest.update(memoryview(data)[start:start + stepping.CHARS_PER_STEP])
        yield
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class Script:
    path: Path  # resolved: symlinks and `..` gone, so two spellings share a server
    data: bytes
    text: str
    hash: str


def resolve(file: str) -> Path:
    """`file` with symlinks and `..` gone; BadRequest for what cannot name a file at all."""
    if not file:
        raise BadRequest("no file given: pass the path of a HOL script (e.g. fooScript.sml)")
    if "\0" in file:
        raise BadRequest(f"{file!r} contains a NUL byte, which no file name can: pass the script's path as it is")
    encoded = os.fsencode(file)
    if len(encoded) >= PATH_MAX:
        raise BadRequest(
            f"the path {_clip(file)} is {len(encoded)} bytes long; paths are limited to {PATH_MAX - 1} bytes: "
            "pass the script's real path"
        )
    long = next((part for part in encoded.split(b"/") if len(part) > NAME_MAX), None)
    if long is not None:
        raise BadRequest(
            f"the name {_clip(os.fsdecode(long))} in {_clip(file)} is {len(long)} bytes long; file and "
            f"directory names are limited to {NAME_MAX} bytes: check the path"
        )
    path = Path(file)
    if not path.is_absolute():
        raise BadRequest(f"{file!r} is not an absolute path; clients send absolute paths")
    real = os.path.realpath(path)
    try:
        real.encode("utf-8")
    except UnicodeEncodeError:
        # A symlink into a directory whose name is not UTF-8: answers, HOL's
        # URIs and the wire all carry the resolved path as UTF-8 text.
        shown = repr(os.fsencode(real))
        raise NotUtf8(f"{file} resolves to {shown}, a path that is not valid UTF-8: rename the directory") from None
    return Path(real)


def read_steps(file: str, known: Script | None = None) -> stepping.Steps[Script]:
    """Read and decode `file`, in steps (decoding and hashing a 4 MB script takes
    some 20 ms); raise a coded error saying what to do otherwise.  If the bytes
    are `known`'s, `known` itself (nothing decoded or hashed)."""
    path, data = _read_bytes(file)
    if known is not None and known.path == path and known.data == data:
        return known
    text = yield from _decoded(file, data)
    return Script(path, data, text, (yield from content_hash_steps(data)))


def _read_bytes(file: str) -> tuple[Path, bytes]:
    path = resolve(file)
    if path.suffix not in SCRIPT_SUFFIXES:
        raise BadRequest(
            f"{file} is not a HOL script: holsrv answers about SML files ({', '.join(SCRIPT_SUFFIXES)}), "
            "usually a theory script named fooScript.sml"
        )
    if not stat.S_ISREG(_stat(path, file).st_mode):
        raise NotAFile(f"{file} is not a regular file (a directory?). Pass a HOL script such as fooScript.sml.")
    try:
        size = path.stat().st_size
        if size > MAX_SCRIPT_BYTES:
            raise BadRequest(f"{file} is {size} bytes; scripts over {MAX_SCRIPT_BYTES} bytes are refused")
        return path, path.read_bytes()
    except PermissionError:
        raise _denied(file) from None


def _decoded(file: str, data: bytes) -> stepping.Steps[str]:
    """`data` as UTF-8 text, in steps; NotUtf8 saying where it is not."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    pieces = []
    try:
        for start in range(0, len(data), stepping.CHARS_PER_STEP):
            end = start + stepping.CHARS_PER_STEP
            pieces.append(decoder.decode(data[start:end], final=end >= len(data)))
            yield
        pieces.append(decoder.decode(b"", final=True))
    except UnicodeDecodeError:
        try:
            data.decode("utf-8")  # raises again, with the offset in the whole file
        except UnicodeDecodeError as err:
            line = data.count(b"\n", 0, err.start) + 1
            raise NotUtf8(
                f"{file} is not valid UTF-8 (bad byte 0x{data[err.start]:02x} on line {line}). "
                "HOL scripts must be UTF-8: re-save the file as UTF-8."
            ) from None
        raise
    return "".join(pieces)


def _stat(path: Path, file: str) -> os.stat_result:
    """`path`'s stat, or the coded error for why there is none."""
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFound(
            f"no such file: {file}. Check the path (absolute, or relative to where the client runs)."
        ) from None
    except PermissionError:
        raise _denied(file) from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise FileNotFound(f"{file} is a loop of symbolic links: point it at a real script") from None
        if err.errno == errno.ENAMETOOLONG:
            raise BadRequest(f"{file} resolves to a path longer than the system allows: pass a shorter one") from None
        raise


def _denied(file: str) -> PermissionDenied:
    return PermissionDenied(
        f"the daemon may not read {file} (permission denied on the file or on a directory of its path). "
        "The daemon runs as your user: make the file readable and its directories enterable "
        "(chmod u+r on the file, u+x on the directories), or use a copy it can read."
    )


def _clip(text: str, keep: int = 60) -> str:
    return repr(text) if len(text) <= keep else repr(text[:keep]) + "…"


# -- freshness: one stat when nothing changed -------------------------------

# A file whose last change is younger than this when it is read may change
# again within the file system's timestamp granularity (a clock tick on
# Linux, a second or two elsewhere) without its stat changing: it is read
# again until it is older ("racily clean", as git calls it).
RACY_NS = 2_000_000_000
MAX_REMEMBERED = 64
MAX_REMEMBERED_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Vouched:
    """A read whose file has not been written since, by inotify's word."""

    identity: tuple[int, ...]  # `identity` taken before the read
    script: Script


@dataclass(frozen=True)
class _Seen:
    identity: tuple[int, ...]  # device, inode, size, mtime_ns, ctime_ns of the file read
    script: Script
    settled: bool  # old enough when read that an equal stat means equal bytes


class Reader:
    """`read`, remembering the last `Script` read through each spelling of a path.

    When the file's stat (device, inode, size, mtime_ns and ctime_ns) equals
    the one taken before its last read, reading again costs one `os.stat` of
    the spelling and returns the same `Script`: no `realpath` walk, no read,
    no hash, and the same text object, so per-text caches hit at once.  Any
    difference, and any error, goes through `read` with all its checks.  A
    rewrite keeps nothing equal but the size: writing changes ctime, which
    no one can set.  Bounded, least recently used first out.

    A spelling's resolution is trusted while its stat is unchanged: a path
    that comes to reach the same inode by another real path (a renamed
    directory) keeps the old resolution until the file changes.

    A file changed too recently for its stat to prove it unchanged is still
    not read again if `vouch` (the script watch) read it with the same stat
    and has seen no write to it since: inotify tells a rewrite that keeps
    the stat from none.
    """

    def __init__(
        self,
        max_entries: int = MAX_REMEMBERED,
        max_bytes: int = MAX_REMEMBERED_BYTES,
        clock_ns: Callable[[], int] = time.time_ns,
        vouch: Callable[[str], Vouched | None] | None = None,
    ) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._clock_ns = clock_ns  # the wall clock, which file times are in
        self._vouch = vouch
        self._seen: OrderedDict[str, _Seen] = OrderedDict()
        self._bytes = 0
        self.reads = 0  # files read and hashed (for tests and the benchmark)

    def read(self, file: str) -> Script:
        """The script at `file` as it is now; raises as `read` does."""
        return stepping.run(self.read_steps(file))

    def unchanged(self, file: str) -> Script | None:
        """The `Script` last read through `file` if its stat says it is unchanged, at the cost
        of that one `os.stat`; None when it must be read (never read here)."""
        return self._known(file, _identity(file))

    def _known(self, file: str, identity: tuple[int, ...] | None) -> Script | None:
        """`unchanged`, with the file's stat (`identity`) already taken."""
        if identity is None:
            return None  # nothing with no identity is remembered or vouched for
        seen = self._seen.get(file)
        if seen is not None and seen.settled and identity == seen.identity:
            self._seen.move_to_end(file)
            return seen.script
        vouched = self._vouch(file) if self._vouch is not None else None
        if vouched is not None and vouched.identity == identity:
            self._remember(file, _Seen(vouched.identity, vouched.script, settled=False))
            return vouched.script
        return None

    def read_steps(self, file: str) -> stepping.Steps[Script]:
        """`read` in steps (see `read_steps`)."""
        now = self._clock_ns()
        # One stat, taken before reading: a change during the read then shows next time.
        identity = _identity(file)
        known = self._known(file, identity)
        if known is not None:
            return known
        seen = self._seen.get(file)
        # Touched, not changed (or read again while racily clean): the same
        # objects, nothing decoded or hashed.
        script = yield from read_steps(file, known=seen.script if seen is not None else None)
        self.reads += 1
        if identity is None:
            return script
        changed = max(identity[3], identity[4])
        self._remember(file, _Seen(identity, script, settled=now - changed > RACY_NS))
        return script

    def _remember(self, file: str, seen: _Seen) -> None:
        old = self._seen.pop(file, None)
        if old is not None:
            self._bytes -= len(old.script.data)
        self._seen[file] = seen
        self._bytes += len(seen.script.data)
        while self._seen and (len(self._seen) > self.max_entries or self._bytes > self.max_bytes):
            _, dropped = self._seen.popitem(last=False)
            self._bytes -= len(dropped.script.data)


def identity(file: str) -> tuple[int, ...] | None:
    """What must stay equal for a file to count as unchanged (device, inode, size, mtime, ctime); None if
    it cannot be had."""
    return _identity(file)


def _identity(file: str) -> tuple[int, ...] | None:
    """What must stay equal for a file to count as unchanged; None if it cannot be had."""
    try:
        st = os.stat(file)
    except (OSError, ValueError):  # ValueError: a NUL byte; `read` says what is wrong
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
