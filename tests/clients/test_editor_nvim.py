"""A real editor on `holctl lsp`: Neovim's built-in LSP client, headless, against the fake HOL.

Skipped with its reason where `nvim` is not installed (the distribution's
package provides it); the test installs nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FAILING_SCRIPT

LUA = Path(__file__).parent.parent / "editors" / "nvim_diagnostics.lua"
NVIM = shutil.which("nvim")


@pytest.mark.skipif(NVIM is None, reason="nvim is not installed (Debian/Ubuntu: apt-get install neovim)")
def test_neovim_opening_a_script_through_holctl_lsp_shows_the_failing_proofs_error(daemon, write_script, tmp_path):
    path = write_script(FAILING_SCRIPT)
    out = tmp_path / "diagnostics.txt"
    holctl = [sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "--no-start", "lsp"]
    env = {
        **os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent.parent),
        "HOLCTL_NVIM_SCRIPT": str(path), "HOLCTL_NVIM_OUT": str(out), "HOLCTL_NVIM_CMD": json.dumps(holctl),
        "HOLCTL_NVIM_WAIT_MS": "90000", "XDG_STATE_HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path),
    }
    done = subprocess.run(
        [NVIM, "--headless", "--clean", "-n", "-c", f"luafile {LUA}"],
        env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )
    print(done.stdout, done.stderr)  # what Neovim printed: the diagnostics, shown on failure
    assert done.returncode == 0, done.stderr
    shown = out.read_text(encoding="utf-8").splitlines()
    wrong = FAILING_SCRIPT.splitlines().index("Theorem wrong:") + 1
    failing = [line for line in shown if "FAIL_TAC: nope" in line]
    assert failing, shown
    # The error is on the failing theorem's name or its failing step, in Neovim's 1-based lines.
    assert wrong <= int(failing[0].split(":")[0]) <= wrong + 3
