"""Settings: the reference tool's environment names work, and a client's settings are never lost silently."""

from __future__ import annotations

import socket

from holsrv.config.settings import Settings
from holsrv.rpc import framing
from holsrv.rpc import messages as m


def test_the_reference_tools_environment_names_work_and_holsrvs_own_win():
    env = {"HOL_LSP_MCP_MAX_SERVERS": "3", "HOL_LSP_EXTRA_PATH": "/srv/a:/srv/b", "HOL_BIN": "/srv/hol/bin/hol"}
    settings = Settings.from_env(env)
    assert (settings.max_servers, settings.extra_path, settings.hol_bin) == (3, ("/srv/a", "/srv/b"), env["HOL_BIN"])
    assert settings.sources["max_servers"] == "environment HOL_LSP_MCP_MAX_SERVERS"
    both = Settings.from_env({**env, "HOLSRV_MAX_SERVERS": "5"})
    assert both.max_servers == 5 and both.sources["max_servers"] == "environment HOLSRV_MAX_SERVERS"


def test_the_old_diagnostics_wait_name_is_warned_about_like_the_constant_it_named():
    settings = Settings.from_env({"HOLSRV_DIAGNOSTICS_WAIT_S": "7"})
    assert settings.lookup_wait_s == 25.0
    [warning] = settings.warnings
    assert warning.startswith("HOLSRV_DIAGNOSTICS_WAIT_S in the environment has no effect: lookup_wait_s is no "
                              "longer a setting but a constant, fixed at 25.0")


def test_flags_win_over_the_environment_and_say_so():
    settings = Settings.from_env({"HOLSRV_MAX_HEAP_MB": "100"}, max_heap_mb=200, hol_bin=None)
    assert settings.max_heap_mb == 200 and settings.sources["max_heap_mb"] == "flag --max-heap-mb"
    shown = {name: (value, source) for name, value, source in settings.effective()}
    assert shown["HOLSRV_MAX_HEAP_MB"] == ("200", "flag --max-heap-mb")
    assert shown["HOLSRV_QUIET_S"] == ("1.0", "fixed") and shown["HOLSRV_LETGO_S"] == ("10.0", "default")


def test_only_settings_that_differ_are_reported():
    settings = Settings.from_env({"HOLSRV_MAX_HEAP_MB": "4096"})
    given = {"HOLSRV_MAX_HEAP_MB": "8000", "HOLSRV_QUIET_S": "1.0", "HOLSRV_SOCKET": "/x.sock", "PATH": "/bin"}
    assert settings.differences(given) == [("HOLSRV_MAX_HEAP_MB", "8000", "4096", "environment HOLSRV_MAX_HEAP_MB")]


def test_a_constant_a_client_was_given_another_value_of_is_reported_as_fixed():
    settings = Settings.from_env({})
    given = {"HOLSRV_QUIET_S": "5", "HOLSRV_LETGO_S": "10"}
    assert settings.differences(given) == [("HOLSRV_QUIET_S", "5", "1.0", "fixed")]


def test_a_client_whose_settings_differ_is_told_which_how_and_what_to_do(daemon):
    given = {"HOLSRV_MAX_HEAP_MB": "12345", "HOLSRV_MAX_SERVERS": str(daemon.settings.max_servers)}
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(daemon.socket))
        sock.sendall(framing.encode(m.Hello(protocol=m.PROTOCOL_VERSION, client="agent", settings=given)))
        welcome = framing.decode(framing.reply_decoder, framing.recv_body(sock))
    assert isinstance(welcome, m.Welcome)
    [warning] = welcome.settings_warnings
    assert warning.startswith("HOLSRV_MAX_HEAP_MB=12345 was given to this client, but the running daemon")
    assert f"uses {daemon.settings.max_heap_mb}" in warning and "holctl shutdown" in warning


def test_a_client_given_a_constant_is_told_it_is_no_longer_a_setting_not_to_restart_the_daemon(daemon):
    given = {"HOLSRV_STDERR_TAIL_LINES": "5"}
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(10)
        sock.connect(str(daemon.socket))
        sock.sendall(framing.encode(m.Hello(protocol=m.PROTOCOL_VERSION, client="agent", settings=given)))
        welcome = framing.decode(framing.reply_decoder, framing.recv_body(sock))
    assert isinstance(welcome, m.Welcome)
    [warning] = welcome.settings_warnings
    assert warning.startswith("HOLSRV_STDERR_TAIL_LINES=5 was given to this client, but it is no longer a setting: "
                              f"every daemon uses the constant {daemon.settings.stderr_tail_lines}")
    assert "holctl shutdown" not in warning


def test_status_shows_each_effective_setting_and_where_it_came_from(daemon):
    status = daemon.call(m.Status())
    shown = {s.name: (s.value, s.source) for s in status.settings}
    assert shown["HOLSRV_MAX_SERVERS"][0] == str(daemon.settings.max_servers)
    assert shown["HOLSRV_CACHE_ENTRIES"] == ("4096", "default")


def test_status_names_a_constant_the_daemon_was_built_with_another_value_of_as_set(daemon):
    shown = {s.name: (s.value, s.source) for s in daemon.call(m.Status()).settings}
    assert daemon.settings.quiet_s != Settings().quiet_s
    assert shown["HOLSRV_QUIET_S"] == (str(daemon.settings.quiet_s), "set")
    assert shown["HOLSRV_SPILL_WAIT_S"] == (str(Settings().spill_wait_s), "fixed")
