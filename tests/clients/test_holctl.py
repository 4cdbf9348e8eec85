"""holctl as a user runs it: arguments, exit codes, and what lands on stdout and stderr."""

from __future__ import annotations

import io
import json
import typing
from pathlib import Path

import msgspec
import pytest
from click.testing import CliRunner
from test_wire import FakeDaemon

from holctl.calls import failure_for
from holctl.cli import cli
from holsrv import __version__
from holsrv.errors import error_for_code
from holsrv.rpc import messages
from holsrv.rpc.messages import DiagnosticsResult

from conftest import FAILING_SCRIPT


def run(*args: str, stdin: str | None = None, env: dict | None = None):
    return CliRunner().invoke(cli, list(args), input=stdin, env=env)


def test_help_documents_every_exit_code():
    result = run("--help")
    assert result.exit_code == 0
    for line in ["0  answered (a failed proof is an answer, not an error)", "2  bad command line",
                 "3  bad input", "4  HOL problem", "5  daemon unreachable"]:
        assert line in result.output


def test_every_request_has_a_command_named_like_its_op():
    result = run("--help")
    ops = [request.__struct_config__.tag for request in typing.get_args(messages.Request)]
    assert ops, "m.Request is no longer a union"
    commands = {"editorAttach": "lsp", "restartDaemon": "restart-daemon"}  # the editor's channel is `holctl lsp`'s
    for name in (commands.get(op, op) for op in ops):
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
    assert "COLUMN" in result.stderr


def test_version_prints_the_version():
    result = run("--version")
    assert result.exit_code == 0 and result.output.strip() == f"holctl, version {__version__}"


def test_wait_and_no_wait_together_is_a_usage_error():
    result = run("hover", "fooScript.sml", "3", "1", "--wait", "5", "--no-wait")
    assert result.exit_code == 2
    assert "--wait or --no-wait, not both" in result.stderr


def test_shell_completion_is_generated_by_click():
    # docs/holctl.md, "Shell completion": `eval "$(_HOLCTL_COMPLETE=bash_source holctl)"`.
    result = CliRunner().invoke(cli, [], prog_name="holctl", env={"_HOLCTL_COMPLETE": "bash_source"})
    assert result.exit_code == 0 and "_holctl_completion" in result.output


# -- against a fake daemon: what holctl sends, and frames it must show -----------


def _status(request, n):
    return [messages.StatusResult("fake", messages.PROTOCOL_VERSION, 1, 1.0, "/s", 4, [], 0, 0)]


