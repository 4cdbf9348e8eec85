"""Against a real HOL4: two projects in one daemon, one on the HOL itself and one on the same HOL
through a wrapper path (a `holsrv.toml` each), served side by side, each with its own heap cap.

Runs only where a real HOL4 is found (the `real_hol` fixture of test_real_hol.py); skipped otherwise.
"""

from __future__ import annotations

from pathlib import Path

import test_real_hol

from holsrv.rpc import messages as m

real_hol = test_real_hol.real_hol
WAIT_S = test_real_hol.WAIT_S
CALL_TIMEOUT_S = test_real_hol.CALL_TIMEOUT_S

SCRIPT = """\
Theory {name}
Ancestors arithmetic

Theorem add_zero:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED
"""


def _project(root: Path, text: str, name: str) -> Path:
    (root / ".git").mkdir(parents=True)
    (root / "holsrv.toml").write_text(text)
    (root / "holsrv.toml").chmod(0o644)
    script = root / f"{name}Script.sml"
    script.write_text(SCRIPT.format(name=name))
    return script


def test_two_projects_on_one_real_hol_and_a_wrapper_of_it_are_served_side_by_side(
        daemon_factory, tmp_path, real_hol):
    wrapper = tmp_path / "wrapped" / "bin" / "hol"
    wrapper.parent.mkdir(parents=True)
    wrapper.write_text(f'#!/bin/sh\nexec "{real_hol}" "$@"\n')
    wrapper.chmod(0o755)
    direct = _project(tmp_path / "direct", f'hol_bin = "{real_hol}"\nmax_heap_mb = 3000\n', "direct")
    wrapped = _project(tmp_path / "wrapped-dev",
                       f'hol_bin = "{wrapper}"\nholmake_bin = "{Path(real_hol).parent / "Holmake"}"\n'
                       "max_heap_mb = 2500\n", "wrapped")
    daemon = daemon_factory(hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120,
                            max_servers=2, memory_budget_mb=0)
    for script in (direct, wrapped):
        assert daemon.call(m.Diagnostics(str(script), wait=WAIT_S), CALL_TIMEOUT_S).verdict == "OK"
    rows = {Path(r.file): r for r in daemon.call(m.Status()).sessions}
    assert rows[direct].hol == real_hol and rows[wrapped].hol == str(wrapper)
    assert rows[direct].project == str(direct.parent / "holsrv.toml")
    # (Real `hol` is a script that execs Poly/ML, so the process's command line need not show --maxheap.)
    assert (rows[direct].max_heap_mb, rows[wrapped].max_heap_mb) == (3000, 2500)
    assert all(rows[s].state not in ("dead", "stopped") for s in (direct, wrapped))
