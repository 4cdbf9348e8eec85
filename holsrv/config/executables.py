"""Finding the `hol` and `Holmake` executables the servers and builds run.

Settings name them (or not); this looks in the environment and on PATH and,
when neither is found, says what it tried and how to fix it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from holsrv.errors import HolNotFound


def hol_command(hol_bin: str | None, extra_path: Sequence[str], environ: Mapping[str, str] | None = None) -> str:
    """The `hol` executable: `hol_bin` / $HOL_BIN, else $HOLDIR/bin/hol, else `hol` on PATH."""
    env = os.environ if environ is None else environ
    tried = []
    for candidate in (hol_bin, env.get("HOL_BIN")):
        if candidate:
            if os.access(candidate, os.X_OK) and Path(candidate).is_file():
                return candidate
            tried.append(f"HOL_BIN={candidate} (not an executable file)")
    holdir = env.get("HOLDIR")
    if holdir:
        candidate = str(Path(holdir) / "bin" / "hol")
        if os.access(candidate, os.X_OK):
            return candidate
        tried.append(f"HOLDIR={holdir} (no executable bin/hol there)")
    search = os.pathsep.join([*extra_path, env.get("PATH", "")])
    found = shutil.which("hol", path=search)
    if found:
        return found
    tried.append("`hol` on PATH (not found)")
    raise HolNotFound(
        "cannot find HOL4: tried " + "; ".join(tried) + ". Set HOL_BIN to the `hol` "
        "executable, or HOLDIR to the HOL4 tree, or put HOL's bin/ on PATH, then restart "
        "the daemon (holctl shutdown)."
    )


def holmake_command(holmake_bin: str | None, hol_bin: str | None, extra_path: Sequence[str],
                    environ: Mapping[str, str] | None = None) -> str:
    """Holmake of the same HOL as the servers: `holmake_bin`, else beside `hol`, else $HOLDIR/bin, else PATH."""
    env = os.environ if environ is None else environ
    if holmake_bin:
        if os.access(holmake_bin, os.X_OK) and Path(holmake_bin).is_file():
            return holmake_bin
        raise HolNotFound(f"HOLSRV_HOLMAKE_BIN={holmake_bin} is not an executable file: fix or unset it")
    candidates = []
    with contextlib.suppress(HolNotFound):
        hol = hol_command(hol_bin, extra_path, environ)
        candidates += [Path(hol).parent / "Holmake", Path(os.path.realpath(hol)).parent / "Holmake"]
    if env.get("HOLDIR"):
        candidates.append(Path(env["HOLDIR"]) / "bin" / "Holmake")
    for candidate in candidates:
        if os.access(candidate, os.X_OK) and candidate.is_file():
            return str(candidate)
    found = shutil.which("Holmake", path=os.pathsep.join([*extra_path, env.get("PATH", "")]))
    if found:
        return found
    raise HolNotFound(
        "cannot find Holmake: looked beside the `hol` the servers use, in $HOLDIR/bin and on PATH. "
        "Set HOLSRV_HOLMAKE_BIN (or HOLDIR) and restart the daemon (holctl shutdown)."
    )
