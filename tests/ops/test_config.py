"""The config file: every setting by its field name, under the environment and the flags;
a key or value it cannot use stops the daemon, naming the key, the file and the line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from holsrv.config.settings import ConfigError, Settings, config_path

from conftest import FAKE_HOL


def write_config(home: Path, text: str) -> Path:
    path = home / "holsrv" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_config_file_is_under_the_environment_which_is_under_the_flags(tmp_path):
    text = 'max_servers = 3\nletgo_s = 2\nmax_heap_mb = 100\nextra_path = ["/srv/a", "/srv/b"]\n'
    file = write_config(tmp_path, text)
    env = {"XDG_CONFIG_HOME": str(tmp_path), "HOLSRV_LETGO_S": "5", "HOLSRV_MAX_HEAP_MB": "200"}
    settings = Settings.from_env(env, max_heap_mb=300)
    assert (settings.max_servers, settings.letgo_s, settings.max_heap_mb) == (3, 5.0, 300)
    assert settings.extra_path == ("/srv/a", "/srv/b")
    shown = {name: (value, source) for name, value, source in settings.effective()}
    assert shown["HOLSRV_MAX_SERVERS"] == ("3", f"config file {file}")
    assert shown["HOLSRV_LETGO_S"] == ("5.0", "environment HOLSRV_LETGO_S")
    assert shown["HOLSRV_MAX_HEAP_MB"] == ("300", "flag --max-heap-mb")
    assert shown["HOLSRV_CACHE_ENTRIES"] == ("4096", "default")


def test_the_config_file_lives_under_xdg_config_home_else_home():
    assert config_path({"XDG_CONFIG_HOME": "/srv/cfg", "HOME": "/srv/u"}) == Path("/srv/cfg/holsrv/config.toml")
    assert config_path({"HOME": "/srv/u"}) == Path("/srv/u/.config/holsrv/config.toml")
    assert config_path({}) is None


def test_an_unknown_key_is_named_with_the_file_its_line_and_the_key_probably_meant(tmp_path):
    file = write_config(tmp_path, "# holsrv\nmax_servers = 2\n\n  max_server = 4\n")
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"XDG_CONFIG_HOME": str(tmp_path)})
    assert f"unknown setting 'max_server' in {file}, line 4; did you mean 'max_servers'?" in str(err.value)


def test_a_table_is_an_unknown_key_at_its_header_line(tmp_path):
    file = write_config(tmp_path, "quiet_s = 1\n[daemon]\nmax_servers = 2\n")
    with pytest.raises(ConfigError, match=rf"unknown setting 'daemon' in {file}, line 2"):
        Settings.from_env({"XDG_CONFIG_HOME": str(tmp_path)})


@pytest.mark.parametrize(("line", "expected"), [
    ('max_servers = "four"', "expected an integer, got 'four'"),
    ("max_servers = 2.5", "expected an integer, got 2.5"),
    ("letgo_s = true", "expected a number, got True"),
    ("letgo_s = -1", "expected a finite number of 0 or more, got -1"),
    ("letgo_s = nan", "expected a finite number of 0 or more, got nan"),
    ("hol_bin = 7", "expected a non-empty string, got 7"),
    ("extra_path = [1, 2]", "expected a list of strings, got [1, 2]"),
])
def test_a_bad_value_is_named_with_its_key_the_file_and_its_line(tmp_path, line, expected):
    key = line.split()[0]
    file = write_config(tmp_path, f"cache_entries = 10\n\n{line}\n")
    with pytest.raises(ConfigError) as err:
        Settings.from_env({"XDG_CONFIG_HOME": str(tmp_path)})
    assert str(err.value) == f"bad value for {key!r} in {file}, line 3: {expected}"


def test_a_file_that_is_not_toml_says_where(tmp_path):
    file = write_config(tmp_path, "max_servers = 2\nquiet_s = = 1\n")
    with pytest.raises(ConfigError, match=rf"{file} is not valid TOML: .*line 2"):
        Settings.from_env({"XDG_CONFIG_HOME": str(tmp_path)})


def test_a_constant_in_the_environment_or_the_config_file_is_a_warning_that_it_is_fixed_not_a_refusal(tmp_path):
    file = write_config(tmp_path, "max_servers = 2\n\nquiet_s = 5\n")
    env = {"XDG_CONFIG_HOME": str(tmp_path), "HOLSRV_REQUEST_TIMEOUT_S": "600", "HOLSRV_DIAGNOSTICS_WAIT_S": "7"}
    settings = Settings.from_env(env)
    assert (settings.max_servers, settings.quiet_s, settings.request_timeout_s, settings.lookup_wait_s) == (
        2, 1.0, 60.0, 25.0)
    assert list(settings.warnings) == [
        f"'quiet_s' in {file}, line 3 has no effect: quiet_s is no longer a setting but a constant, fixed at 1.0 "
        "(docs/settings.md lists the constants); remove it",
        "HOLSRV_DIAGNOSTICS_WAIT_S in the environment has no effect: "
        "lookup_wait_s is no longer a setting but a constant, fixed at 25.0 (docs/settings.md lists the "
        "constants); remove it",
        "HOLSRV_REQUEST_TIMEOUT_S in the environment has no effect: request_timeout_s is no longer a setting but "
        "a constant, fixed at 60.0 (docs/settings.md lists the constants); remove it",
    ]
    shown = {name: (value, source) for name, value, source in settings.effective()}
    assert shown["HOLSRV_QUIET_S"] == ("1.0", "fixed") and shown["HOLSRV_MAX_SERVERS"][1] == f"config file {file}"


def test_a_bad_environment_value_names_the_variable():
    with pytest.raises(ConfigError, match="HOLSRV_MAX_SERVERS='lots' in the environment"):
        Settings.from_env({"HOLSRV_MAX_SERVERS": "lots"})


def _daemon_env(config_home: Path) -> dict[str, str]:
    return {**os.environ, "XDG_CONFIG_HOME": str(config_home), "HOL_BIN": str(FAKE_HOL)}


def test_the_daemon_refuses_to_start_with_a_bad_config_file_and_says_why(tmp_path, short_tmp):
    file = write_config(tmp_path, "max_servers = 2\nstop_timeout_s = \"soon\"\n")
    done = subprocess.run(
        [sys.executable, "-m", "holsrv", "--socket", str(short_tmp / "c.sock")],
        capture_output=True, text=True, timeout=60, env=_daemon_env(tmp_path),
    )
    assert done.returncode == 78  # EX_CONFIG, which the service unit does not restart on
    assert f"not starting: bad value for 'stop_timeout_s' in {file}, line 2: expected a number" in done.stderr
    assert not (short_tmp / "c.sock").exists()


def holctl(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "holctl", *args], capture_output=True, text=True, timeout=60,
                          env=env)


def test_holctl_config_shows_each_setting_where_it_comes_from_and_what_the_running_daemon_differs_in(
    tmp_path, daemon
):
    file = write_config(tmp_path, "max_heap_mb = 1234\n")
    env = {**_daemon_env(tmp_path), "HOLSRV_SOCKET": str(daemon.socket), "HOLSRV_LETGO_S": "0.7",
           "HOLSRV_SYNC_DEBOUNCE_S": "1"}
    shown = holctl("config", env=env)
    assert shown.returncode == 0, shown.stderr
    out = shown.stdout
    assert f"config file: {file} (found)" in out
    assert f"max_heap_mb            = 1234          config file {file}, HOLSRV_MAX_HEAP_MB" in out
    assert "letgo_s                = 0.7           environment HOLSRV_LETGO_S, HOLSRV_LETGO_S" in out
    assert "cache_entries          = 4096          default, HOLSRV_CACHE_ENTRIES" in out
    assert ("warning: HOLSRV_SYNC_DEBOUNCE_S in the environment has no effect: sync_debounce_s is no longer a "
            "setting but a constant, fixed at 0.05") in out
    assert "sync_debounce_s        = 0.05          fixed: a constant\n" in out
    # The test daemon was built with other values: each is named, with where the daemon got it.
    running = out.split(f"the running daemon (pid {os.getpid()}) differs in", 1)[1]
    assert "max_heap_mb            = 2048" in running and "quiet_s                = 0.3" in running


def test_holctl_config_says_a_daemon_would_not_start_with_a_bad_file(tmp_path, short_tmp):
    file = write_config(tmp_path, "no_such_setting = 1\n")
    env = {**_daemon_env(tmp_path), "HOLSRV_SOCKET": str(short_tmp / "none.sock")}
    shown = holctl("config", env=env)
    assert shown.returncode == 1
    assert f"a daemon would not start: unknown setting 'no_such_setting' in {file}, line 1" in shown.stderr


def test_a_client_that_starts_a_daemon_with_a_bad_config_file_is_told_why_it_would_not_start(tmp_path, short_tmp):
    file = write_config(tmp_path, "max_servers = 2\n\nletgo_s = \"soon\"\n")
    env = {**_daemon_env(tmp_path), "HOLSRV_SOCKET": str(short_tmp / "bad.sock")}
    shown = holctl("status", env=env)
    assert shown.returncode == 5
    assert shown.stderr.startswith("holctl: daemon_unreachable: could not start the holsrv daemon: not starting: "
                                   f"bad value for 'letgo_s' in {file}, line 3: expected a number")
