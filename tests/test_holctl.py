"""holctl as a user runs it: arguments, exit codes, and what lands on stdout and stderr."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from holctl.cli import cli, failure_for
from holsrv.errors import error_for_code


def run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin)


def test_help_documents_every_exit_code():
    result = run("--help")
    assert result.exit_code == 0
    for line in ["0  answered (a failed proof is an answer, not an error)", "2  bad command line",
                 "3  bad input", "4  HOL problem", "5  daemon unreachable"]:
        assert line in result.output


def test_every_request_has_a_command_named_like_its_op():
    result = run("--help")
    for name in ["diagnostics", "goalState", "hover", "definition", "references", "completion",
                 "documentSymbol", "workspaceSymbol", "eval", "retryCompile", "restart", "status", "shutdown"]:
        assert f"  {name} " in result.output


def test_no_daemon_and_no_start_exits_5_with_one_line_on_stderr(tmp_path: Path):
    result = run("--socket", str(tmp_path / "absent.sock"), "--no-start", "diagnostics", "fooScript.sml")
    assert result.exit_code == 5
    assert result.stdout == ""
    assert result.stderr.startswith("holctl: daemon_unreachable: no holsrv daemon is listening on ")
    assert len(result.stderr.splitlines()) == 1


def test_shutdown_never_starts_a_daemon_just_to_stop_it(tmp_path: Path):
    socket = tmp_path / "absent.sock"
    result = run("--socket", str(socket), "shutdown")
    assert result.exit_code == 5
    assert "daemon_unreachable" in result.stderr
    assert not socket.exists()


def test_a_column_of_zero_is_a_usage_error():
    result = run("goalState", "fooScript.sml", "3", "0")
    assert result.exit_code == 2
    assert "COL" in result.stderr


@pytest.mark.parametrize(
    ("code", "exit_code"),
    [
        ("file_not_found", 3), ("not_a_file", 3), ("not_utf8", 3), ("position_out_of_range", 3), ("bad_request", 3),
        ("hol_not_found", 4), ("server_died", 4), ("servers_busy", 4), ("server_timeout", 4), ("hol_error", 4),
        ("daemon_unreachable", 5), ("protocol_mismatch", 5), ("bad_frame", 5),
        ("internal", 1), ("some_future_code", 1),
    ],
)
def test_each_daemon_error_code_has_its_documented_exit_code(code: str, exit_code: int):
    assert failure_for(error_for_code(code, "m")).exit_code == exit_code


def test_an_error_with_detail_prints_code_message_and_the_detail_indented(capsys):
    err = error_for_code("server_died", "the HOL server for /p/aScript.sml exited", "Fatal error\nheap exhausted")
    failure_for(err).show()
    assert capsys.readouterr().err.splitlines() == [
        "holctl: server_died: the HOL server for /p/aScript.sml exited",
        "    Fatal error",
        "    heap exhausted",
    ]
