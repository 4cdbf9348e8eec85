"""Prometheus metrics: the exposition text parses with prometheus_client's own parser and agrees with
status (servers, footprints, budget, room), answers and errors are counted by kind and code, clients
by kind; `holctl metrics` prints it; `/metrics` is served over HTTP on loopback or a Unix socket only
when metrics_listen says so, and an address beyond loopback is refused unless the value says `!`."""

from __future__ import annotations

import asyncio
import os
import socket
import urllib.error
import urllib.request
from collections import Counter

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from holctl.cli import cli
from holsrv.config.settings import ConfigError, Settings
from holsrv.daemon import Daemon
from holsrv.errors import FileNotFound, ServerBusy
from holsrv.metrics.metrics import client_kind
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, fake_settings, wait_until

MB = 1024 * 1024


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Every sample of the text, by (name, sorted labels)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def by_label(found: dict, name: str, label: str) -> dict[str, float]:
    return {dict(labels)[label]: value for (n, labels), value in found.items() if n == name}


def test_the_metrics_agree_with_status_and_count_the_answers_given(daemon_factory, write_script, monkeypatch):
    monkeypatch.setenv("FAKE_HOL_FOOTPRINT_MB", "100")
    daemon = daemon_factory(memory_budget_mb=3000, max_heap_mb=2048, max_servers=4, start_footprint_mb=250)
    for name in ("aScript.sml", "bScript.sml"):
        assert daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, name)), wait=30)).verdict
    with pytest.raises(FileNotFound):
        daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT).parent / "noScript.sml"), wait=1))
    wait_until(lambda: all(s.footprint_mb for s in daemon.call(m.Status()).sessions), 60, "both servers measured")

    async def both() -> tuple[m.StatusResult, str]:
        status = await daemon.daemon.dispatch.status()
        return status, daemon.daemon.dispatch.metrics.text()

    status, text = daemon.run(both())
    found = samples(text)
    assert by_label(found, "holsrv_servers", "state") == dict(Counter(row.state for row in status.sessions))
    footprints = by_label(found, "holsrv_servers_footprint_bytes", "state")
    for state in {row.state for row in status.sessions}:
        expected = sum(row.footprint_mb or 0.0 for row in status.sessions if row.state == state) * MB
        assert footprints[state] == pytest.approx(expected, rel=0.01)
    assert found[("holsrv_server_footprint_largest_bytes", ())] == pytest.approx(
        max(row.footprint_mb or 0.0 for row in status.sessions) * MB, rel=0.01)
    assert found[("holsrv_memory_budget_bytes", ())] == status.memory_budget_mb * MB == 3000 * MB
    assert found[("holsrv_memory_used_bytes", ())] == pytest.approx(status.memory_used_mb * MB, rel=0.01)
    assert found[("holsrv_servers_fit", ())] == status.servers_fit
    assert found[("holsrv_servers_max", ())] == status.max_servers == 4
    assert found[("holsrv_runaways_total", ())] == status.runaways == 0
    assert found[("holsrv_cache_hits_total", ())] == status.cache_hits

    # Over the wire, as `holctl metrics` asks: the calls so far counted by kind, the error by code,
    # the clients connected by kind (a holmcp held open, and this holctl).
    daemon.call(m.Status())
    held = daemon.client(name="holmcp")
    reply = daemon.call(m.Metrics(), name="holctl")
    assert isinstance(reply, m.MetricsResult)
    found = samples(reply.text)
    answers = by_label(found, "holsrv_answers_total", "kind")
    assert answers["diagnostics"] == 3 and answers["status"] >= 2 and "metrics" not in answers
    assert found[("holsrv_answer_duration_seconds_count", (("kind", "diagnostics"),))] == 3
    assert by_label(found, "holsrv_errors_total", "code") == {"file_not_found": 1.0}
    assert by_label(found, "holsrv_clients", "kind") == {"holctl": 1, "holmcp": 1, "editor": 0, "other": 0}
    held.close()


def test_a_call_answered_through_a_job_is_counted_once(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    assert daemon.call(m.Diagnostics(str(path), wait=30, defer_after=30)).verdict
    reply = daemon.call(m.Metrics())
    assert by_label(samples(reply.text), "holsrv_answers_total", "kind") == {"diagnostics": 1}


def test_a_refused_admission_and_an_eviction_are_counted(daemon_factory, write_script):
    daemon = daemon_factory(max_servers=1)
    busy = GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "LOOP_TAC")  # checking until edited
    daemon.call(m.Diagnostics(str(write_script(busy, "busyScript.sml")), wait=0.3))
    with pytest.raises(ServerBusy):
        daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "otherScript.sml")), wait=5))
    found = samples(daemon.call(m.Metrics()).text)
    assert by_label(found, "holsrv_admissions_refused_total", "reason") == {"servers_busy": 1}
    assert found[("holsrv_evictions_total", ())] == 0
    # Edited, its proof no longer loops: the server is idle once checked, and makes room.
    assert daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "busyScript.sml")), wait=30)).verdict == "OK"
    assert daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT, "otherScript.sml")), wait=30)).verdict == "OK"
    found = samples(daemon.call(m.Metrics()).text)
    assert found[("holsrv_evictions_total", ())] == 1
    assert found[("holsrv_servers_fit", ())] == daemon.call(m.Status()).servers_fit


