"""Would a script in the current directory find its heap and its ancestors built?

The heap is the one HOL picks in the script's directory (docs/protocol.md#working-directory-heap-and-ancestors:
the Holmakefile's single-word `HOLHEAP`, else the default); the ancestors
are looked for where the daemon looks for them (`holsrv.disk.ancestors`), and
HOL's own theories in the HOL tree's `sigobj`.
"""

from __future__ import annotations

import re
from pathlib import Path

from holctl.doctor.report import Check, Status

MAX_SCRIPTS = 50  # a directory of more is read this far
_HOLHEAP = re.compile(r"^\s*HOLHEAP\s*[:+]?=(.*)$", re.MULTILINE)
_BUILT = ("Theory.uo", "Theory.ui", "Theory.dat", "Theory.sig")


def scripts_in(directory: Path) -> list[Path]:
    return sorted(directory.glob("*Script.sml"))[:MAX_SCRIPTS]


def heap(directory: Path, holdir: str) -> Check:
    """The heap HOL would load for a script here, and whether it is built."""
    if not scripts_in(directory):
        return Check("heap", Status.SKIP, False, f"no *Script.sml in {directory}: run doctor in a script's directory.")
    default = f"{holdir}/bin/hol.state" if holdir else "HOL's bin/hol.state"
    try:
        makefile = (directory / "Holmakefile").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return Check("heap", Status.OK, False, f"no Holmakefile here: the default heap ({default}).")
    match = _HOLHEAP.search(makefile.replace("\\\n", " "))
    words = match.group(1).split() if match else []
    if len(words) != 1:
        why = "names no HOLHEAP" if not words else "names more than one word as HOLHEAP, which HOL ignores"
        return Check("heap", Status.OK, False, f"the Holmakefile {why}: the default heap ({default}).")
    word = re.sub(r"\$[({]HOLDIR[)}]", holdir, words[0]) if holdir else words[0]
    if "$" in word:
        return Check("heap", Status.WARN, False, f"HOLHEAP = {words[0]}: a make variable doctor cannot expand.")
    path = (directory / word).resolve()
    if path.is_file():
        return Check("heap", Status.OK, False, f"HOLHEAP = {words[0]}: {path} is built.")
    return Check("heap", Status.WARN, False,
                 f"HOLHEAP = {words[0]}, but {path} is not built: HOL falls back to the default heap, and what "
                 "the heap holds shows up as unbuilt ancestors.",
                 f"run Holmake in {directory} (`holctl holmake FILE`, or the holmake tool)")


def ancestors(directory: Path, holdir: str) -> Check:
    """Each script's ancestors: built where Holmake puts them, or HOL's own."""
    from holsrv.disk import ancestors as scan

    found = scripts_in(directory)
    if not found:
        return Check("ancestors", Status.SKIP, False, f"no *Script.sml in {directory}.")
    sigobj = Path(holdir) / "sigobj"
    has_sigobj = bool(holdir) and sigobj.is_dir()
    missing: dict[str, list[str]] = {}
    names = 0
    for script in found:
        try:
            text = script.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        times = scan.built_times(text, directory)
        names += len(times)
        for name, built in times.items():
            if built <= 0 and not (has_sigobj and any((sigobj / f"{name}{end}").exists() for end in _BUILT)):
                missing.setdefault(script.name, []).append(name)
    if not missing:
        return Check("ancestors", Status.OK, False,
                     f"{_count(names, 'ancestor')} of {_count(len(found), 'script')} here: built or HOL's own.")
    listed = "; ".join(f"{script} needs {', '.join(names)}" for script, names in missing.items())
    where = "" if has_sigobj else f" (and HOL's own theories cannot be told: no sigobj in the HOL tree {holdir or '?'})"
    first = next(iter(missing))
    return Check("ancestors", Status.WARN, False,
                 f"not built here, in the Holmakefile's INCLUDES or in the project{where}: {listed}. A script "
                 "whose ancestor is not built is BLOCKED.",
                 f"`holctl holmake {first}` (or the holmake tool; Holmake in their directory), then retryCompile")


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
