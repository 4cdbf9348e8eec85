"""holctl must start in milliseconds: importing it may not pull in the daemon's stack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent

HEAVY = ["asyncio", "uvloop", "mcp", "psutil", "pydantic", "anyio"]


def modules_after_import(module: str) -> set[str]:
    code = f"import sys, json, {module}; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, check=True, timeout=60, cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )
    return set(json.loads(out.stdout))


def test_importing_holctl_cli_loads_no_event_loop_mcp_or_process_libraries():
    loaded = modules_after_import("holctl.cli")
    assert "holctl.render" in loaded
    assert [m for m in HEAVY if m in loaded] == []


def test_importing_the_client_helper_loads_no_event_loop_mcp_or_process_libraries():
    loaded = modules_after_import("holsrv.rpc.client")
    assert [m for m in HEAVY if m in loaded] == []


def test_holctl_cli_loads_only_stdlib_msgspec_click_and_our_wire_package():
    # typing_extensions comes with msgspec; the baseline holds what site hooks load.
    allowed = set(sys.stdlib_module_names) | {"msgspec", "typing_extensions", "click", "holsrv", "holctl"}
    added = modules_after_import("holctl.cli") - modules_after_import("sys")
    assert sorted(m for m in added if m.split(".")[0] not in allowed) == []
    ours = {m for m in added if m.startswith("holsrv.")}
    # Not holsrv.rpc.aclient: holmcp's asyncio client.  holsrv.facilities is stdlib only: the
    # socket path limit of this platform (paths.checked_socket).
    assert ours <= {"holsrv.errors", "holsrv.facilities", "holsrv.rpc", "holsrv.rpc.autostart", "holsrv.rpc.calls",
                    "holsrv.rpc.client", "holsrv.rpc.connecting", "holsrv.rpc.framing", "holsrv.rpc.limits",
                    "holsrv.rpc.messages", "holsrv.rpc.paths", "holsrv.rpc.words"}


def test_importing_the_wire_builds_no_decoder_until_one_is_used():
    code = (
        "from holsrv.rpc import client, framing; built = framing._decoder.cache_info().currsize; "
        "framing.reply_decoder; print(built, framing._decoder.cache_info().currsize)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, check=True, timeout=60, cwd=ROOT,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.split() == ["0", "1"]
