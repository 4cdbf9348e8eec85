"""The one place the daemon writes a user's file: bytes in place of bytes it has seen.

`try --apply` is the only caller.  A write happens only while the file still
has the content hash the caller expects, never through a symbolic link, and
atomically: a temporary file beside the target (same directory, so the
rename cannot cross file systems), written, fsync'd, renamed onto the
target, and the directory fsync'd, so a crash leaves the old bytes or the
new ones, never a mixture.  The original's permission bits are kept.

Blocking (reads, fsyncs): callers run it in a thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from holsrv.disk.files import content_hash
from holsrv.errors import FileChanged, NotAFile, PermissionDenied, SymlinkRefused, WriteFailed


def replace(path: Path, expected_hash: str, data: bytes) -> str:
    """Write `data` as `path`'s bytes if its bytes still hash to `expected_hash`; the new hash.

    Raises FileChanged (nothing written) if they do not, SymlinkRefused if
    `path` is a symbolic link, NotAFile if it is not a regular file,
    PermissionDenied or WriteFailed if the write itself fails.
    """
    old, mode = _current(path)
    if content_hash(old) != expected_hash:
        raise FileChanged(
            f"{path} changed on disk since the trial (its content is no longer {expected_hash[:12]}), "
            "so nothing was written: call try again on the new text."
        )
    # The file could still change between this check and the rename below (no
    # lock spans an editor's write); the window is the write of one file.
    _atomic_write(path, data, mode)
    return content_hash(data)


def refuse_link(file: str) -> None:
    """SymlinkRefused if `file` (as given) is a symbolic link: the daemon writes no file through one."""
    if os.path.islink(file):
        raise SymlinkRefused(
            f"{file} is a symbolic link (to {os.path.realpath(file)}): the daemon never writes a file "
            "through a link, so --apply refuses it. Pass the real path to apply, or leave out --apply."
        )


def _current(path: Path) -> tuple[bytes, int]:
    """`path`'s bytes and permission bits, read without following a link at its end."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        if err.errno == errno.ELOOP:
            refuse_link(str(path))
        if isinstance(err, FileNotFoundError):
            raise FileChanged(f"{path} no longer exists, so nothing was written.") from None
        raise _failed(path, err) from None
    with open(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise NotAFile(f"{path} is no longer a regular file, so nothing was written.")
        return f.read(), stat.S_IMODE(st.st_mode)


def _atomic_write(path: Path, data: bytes, mode: int) -> None:
    temp = path.with_name(f".{path.name}.holsrv-{secrets.token_hex(6)}.tmp")
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    except OSError as err:
        raise _failed(path, err) from None
    try:
        with open(fd, "wb") as f:
            os.fchmod(f.fileno(), mode)  # the umask may have taken bits the original has
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)  # a link put at `path` meanwhile is replaced, never followed
    except OSError as err:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise _failed(path, err) from None
    _sync_directory(path.parent)


def _sync_directory(directory: Path) -> None:
    """Make the rename durable.  Best effort: the rename has happened either way."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _failed(path: Path, err: OSError) -> PermissionDenied | WriteFailed:
    if isinstance(err, PermissionError):
        return PermissionDenied(
            f"the daemon may not write {path} or create a file beside it (permission denied): nothing was "
            "written. Make the file and its directory writable (chmod u+w), or apply the candidate yourself."
        )
    return WriteFailed(f"writing {path} failed ({err.strerror or err}): nothing was written.")
