"""eval runs in a server every caller about the file shares: every answer says so, and status counts it."""

from __future__ import annotations

from click.testing import CliRunner

from holctl.cli import cli
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT


def test_an_eval_answer_says_once_that_its_changes_to_hol_state_are_shared(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    reply = daemon.call(m.Eval(str(path), "val x = 1 + 1;"))
    assert not reply.errors
    note = reply.shared_state
    assert f"{path.name} (pid {reply.server.pid})" in note
    assert "every agent" in note and "global state" in note and "until the server restarts" in note
    shown = CliRunner().invoke(cli, ["--socket", str(daemon.socket), "--no-start", "eval", str(path), "1;"])
    assert shown.exit_code == 0, shown.output
    said = [line for line in shown.stdout.splitlines() if "global state" in line]
    assert len(said) == 1 and said[0].startswith("shared: This ran in the HOL server for ")


def test_status_counts_evals_on_the_server_they_ran_in_and_not_on_another(daemon, write_script, tmp_path):
    ran = write_script(GOOD_SCRIPT, "ranScript.sml")
    other = write_script(GOOD_SCRIPT, "otherScript.sml")
    daemon.call(m.Diagnostics(str(other), wait=20))
    for code in ["val x = 1;", "val y = 2;"]:
        daemon.call(m.Eval(str(ran), code))
    rows = {row.file: row for row in daemon.call(m.Status()).sessions}
    assert (rows[str(ran)].evals, rows[str(other)].evals) == (2, 0)
    assert rows[str(ran)].last_eval_s is not None and rows[str(ran)].last_eval_s >= 0
    assert rows[str(other)].last_eval_s is None
    shown = CliRunner().invoke(cli, ["--socket", str(daemon.socket), "--no-start", "status"])
    said = [line for line in shown.stdout.splitlines() if line.startswith("eval ran ")]
    assert len(said) == 1 and said[0].startswith(f"eval ran 2 times in {ran}'s server (pid {rows[str(ran)].pid})")


def test_a_restarted_server_has_run_no_eval(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Eval(str(path), "val x = 1;"))
    daemon.call(m.Restart(str(path)))
    row = next(s for s in daemon.call(m.Status()).sessions if s.file == str(path))
    assert (row.evals, row.last_eval_s) == (0, None)
