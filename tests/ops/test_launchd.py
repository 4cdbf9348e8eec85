"""`holctl install-service` on macOS: a launchd LaunchAgent (holctl/launchd.py), tested here with the
platform set to darwin; and on a system with neither systemd nor launchd, a plain no."""

from __future__ import annotations

import os
import plistlib

import pytest
from click.testing import CliRunner

from holctl import launchd, service
from holctl.cli import cli
from holsrv import facilities
from holsrv.rpc import paths

from conftest import FAKE_HOL


@pytest.fixture
def mac(monkeypatch):
    monkeypatch.setattr(facilities, "PLATFORM", "darwin")
    monkeypatch.setattr(facilities, "LINUX", False)


def _env(tmp_path, **extra: str) -> dict[str, str | None]:
    return {"HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME":
            str(tmp_path / "config"), "XDG_RUNTIME_DIR": None, "HOL_BIN": str(FAKE_HOL), "HOLSRV_SOCKET": None,
            facilities.PORTABLE_ENV: None, **extra}


def test_on_macos_install_service_writes_a_launch_agent_and_prints_the_launchctl_line(mac, tmp_path, short_tmp):
    sock = short_tmp / "s.sock"  # nobody listens: no daemon of the machine's is asked to stop
    done = CliRunner().invoke(cli, ["install-service"], env=_env(tmp_path, HOLSRV_SOCKET=str(sock)))
    assert done.exit_code == 0, done.output
    file = tmp_path / "home" / "Library" / "LaunchAgents" / "local.holsrv.plist"
    agent = plistlib.loads(file.read_bytes())
    assert agent["Label"] == "local.holsrv"
    assert agent["ProgramArguments"] == [*service.holsrv_command(), "--socket", str(sock),
                                         "--log-file", str(paths.log_path(sock))]
    assert agent["EnvironmentVariables"]["HOL_BIN"] == str(FAKE_HOL)
    assert "HOLSRV_SOCKET" not in agent["EnvironmentVariables"]  # the argument names it
    assert agent["RunAtLoad"] is True and agent["KeepAlive"] == {"SuccessfulExit": False}
    assert f"launchctl bootstrap gui/{os.getuid()} {file}" in done.output
    assert not (tmp_path / "config" / "systemd").exists()  # no systemd units on a Mac


def test_the_launch_agent_listens_where_a_mac_s_clients_look_by_default(mac, tmp_path, monkeypatch):
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.delenv(paths.SOCKET_ENV, raising=False)
    agent, _ = launchd.agent({"HOME": str(tmp_path), "HOL_BIN": str(FAKE_HOL)}, 10.0, exec_start=["holsrv"])
    default = f"/tmp/holsrv-{os.getuid()}/holsrv.sock"
    assert agent["ProgramArguments"][:3] == ["holsrv", "--socket", default] == ["holsrv", "--socket",
                                                                               str(paths.default_socket())]
    assert len(default.encode()) <= facilities.socket_path_max()
    assert agent["ExitTimeOut"] == 2 * 10 + service.STOP_MARGIN_S


def test_on_macos_uninstall_service_removes_the_agent_and_prints_the_bootout_line(mac, tmp_path, short_tmp):
    env = _env(tmp_path, HOLSRV_SOCKET=str(short_tmp / "s.sock"))
    assert CliRunner().invoke(cli, ["install-service"], env=env).exit_code == 0
    done = CliRunner().invoke(cli, ["uninstall-service"], env=env)
    assert done.exit_code == 0, done.output
    assert not launchd.agent_file(env).exists()  # type: ignore[arg-type]
    assert f"launchctl bootout gui/{os.getuid()}/local.holsrv" in done.output


def test_without_systemd_or_launchd_install_service_says_the_daemon_starts_on_demand(tmp_path, monkeypatch):
    monkeypatch.setattr(facilities, "PLATFORM", "freebsd14")
    done = CliRunner().invoke(cli, ["install-service"], env=_env(tmp_path))
    assert done.exit_code == 1
    assert "this system has neither systemd nor launchd: nothing was installed" in done.output
    assert "the first holctl or holmcp call that finds no daemon starts one" in done.output
    assert not (tmp_path / "home").exists() and not (tmp_path / "config").exists()


def test_the_service_manager_goes_by_platform_not_by_portable_mode(monkeypatch):
    monkeypatch.setattr(facilities, "PORTABLE", True)
    for platform, manager in (("linux", "systemd"), ("darwin", "launchd"), ("openbsd7", "none")):
        monkeypatch.setattr(facilities, "PLATFORM", platform)
        assert facilities.service_manager() == manager


def test_on_macos_doctor_names_the_launch_agent_instead_of_systemd(mac, tmp_path, short_tmp, monkeypatch):
    env = _env(tmp_path, HOLSRV_SOCKET=str(short_tmp / "s.sock"), HOLCTL_SYSTEMCTL=str(tmp_path / "no-systemctl"))
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    before = _checks(CliRunner().invoke(cli, ["doctor"], env=env).output)
    assert CliRunner().invoke(cli, ["install-service"], env=env).exit_code == 0
    after = _checks(CliRunner().invoke(cli, ["doctor"], env=env).output)
    file = tmp_path / "home" / "Library" / "LaunchAgents" / "local.holsrv.plist"
    assert before["launchd"] == (f"ok no holsrv agent at {file}: the daemon starts on demand. Fix: optional: "
                                 "`holctl install-service` for a launchd agent that keeps it running from login")
    assert after["launchd"].startswith(f"ok agent installed at {file}, running ")
    assert f"`launchctl print gui/{os.getuid()}/local.holsrv`" in after["launchd"]
    assert not {"systemd", "units"} & (before.keys() | after.keys())


def _checks(output: str) -> dict[str, str]:
    """Each check's status and message, by name, from doctor's text report."""
    found = {}
    for line in output.splitlines():
        words = line.split(None, 2)
        if len(words) == 3 and words[0] in ("ok", "warn", "FAIL", "skip"):
            found[words[1]] = f"{words[0]} {words[2]}"
    return found
