"""Unix socket paths within what a socket address holds (holsrv/rpc/paths.py): 107 bytes on Linux,
103 on macOS and in portable mode.  A default that fits, and a too-long path refused with a stable
code, the limit and the fix, by the daemon and by every client, instead of `AF_UNIX path too long`."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from holsrv import facilities
from holsrv.errors import SocketPathTooLong
from holsrv.rpc import aclient, paths
from holsrv.rpc import messages as m

from conftest import FAKE_HOL


def _long(base: Path, size: int) -> Path:
    """A socket path of exactly `size` bytes under `base`."""
    head = str(base / "d") + "/"
    return Path(head + "s" * (size - len(head) - len(".sock")) + ".sock")


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("HOLSRV_SOCKET", facilities.PORTABLE_ENV)}
    return {**env, "HOL_BIN": str(FAKE_HOL), "XDG_CONFIG_HOME": str(tmp / "config"), **extra}


def _run(*command: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, timeout=60, env=env)


def test_holsrv_refuses_a_120_byte_socket_path_saying_the_limit_and_what_to_do(short_tmp, tmp_path):
    sock = _long(short_tmp, 120)
    done = _run("holsrv", "--socket", str(sock), env=_env(tmp_path))
    assert done.returncode == 78, done.stderr  # a setting it will not run with: systemd does not loop on it
    assert f"the socket path {sock} is 120 bytes" in done.stderr and "(107 bytes; 103 on macOS)" in done.stderr
    assert "give --socket or HOLSRV_SOCKET a shorter path" in done.stderr
    assert "Traceback" not in done.stderr and not sock.parent.exists()


@pytest.mark.parametrize("how", ["--socket", "HOLSRV_SOCKET"])
def test_holctl_refuses_a_120_byte_socket_path_with_its_code_and_starts_nothing(short_tmp, tmp_path, how):
    sock = _long(short_tmp, 120)
    if how == "--socket":
        done = _run("holctl", "--socket", str(sock), "status", env=_env(tmp_path))
    else:
        done = _run("holctl", "status", env=_env(tmp_path, HOLSRV_SOCKET=str(sock)))
    assert done.returncode == 5, done.stderr
    assert done.stderr.startswith(f"holctl: socket_path_too_long: the socket path {sock} is 120 bytes"), done.stderr
    assert "Traceback" not in done.stderr and not sock.parent.exists()  # no daemon was started on it


def test_the_async_client_of_holmcp_and_holctl_lsp_refuses_it_too(short_tmp):
    client = aclient.AsyncClient(_long(short_tmp, 120), name="test", autostart=True)
    with pytest.raises(SocketPathTooLong, match="103 on macOS"):
        asyncio.run(client.call(m.Status()))
    assert not (short_tmp / "d").exists()


def test_a_path_that_fits_linux_but_not_macos_is_refused_in_portable_mode(short_tmp, monkeypatch):
    sock = _long(short_tmp, 105)
    monkeypatch.setattr(facilities, "LINUX", True)
    monkeypatch.setattr(facilities, "PORTABLE", False)  # whichever mode the suite runs in
    assert paths.checked_socket(sock) == sock  # Linux's sun_path holds it
    monkeypatch.setattr(facilities, "PORTABLE", True)
    with pytest.raises(SocketPathTooLong, match=r"is 105 bytes, longer than a Unix socket address holds here \(103"):
        paths.checked_socket(sock)
    assert paths.checked_socket(_long(short_tmp, 103)) == _long(short_tmp, 103)


def test_the_default_socket_leaves_a_directory_too_deep_for_a_short_private_one_under_tmp(tmp_path, monkeypatch):
    deep = tmp_path / ("x" * 90)
    deep.mkdir()
    monkeypatch.delenv(paths.SOCKET_ENV, raising=False)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    monkeypatch.setenv("TMPDIR", str(deep))
    assert paths.default_socket() == Path(f"/tmp/holsrv-{os.getuid()}/holsrv.sock")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # short enough: used
    assert paths.default_socket() == tmp_path / "holsrv" / "holsrv.sock"


def test_off_linux_the_default_socket_skips_tmpdir_for_the_short_directory_under_tmp(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.SOCKET_ENV, raising=False)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))  # macOS's is /var/folders/…/T/, long and deep
    assert paths.default_socket() == tmp_path / f"holsrv-{os.getuid()}" / "holsrv.sock"
    monkeypatch.setattr(facilities, "LINUX", False)
    assert paths.default_socket() == Path(f"/tmp/holsrv-{os.getuid()}/holsrv.sock")