@pytest.mark.parametrize(
    ("args", "sent"),
    [
        (("hover", "f.sml", "3", "4", "--no-wait"), messages.Hover("{f}", 3, 4, wait=0.0)),
        (("definition", "f.sml", "3", "4", "--wait", "7"), messages.Definition("{f}", 3, 4, wait=7.0)),
        (("completion", "f.sml", "3", "4"), messages.Completion("{f}", 3, 4)),
        (("documentSymbol", "f.sml", "--no-wait"), messages.DocumentSymbol("{f}", wait=0.0)),
        (("workspaceSymbol", "f.sml", "LE", "--page", "2", "--limit", "5"),
         messages.WorkspaceSymbol("{f}", "LE", limit=5, page=2)),
        (("goalState", "f.sml", "9"), messages.GoalState("{f}", 9)),
        (("goalState", "f.sml", "9", "2", "--wait", "3"), messages.GoalState("{f}", 9, 2, wait=3.0)),
        (("eval", "f.sml", "1;"), messages.Eval("{f}", "1;", timeout=120.0)),
        (("stop", "f.sml"), messages.Stop("{f}")),
        (("search", "f.sml", "'list' \"APP\"", "--limit", "5"), messages.Search("{f}", "'list' \"APP\"", limit=5)),
        (("search", "f.sml", "--conclusion", "x <= y", "--kind", "theorem", "--scope", "list, bool"),
         messages.Search("{f}", "", scope=["list", "bool"], kind="theorem", conclusion="x <= y")),
        (("search", "f.sml", "\"ADD\"", "--scope", "all", "--hypothesis", "0 < n"),
         messages.Search("{f}", '"ADD"', scope="all", hypothesis="0 < n")),
        (("uses", "f.sml", "listTheory.MAP_APPEND"), messages.Uses("{f}", "listTheory.MAP_APPEND")),
        (("holmake", "f.sml"), messages.Holmake("{f}")),
        (("holmake", "f.sml", "fTheory.uo", "-j", "3"), messages.Holmake("{f}", "fTheory.uo", jobs=3)),
        (("--expect-hash", "0123abcd", "hover", "f.sml", "1", "2"),
         messages.Hover("{f}", 1, 2, expect_hash="0123abcd")),
        (("try", "f.sml", "9", "simp[]", "metis_tac[]"), messages.Try("{f}", 9, ["simp[]", "metis_tac[]"])),
        (("try", "f.sml", "9", "3", "simp[]", "--timeout", "4"), messages.Try("{f}", 9, ["simp[]"], 3, 4.0)),
        (("try", "f.sml", "9", "simp[]", "--apply"), messages.Try("{f}", 9, ["simp[]"], apply=True)),
        (("goalDiff", "f.sml", "4", "6"), messages.GoalDiff("{f}", 4, 6)),
        (("goalDiff", "f.sml", "4", "2", "6", "5"), messages.GoalDiff("{f}", 4, 6, 2, 5)),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else None,
)
def test_each_command_sends_the_request_its_arguments_say(short_tmp, tmp_path, monkeypatch, args, sent):
    monkeypatch.chdir(tmp_path)
    with FakeDaemon(short_tmp / "fake.sock", _status).threaded() as fake:
        result = run("--socket", str(fake.socket), "--no-start", *args)
    assert result.exit_code == 0, result.output
    expected = msgspec.structs.replace(sent, file=str(tmp_path / "f.sml"))
    assert fake.requests == [expected]


def test_progress_frames_are_live_lines_on_stderr_and_not_asked_for_with_json(short_tmp):
    def script(request, n):
        frames = [messages.Progress("checking proofs", 1, 2)] if request.progress else []
        return [*frames, *_status(request, n)]

    with FakeDaemon(short_tmp / "fake.sock", script).threaded() as fake:
        shown = run("--socket", str(fake.socket), "--progress", "diagnostics", "fooScript.sml")
        as_json = run("--socket", str(fake.socket), "--progress", "diagnostics", "fooScript.sml", "--json")
        # CliRunner's stderr is no terminal: by default no progress is asked for.
        quiet = run("--socket", str(fake.socket), "diagnostics", "fooScript.sml")
    assert shown.exit_code == as_json.exit_code == quiet.exit_code == 0
    assert shown.stderr == "… checking proofs (1/2)\n"
    assert as_json.stderr == quiet.stderr == ""
    assert [r.progress for r in fake.requests] == [True, False, False]
    json.loads(as_json.stdout)


def test_the_daemons_settings_warnings_go_to_stderr_once(short_tmp):
    warning = "HOLSRV_MAX_HEAP_MB=999 was given to this client, but the running daemon uses 2048"
    welcome = messages.Welcome(messages.PROTOCOL_VERSION, "fake", 1, settings_warnings=[warning])
    with FakeDaemon(short_tmp / "fake.sock", _status, welcome).threaded() as fake:
        result = run("--socket", str(fake.socket), "status", "--json", env={"HOLSRV_MAX_HEAP_MB": "999"})
    assert result.exit_code == 0
    assert result.stderr == f"holctl: warning: {warning}\n"
    assert json.loads(result.stdout)["type"] == "status"
    assert fake.hellos[0].settings["HOLSRV_MAX_HEAP_MB"] == "999"


@pytest.mark.parametrize(
    ("code", "exit_code"),
    [
        ("file_not_found", 3), ("not_a_file", 3), ("not_utf8", 3), ("position_out_of_range", 3), ("bad_request", 3),
        ("hol_not_found", 4), ("server_died", 4), ("servers_busy", 4), ("server_timeout", 4), ("hol_error", 4),
        ("server_stopped", 4), ("server_runaway", 4), ("server_starting", 4),
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


# -- against a daemon with the fake HOL server ----------------------------------



def ask(daemon, *args: str, env: dict | None = None):
    return run("--socket", str(daemon.socket), "--no-start", *args, env=env)


def test_diagnostics_of_a_failed_proof_is_an_answer_with_exit_0(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    result = ask(daemon, "diagnostics", str(path), "--wait", "20")
    assert result.exit_code == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[0].startswith("FAILED: 1 of 2 proofs failed (wrong)")
    assert out[1] == "proofs: 1 proved, 1 failed (2 total)"
    assert any(line.startswith("  line 10  wrong  failed") for line in out)
    assert out[-2].startswith("(about file content ")
    assert out[-1].startswith("started a new HOL server (pid ")


def test_diagnostics_json_is_the_reply_struct_about_the_absolute_path(daemon, write_script, monkeypatch):
    path = write_script(FAILING_SCRIPT.replace('FAIL_TAC "nope"', "simp[]"))
    monkeypatch.chdir(path.parent)
    result = ask(daemon, "diagnostics", path.name, "--wait", "20", "--json")
    assert result.exit_code == 0, result.stderr
    reply = msgspec.json.decode(result.stdout, type=DiagnosticsResult)
    assert reply.file == str(path)
    assert (reply.verdict, reply.tally.proved, reply.tally.failed) == ("OK", 2, 0)


def test_goal_state_inside_a_proof_prints_the_theorem_and_its_goal(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    result = ask(daemon, "goalState", str(path), "7", "3", "--wait", "20")
    assert result.exit_code == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[0].startswith("theorem add0, step ")
    assert "goal 1 of 1:" in out


def test_goal_state_of_a_whole_line_shows_before_and_after_it(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    result = ask(daemon, "goalState", str(path), "7", "--wait", "20")
    assert result.exit_code == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[1] == f"line 7: {FAILING_SCRIPT.splitlines()[6].strip()}"
    assert "before the line:" in out and "after the line:" in out


def test_a_setting_the_running_daemon_does_not_have_is_a_warning_on_stderr(daemon, write_script):
    result = ask(daemon, "status", env={"HOLSRV_MAX_HEAP_MB": "999"})
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith("holctl: warning: HOLSRV_MAX_HEAP_MB=999 ")
    assert "2048" in result.stderr and "HOLSRV_MAX_HEAP_MB=999" not in result.stdout


def test_stop_stops_the_files_server(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    assert ask(daemon, "diagnostics", str(path), "--wait", "20").exit_code == 0
    result = ask(daemon, "stop", str(path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("Stopped the HOL server for demoScript.sml (pid ")
    assert ask(daemon, "stop", str(path)).stdout.startswith("No HOL server is running for demoScript.sml")


def test_goal_state_outside_a_proof_says_so_and_exits_0(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    result = ask(daemon, "goalState", str(path), "1", "1", "--wait", "20")
    assert result.exit_code == 0, result.stderr
    assert "Proof" in result.stdout.splitlines()[0]


def test_a_missing_file_exits_3_naming_the_absolute_path(daemon, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = ask(daemon, "diagnostics", "missingScript.sml")
    assert result.exit_code == 3
    assert result.stderr.startswith("holctl: file_not_found: ")
    assert str(tmp_path / "missingScript.sml") in result.stderr


def test_a_line_past_the_end_exits_3(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    result = ask(daemon, "hover", str(path), "500", "1")
    assert result.exit_code == 3
    assert result.stderr.startswith("holctl: position_out_of_range: ")


def test_status_lists_the_server_a_call_started(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    assert ask(daemon, "diagnostics", str(path), "--wait", "20").exit_code == 0
    result = ask(daemon, "status")
    assert result.exit_code == 0, result.stderr
    assert "servers: 1 running of 4" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.startswith(str(path)))
    assert "1/2 proved, 1 failed" in row


def test_status_prints_the_settings_away_from_their_defaults_and_not_the_rest(daemon):
    result = ask(daemon, "status")
    assert result.exit_code == 0, result.stderr
    out = result.stdout.splitlines()
    at = out.index("settings not at their default (`holctl config` lists every one):")
    assert f"  HOLSRV_MAX_HEAP_MB={daemon.settings.max_heap_mb}  (set)" in out[at:]
    assert f"  HOLSRV_QUIET_S={daemon.settings.quiet_s}  (set)" in out[at:]
    # Left at their defaults in the test daemon: a user's setting, an operator's, a constant.
    assert not any(name in result.stdout for name in ("HOLSRV_LETGO_S", "HOLSRV_MAX_JOBS", "HOLSRV_SPILL_WAIT_S"))


def test_a_socket_directory_that_cannot_be_made_is_daemon_unreachable(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run("--socket", str(blocker / "sub" / "holsrv.sock"), "status")
    assert result.exit_code == 5
    assert result.stderr.startswith("holctl: daemon_unreachable: ")


def test_eval_reads_code_from_stdin_and_prints_errors(daemon, write_script):
    path = write_script(FAILING_SCRIPT)
    result = run("--socket", str(daemon.socket), "--no-start", "eval", str(path), "-",
                 stdin="val y = undefined_thing;")
    assert result.exit_code == 0, result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith("error: ") and "undefined_thing" in first


@pytest.mark.parametrize(
    ("args", "first_line"),
    [
        (("hover", "{f}", "7", "3"), "```"),
        (("definition", "{f}", "7", "13"), "no definition found"),
        (("references", "{f}", "4", "9"), "This HOL server does not support references"),
        (("completion", "{f}", "7", "6"), "GEN_TAC  (value)"),
        (("documentSymbol", "{f}"), "1  theory/structure  demo  Theory"),
        (("workspaceSymbol", "{f}", "add0"), "add0"),
        (("retryCompile", "{f}"), "Not blocked: nothing to retry."),
        (("restart", "{f}", "--max-heap-mb", "512"), "Restarted the HOL server for demoScript.sml"),
    ],
    ids=lambda v: v[0] if isinstance(v, tuple) else None,
)
def test_every_command_answers_through_the_daemon(daemon, write_script, args, first_line):
    path = str(write_script(FAILING_SCRIPT))
    result = run("--socket", str(daemon.socket), *(a.format(f=path) for a in args))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith(first_line.format(f=path))


def test_shutdown_stops_the_daemon(daemon):
    result = run("--socket", str(daemon.socket), "shutdown")
    assert result.exit_code == 0 and "stopping" in result.output
    daemon.thread.join(30)
    assert not daemon.thread.is_alive()


def test_json_output_of_an_error_is_the_error_reply_on_stdout(daemon, tmp_path):
    result = run("--socket", str(daemon.socket), "diagnostics", str(tmp_path / "nosuchScript.sml"), "--json")
    assert result.exit_code == 3
    reply = json.loads(result.stdout)
    assert reply["type"] == "error" and reply["code"] == "file_not_found"


def test_holmake_progress_is_live_lines_on_stderr(short_tmp, tmp_path):
    def script(request, n):
        frames = [messages.Progress("Holmake: demoTheory  OK", 3)] if request.progress else []
        return [*frames, messages.HolmakeResult(request.file, "/d", True, "Holmake built /d in 1.0s.")]

    with FakeDaemon(short_tmp / "fake.sock", script).threaded() as fake:
        shown = run("--socket", str(fake.socket), "--progress", "holmake", str(tmp_path / "fooScript.sml"))
    assert shown.exit_code == 0, shown.output
    assert shown.stderr == "… Holmake: demoTheory  OK\n"
    assert shown.stdout == "OK: Holmake built /d in 1.0s.\n"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_line_on_a_terminal_ends_with_a_newline_before_the_answer():
    from holctl.calls import LiveLine

    stream = _Terminal()
    live = LiveLine(stream)
    live.show(messages.Progress("waiting for the compile", 1, 3))
    live.show(messages.Progress("checking 2 proofs", 2, 3))
    live.clear()
    shown = stream.getvalue()
    # Whatever the terminal does with the rewrite, the answer printed next starts on its own line.
    assert shown.endswith("\n") and shown.rstrip("\n").endswith("checking 2 proofs (2/3)")
    live.clear()  # a second clear adds nothing
    assert stream.getvalue() == shown
