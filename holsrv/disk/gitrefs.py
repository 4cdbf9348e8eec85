"""A script as a git repository has it at a revision: read with `git`, bounded, never written.

`verify` compares a script's statements with the ones committed (HEAD by
default), and diagnostics notes a statement that differs from HEAD's.  Both
read the committed text with `git show REV:./NAME` run in the script's
directory: one bounded child (a deadline, a cap on what it prints, killed
with its group past either), with optional locks off so that git writes
nothing in the user's repository (`GIT_OPTIONAL_LOCKS=0`).

`head_key` names a directory's HEAD commit from the files under `.git` alone
(no child): what a cache of "this text against HEAD" is keyed by, so an
unchanged text against an unchanged HEAD costs no git at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
from dataclasses import dataclass
from pathlib import Path

MAX_OUTPUT_BYTES = 32 * 1024 * 1024  # a committed script, as `files.MAX_SCRIPT_BYTES`
KILL_WAIT_S = 2.0  # for a killed git to be reaped
_HASH = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_REV = re.compile(r"[A-Za-z0-9_./@^~{}+-][A-Za-z0-9_./@^~{}+:-]*")


@dataclass(frozen=True)
class Committed:
    """The script at a revision: its text, or why there is none (`why`)."""

    text: str | None
    commit: str = ""  # the revision's commit id
    why: str = ""  # when `text` is None: a sentence saying why (no git, not a repository, not committed)
    not_committed: bool = False  # the repository is there, the file is not in that revision


def bad_revision(rev: str) -> str:
    """Why `rev` is not something to hand `git show` ("" when it is fine): no options, no spaces."""
    if not rev or len(rev) > 200 or rev.startswith("-") or not _REV.fullmatch(rev):
        return (f"{rev[:60]!r} is not a git revision: give a commit, branch or tag such as HEAD, HEAD~1, "
                "main or a commit id")
    return ""


async def committed(path: Path, rev: str, timeout_s: float) -> Committed:
    """The text of `path` at revision `rev` of the repository holding it, within `timeout_s`."""
    where = path.parent
    code, out, err = await _git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], where, timeout_s)
    if code is None:
        return Committed(None, why=err)
    if code != 0:
        if "not a git repository" in err.lower():
            return Committed(None, why=f"{path.parent} is not in a git repository")
        return Committed(None, why=f"git knows no commit {rev!r} in the repository holding {path.name}")
    commit = out.decode("ascii", "replace").strip()
    code, out, err = await _git(["show", f"{commit}:./{path.name}"], where, timeout_s)
    if code is None:
        return Committed(None, commit, why=err)
    if code != 0:
        return Committed(None, commit, why=f"{path.name} is not in commit {commit[:12]} ({rev})", not_committed=True)
    return Committed(out.decode("utf-8", "replace"), commit)


async def _git(args: list[str], cwd: Path, timeout_s: float) -> tuple[int | None, bytes, str]:
    """(exit status, stdout, stderr) of `git ARGS` in `cwd`; status None and a sentence when it did not run."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C",
           "GIT_PAGER": "cat", "GIT_CONFIG_NOSYSTEM": "1"}
    try:
        proc = await asyncio.create_subprocess_exec(
            "git", "--no-pager", *args, cwd=str(cwd), env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
    except OSError as err:
        return None, b"", f"git could not be run ({err.strerror or err}), so no committed text could be read"
    try:
        async with asyncio.timeout(timeout_s):
            out, said = await _read(proc)
            code = await proc.wait()
    except (TimeoutError, _TooLong) as stopped:
        await _killed(proc)
        if isinstance(stopped, _TooLong):
            return None, b"", f"git printed more than {MAX_OUTPUT_BYTES} bytes for {' '.join(args[:2])}; stopped"
        return None, b"", f"git did not answer within {timeout_s:g}s (git {' '.join(args[:2])}); it was stopped"
    except asyncio.CancelledError:
        # Reaped even so (the daemon stopping cancels it): a child left unawaited keeps its pipes
        # open past the event loop's end.
        await _killed(proc)
        raise
    return code, out, said.decode("utf-8", "replace")


class _TooLong(Exception):
    pass


async def _read(proc: asyncio.subprocess.Process) -> tuple[bytes, bytes]:
    assert proc.stdout is not None and proc.stderr is not None
    err_task = asyncio.ensure_future(proc.stderr.read(64 * 1024))
    chunks, size = [], 0
    try:
        while chunk := await proc.stdout.read(1 << 16):
            chunks.append(chunk)
            size += len(chunk)
            if size > MAX_OUTPUT_BYTES:
                raise _TooLong
        return b"".join(chunks), await err_task
    finally:
        err_task.cancel()


async def _killed(proc: asyncio.subprocess.Process) -> None:
    """Kill git's group and wait (at most KILL_WAIT_S) for it to be reaped."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(KILL_WAIT_S):
            await proc.wait()


def head_key(directory: Path) -> str | None:
    """The commit HEAD names in the repository holding `directory`, read from `.git`'s files
    (a worktree's too); None when there is none or it cannot be read that way."""
    git = _git_dir(directory)
    if git is None:
        return None
    try:
        head = (git / "HEAD").read_text(encoding="utf-8").strip()
        if _HASH.fullmatch(head):
            return head
        if not head.startswith("ref: "):
            return None
        ref = head[5:].strip()
        common = git
        if (git / "commondir").exists():
            common = (git / (git / "commondir").read_text(encoding="utf-8").strip()).resolve()
        for base in (git, common):
            with contextlib.suppress(OSError):
                return (base / ref).read_text(encoding="utf-8").strip()
        with contextlib.suppress(OSError):
            for line in (common / "packed-refs").read_text(encoding="utf-8").splitlines():
                if line.endswith(" " + ref):
                    return line.split(" ", 1)[0]
        return f"unborn {ref}"  # a branch with no commit yet
    except (OSError, UnicodeDecodeError):
        return None


def _git_dir(directory: Path) -> Path | None:
    for place in (directory, *directory.parents):
        dot = place / ".git"
        if dot.is_dir():
            return dot
        if dot.is_file():
            with contextlib.suppress(OSError, UnicodeDecodeError):
                said = dot.read_text(encoding="utf-8").strip()
                if said.startswith("gitdir: "):
                    return (place / said[8:].strip()).resolve()
            return None
    return None
