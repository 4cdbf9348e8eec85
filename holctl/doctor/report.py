"""What `holctl doctor` found: one typed check per line, and the report `--json` prints."""

from __future__ import annotations

import enum

import msgspec


class Status(enum.Enum):
    OK = "ok"
    WARN = "warn"  # works, but something is worth fixing (or cannot be told)
    FAIL = "fail"
    SKIP = "skip"  # could not be checked, because of an earlier failure or nothing to check


class Check(msgspec.Struct, omit_defaults=True):
    """One thing checked.  `needed`: the main job (holctl and holmcp answering about a
    script) cannot work while this fails; the others are advice."""

    name: str  # stable: hol, proof_server, holmake, settings, heap, ancestors, daemon, memory, ...
    status: Status
    needed: bool
    message: str
    fix: str = ""
    # The `services` check's finding for each of HOL's services: "works", "lacking" or "unknown".
    services: dict[str, str] = {}


class Report(msgspec.Struct):
    ok: bool  # no needed check failed: the exit status is 0
    version: str  # of these clients
    checks: list[Check]


def report(checks: list[Check], version: str) -> Report:
    # A needed check is skipped only when one it stands on failed, which decides already.
    ok = not any(c.needed and c.status is Status.FAIL for c in checks)
    return Report(ok, version, checks)


_MARK = {Status.OK: "ok", Status.WARN: "warn", Status.FAIL: "FAIL", Status.SKIP: "skip"}


def text(found: Report) -> str:
    """The report as lines: one a check, with its fix, then a verdict line."""
    width = max((len(c.name) for c in found.checks), default=0)
    lines = []
    for check in found.checks:
        line = f"{_MARK[check.status]:<4}  {check.name:<{width}}  {check.message}"
        if check.fix:
            line += f" Fix: {check.fix}"
        lines.append(line)
    failed = [c.name for c in found.checks if c.needed and c.status is Status.FAIL]
    advice = [c.name for c in found.checks if not c.needed and c.status is Status.WARN]
    needed = ", ".join(c.name for c in found.checks if c.needed)
    if failed:
        lines.append(f"not ready: {', '.join(failed)} must be fixed first (needed: {needed}; the rest is advice).")
    else:
        tail = f"; advice on {', '.join(advice)}" if advice else ""
        lines.append(f"ready: every needed check passed ({needed}){tail}.")
    return "\n".join(lines)