def test_a_holmake_run_is_timed_in_the_metrics(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    assert daemon.call(m.Holmake(str(path))).ok
    wait_until(lambda: samples(daemon.call(m.Metrics()).text).get(("holsrv_holmake_duration_seconds_count", ())) == 1,
               30, "the Holmake run counted in its histogram")


def test_holctl_metrics_prints_the_exposition_text(daemon):
    result = CliRunner().invoke(cli, ["--socket", str(daemon.socket), "metrics"])
    assert result.exit_code == 0, result.output
    assert "# TYPE holsrv_answers_total counter" in result.output
    assert ("holsrv_servers_max", ()) in samples(result.output)


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.headers["Content-Type"], response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers["Content-Type"], err.read().decode()


def test_the_endpoint_serves_the_metrics_on_loopback_when_asked(daemon_factory):
    daemon = daemon_factory(metrics_listen="127.0.0.1:0")
    endpoint = daemon.daemon.metrics_endpoint
    assert endpoint is not None
    url = endpoint.address()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/metrics")
    code, kind, text = get(url)
    assert code == 200 and kind.startswith("text/plain; version=0.0.4")
    assert samples(text)[("holsrv_memory_budget_bytes", ())] == daemon.settings.memory_budget_mb * MB
    assert get(url.removesuffix("/metrics") + "/other")[0] == 404


def test_the_endpoint_serves_the_metrics_on_a_unix_socket(daemon_factory, short_tmp):
    path = short_tmp / "metrics.sock"
    daemon = daemon_factory(metrics_listen=str(path))
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o600)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: holsrv\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.decode().partition("\r\n\r\n")
    assert head.startswith("HTTP/1.1 200 OK")
    assert samples(body)[("holsrv_servers_max", ())] == daemon.settings.max_servers
    daemon.stop()
    assert not path.exists()


def test_the_endpoint_is_off_by_default(daemon):
    assert Settings.from_env({}, config_file=None).metrics_listen == ""
    assert daemon.daemon.metrics_endpoint is None


@pytest.mark.parametrize("value", ["0.0.0.0:9464", "192.0.2.1:9464", "[::]:9464", "example.org:9464"])
def test_an_address_beyond_loopback_is_refused_unless_the_value_says_so(value, short_tmp):
    with pytest.raises(ConfigError, match=r"beyond this machine.*loopback address.*end the value with '!'"):
        Settings.from_env({"HOLSRV_METRICS_LISTEN": value}, config_file=None)
    assert Settings.from_env({"HOLSRV_METRICS_LISTEN": value + "!"}, config_file=None).metrics_listen == value + "!"
    # A Settings built without from_env is checked at the daemon's start, before it binds anything.
    daemon = Daemon(fake_settings(short_tmp / "x.sock", metrics_listen=value))
    with pytest.raises(ConfigError, match="beyond this machine"):
        asyncio.run(daemon.start())
    assert not (short_tmp / "x.sock").exists()


@pytest.mark.parametrize("value", ["9464", "127.0.0.1:port", "127.0.0.1:70000", ":9464"])
def test_a_malformed_value_is_refused_saying_what_is_wrong(value):
    with pytest.raises(ConfigError, match="metrics_listen="):
        Settings.from_env({"HOLSRV_METRICS_LISTEN": value}, config_file=None)


def test_the_names_follow_prometheus_conventions_and_no_label_names_a_file(daemon, write_script):
    daemon.call(m.Diagnostics(str(write_script(GOOD_SCRIPT)), wait=30))
    families = list(text_string_to_metric_families(daemon.call(m.Metrics()).text))
    assert families and all(f.name.startswith("holsrv_") for f in families)
    for family in families:
        if family.type == "counter":
            assert all(s.name.endswith(("_total", "_created")) for s in family.samples), family.name
        for s in family.samples:
            assert set(s.labels) <= {"kind", "state", "code", "reason", "le"}, s
            assert not any("/" in value or value.endswith(".sml") for value in s.labels.values()), s


@pytest.mark.parametrize(("name", "kind"), [("holctl", "holctl"), ("holctl logs", "holctl"),
                                            ("holctl-doctor", "holctl"), ("holmcp", "holmcp"),
                                            ("holctl lsp", "editor"), ("test", "other"), ("holctlx", "other")])
def test_a_client_is_counted_by_the_kind_its_hello_names(name, kind):
    assert client_kind(name) == kind
