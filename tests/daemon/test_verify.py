"""verify: VERIFIED only when the statements equal the committed ones, every proof is HOL's with no
cheat, HOL's record shows no cheat and no axiom of the file's, and Holmake builds the theory.

Each case is a git repository made in a temporary directory (`git init`, a
commit of the script as it should stay), then an edit an agent might make,
then one `verify` call against the fake HOL and the fake Holmake beside it.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from holctl.cli import cli
from holctl.render import render
from holsrv.errors import BadRequest
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, wait_until

GIT_S = 30.0
DEF_SCRIPT = GOOD_SCRIPT + """
Definition dbl_def:
  dbl n = 2 * n
End
"""
LEMMA = """
Theorem add0_again:
  !m:num. 0 + m = m
Proof
  simp[]
QED
"""


def git(directory: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(directory)}
    done = subprocess.run(["git", *args], cwd=directory, env=env, capture_output=True, text=True, timeout=GIT_S,
                          check=True)
    return done.stdout


def committed(tmp_path: Path, text: str) -> Path:
    """`text` as demoScript.sml, committed in a new repository."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    path = repo / "demoScript.sml"
    path.write_text(text, encoding="utf-8")
    git(repo, "add", "demoScript.sml")
    git(repo, "commit", "-q", "-m", "the statements")
    return path


def verify(daemon, path: Path, **fields) -> m.VerifyResult:
    reply = daemon.call(m.Verify(file=str(path), wait=60.0, **fields), timeout=180.0)
    assert isinstance(reply, m.VerifyResult), reply
    return reply


def check(reply: m.VerifyResult, name: str) -> m.VerifyCheck:
    return next(c for c in reply.checks if c.name == name)


def test_a_clean_change_with_a_new_lemma_is_verified(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    # Reformatted and commented, as HOL reads it the same; and a new lemma.
    edited = GOOD_SCRIPT.replace("  !n:num. n + 0 = n", "  ! n:num.  n+0 = n (* unchanged *)") + LEMMA
    path.write_text(edited, encoding="utf-8")
    reply = verify(daemon, path)
    assert reply.verified, render(reply)
    assert reply.headline.startswith("VERIFIED: demoScript.sml")
    assert [c.status for c in reply.checks] == ["passed"] * 4
    assert reply.reference.startswith("git HEAD (")
    assert [(c.name, c.change, c.allowed) for c in reply.statements] == [("add0_again", "added", True)]
    assert reply.theorems == ["add0", "conj_comm", "add0_again"]
    assert "theorem add0_again (line 16) is new (allowed)" in render(reply)


def test_the_server_verify_loaded_the_built_theory_into_is_replaced_in_the_background(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    first = daemon.call(m.Diagnostics(str(path), wait=30))
    assert verify(daemon, path).verified
    # Its HOL state holds the built theory now: a fresh server takes over by itself, with the same verdict.
    wait_until(lambda: daemon.call(m.Status()).sessions[0].pid not in (None, first.server.pid),
               what="the server replaced after verify")
    again = daemon.call(m.Diagnostics(str(path), wait=30))
    assert again.verdict == first.verdict and again.server.pid != first.server.pid
    assert not again.freshness.may_be_stale, again.freshness


def test_a_weakened_statement_is_named_with_the_committed_one_beside_it(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    path.write_text(GOOD_SCRIPT.replace("!n:num. n + 0 = n", "!n:num. n + 0 >= n"), encoding="utf-8")
    reply = verify(daemon, path)
    assert not reply.verified
    assert check(reply, "statements").status == "failed"
    assert check(reply, "proofs").status == "passed"  # the weaker statement is proved: that is the trap
    [change] = reply.statements
    assert (change.name, change.change, change.reference, change.current) == (
        "add0", "changed", "!n:num. n + 0 = n", "!n:num. n + 0 >= n")
    assert "theorem add0 (line 4) changed: was !n:num. n + 0 = n  now !n:num. n + 0 >= n" in render(reply)
    assert reply.headline == "NOT VERIFIED: demoScript.sml: failed: statements."


def test_a_removed_theorem_is_named(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    path.write_text(GOOD_SCRIPT[:GOOD_SCRIPT.index("Theorem conj_comm")], encoding="utf-8")
    reply = verify(daemon, path)
    assert not reply.verified
    assert [(c.name, c.change) for c in reply.statements] == [("conj_comm", "removed")]
    assert "conj_comm (removed)" in check(reply, "statements").summary


def test_a_changed_definition_is_not_verified(daemon, tmp_path):
    path = committed(tmp_path, DEF_SCRIPT)
    path.write_text(DEF_SCRIPT.replace("dbl n = 2 * n", "dbl n = n + n"), encoding="utf-8")
    reply = verify(daemon, path)
    assert not reply.verified
    [change] = reply.statements
    assert (change.name, change.kind, change.change, change.allowed) == ("dbl_def", "definition", "changed", False)
    assert "definition dbl_def (line 16) changed: was dbl n = 2 * n  now dbl n = n + n" in render(reply)


def test_a_cheat_fails_the_proofs_the_oracles_and_the_build(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    path.write_text(GOOD_SCRIPT.replace("rpt strip_tac >> simp[]", "cheat"), encoding="utf-8")
    reply = verify(daemon, path)
    assert not reply.verified
    assert check(reply, "statements").status == "passed"
    assert check(reply, "proofs").status == "failed" and "conj_comm" in check(reply, "proofs").summary
    assert check(reply, "build").summary == "Holmake built demoTheory but reported it CHEATED."
    oracles = check(reply, "oracles")
    assert oracles.status == "failed" and "conj_comm rests on cheat" in oracles.summary
    assert "conj_comm: oracles DISK_THM, cheat (cheat)" in oracles.evidence


def test_a_new_axiom_is_named_from_hols_record(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    axiom = '\nval ax = new_axiom ("my_ax", ``!n:num. n < n + 1``);\n\nTheorem uses_ax:\n  !n:num. n < n + 1\n' \
            'Proof\n  ACCEPT_TAC ax\nQED\n'
    path.write_text(GOOD_SCRIPT + axiom, encoding="utf-8")
    reply = verify(daemon, path)
    assert not reply.verified
    assert [c.status for c in reply.checks] == ["passed", "passed", "failed", "passed"], render(reply)
    oracles = check(reply, "oracles")
    assert "axioms not allowed: demo.my_ax" in oracles.summary
    assert "axiom demo.my_ax (DB.axioms demo)" in oracles.evidence


def test_an_allowed_axiom_is_verified(daemon_factory, tmp_path):
    daemon = daemon_factory(verify_axioms=("demo.my_ax",))
    path = committed(tmp_path, GOOD_SCRIPT + '\nval ax = new_axiom ("my_ax", ``T``);\n')
    assert verify(daemon, path).verified


def test_a_build_failure_is_named_and_hols_record_is_not_read(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    path.write_text(GOOD_SCRIPT + "\n(* FAKE_HOLMAKE_FAIL *)\n", encoding="utf-8")
    reply = verify(daemon, path)
    assert not reply.verified
    build = check(reply, "build")
    assert build.status == "failed" and "demo failed to build" in build.summary
    assert any("fake failure in demo" in line for line in build.evidence)
    assert check(reply, "oracles").status == "unchecked"


def test_a_file_outside_git_says_what_it_could_not_check(daemon, tmp_path):
    path = tmp_path / "loose" / "demoScript.sml"
    path.parent.mkdir()
    path.write_text(GOOD_SCRIPT, encoding="utf-8")
    reply = verify(daemon, path)
    assert not reply.verified
    statements = check(reply, "statements")
    assert statements.status == "unchecked"
    assert "is not in a git repository" in statements.summary and "--pinned FILE" in statements.summary
    assert reply.unchecked == [f"statements: {statements.summary}"]
    assert reply.headline == "NOT VERIFIED: demoScript.sml: not checked: statements."
    assert [c.status for c in reply.checks[1:]] == ["passed"] * 3


def test_pinned_statements_stand_in_for_git(daemon, tmp_path):
    pinned = tmp_path / "pinned.sml"
    pinned.write_text("Theorem add0:\n  !n:num. n + 0 = n\n\nTheorem conj_comm:\n  !p q. p /\\ q ==> q /\\ p\n",
                      encoding="utf-8")
    path = tmp_path / "loose" / "demoScript.sml"
    path.parent.mkdir()
    path.write_text(GOOD_SCRIPT.replace("q /\\ p\nProof", "p\nProof"), encoding="utf-8")
    reply = verify(daemon, path, pinned=str(pinned))
    assert reply.reference == f"the pinned statements in {pinned}"
    assert [(c.name, c.change) for c in reply.statements] == [("conj_comm", "changed")]


def test_against_an_older_revision(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    path.write_text(GOOD_SCRIPT.replace("!n:num. n + 0 = n", "!n:num. T"), encoding="utf-8")
    git(path.parent, "commit", "-q", "-am", "weakened, and committed")
    assert verify(daemon, path).verified  # HEAD itself has the weakened statement
    reply = verify(daemon, path, against="HEAD~1")
    assert not reply.verified and reply.reference.startswith("git HEAD~1 (")
    assert [(c.name, c.change) for c in reply.statements] == [("add0", "changed")]


def test_holctl_verify_exits_0_only_when_verified(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    ok = CliRunner().invoke(cli, ["--socket", str(daemon.socket), "--no-start", "verify", str(path)])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.startswith("VERIFIED: demoScript.sml")
    path.write_text(GOOD_SCRIPT.replace("gen_tac >> simp[]", "cheat"), encoding="utf-8")
    bad = CliRunner().invoke(cli, ["--socket", str(daemon.socket), "--no-start", "verify", str(path), "add0"])
    assert bad.exit_code == 1
    assert bad.stdout.startswith("NOT VERIFIED: demoScript.sml")
    assert "FAILED    proofs: Not proved by HOL without cheat: add0." in bad.stdout


@pytest.mark.parametrize("rev", ["--upload-pack=x", "HEAD HEAD", ""])
def test_a_bad_revision_is_refused(daemon, tmp_path, rev):
    path = committed(tmp_path, GOOD_SCRIPT)
    if not rev:
        rev = "no-such-branch"
    with pytest.raises(BadRequest):
        verify(daemon, path, against=rev)


def test_diagnostics_notes_a_statement_changed_since_head_once_per_text_and_head(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    path.write_text(GOOD_SCRIPT.replace("!n:num. n + 0 = n", "!n:num. n + 0 >= n"), encoding="utf-8")
    first = daemon.call(m.Diagnostics(str(path), wait=60.0), timeout=120.0)
    assert first.verdict == "OK"  # a note, not an error
    [note] = [w for w in first.warnings if w.startswith("STATEMENT CHANGED")]
    assert note.startswith("STATEMENT CHANGED since git HEAD (")
    assert note.endswith("theorem add0 (line 4) changed: was !n:num. n + 0 = n  now !n:num. n + 0 >= n. "
                         "`verify` will name it.")
    assert "STATEMENT CHANGED" in render(first)
    notes = daemon.daemon.answers.head_notes
    again = daemon.call(m.Diagnostics(str(path), wait=60.0), timeout=120.0)
    assert note in again.warnings and notes.computed == 1  # the same text and HEAD: no git run
    git(path.parent, "commit", "-q", "-am", "the new statement")
    committed_now = daemon.call(m.Diagnostics(str(path), wait=60.0), timeout=120.0)
    assert not [w for w in committed_now.warnings if w.startswith("STATEMENT CHANGED")]
    assert notes.computed == 2


def test_diagnostics_outside_git_runs_no_git(daemon, tmp_path):
    path = tmp_path / "loose" / "demoScript.sml"
    path.parent.mkdir()
    path.write_text(GOOD_SCRIPT, encoding="utf-8")
    reply = daemon.call(m.Diagnostics(str(path), wait=60.0), timeout=120.0)
    assert reply.verdict == "OK" and not [w for w in reply.warnings if "STATEMENT" in w]
    assert daemon.daemon.answers.head_notes.computed == 0


def test_a_named_theorem_the_file_lacks_is_not_verified(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    reply = verify(daemon, path, theorems=["add0", "no_such_thm"])
    assert not reply.verified and reply.theorems == ["add0", "no_such_thm"]
    proofs = check(reply, "proofs")
    assert proofs.status == "failed" and "no_such_thm: no such theorem in the file" in proofs.evidence


def test_a_file_changed_while_verify_builds_is_not_verified(daemon, tmp_path):
    path = committed(tmp_path, GOOD_SCRIPT)
    os.mkfifo(path.parent / "holmake.gate")  # the fake Holmake waits here until it is opened for writing
    outcome: dict = {}
    caller = threading.Thread(target=lambda: outcome.update(reply=verify(daemon, path)))
    caller.start()
    wait_until(lambda: (path.parent / ".holmake-runs").exists(), 60.0, "the build to start")
    path.write_text(GOOD_SCRIPT + LEMMA, encoding="utf-8")  # an edit while the build runs
    # The build reaches its gate a moment after it records the run: a writer's open fails (ENXIO)
    # until the build has the FIFO open for reading, so it is tried until then (bounded).
    wait_until(lambda: _opened_for_writing(path.parent / "holmake.gate"), 60.0, "the build at its gate")
    caller.join(120.0)
    assert not caller.is_alive()
    reply = outcome["reply"]
    assert [c.status for c in reply.checks] == ["passed"] * 4  # each check passed, on one text or another
    assert not reply.verified
    assert "The file changed during this call" in reply.headline and reply.headline.startswith("NOT VERIFIED")


def _opened_for_writing(fifo: Path) -> bool:
    """Open `fifo` for writing and close it (which lets its reader go on); False while it has no reader."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: nobody reads it yet
        return False
    os.close(fd)
    return True


def test_a_git_read_in_flight_when_the_daemon_stops_is_cancelled_and_reaped(tmp_path, monkeypatch):
    # A diagnostics note reads HEAD's text with git in the background; the daemon stopping cancels
    # it, and the child is reaped before the event loop ends (a child left behind keeps its pipes).
    import asyncio

    import psutil

    from holsrv.answers.statementcheck import HeadNotes

    path = committed(tmp_path, DEF_SCRIPT)
    slow = tmp_path / "bin"
    slow.mkdir()
    started = tmp_path / "git.pid"
    (slow / "git").write_text(
        f'#!/bin/sh\necho $$ > "{started}.tmp" && mv "{started}.tmp" "{started}"\nexec sleep 60\n')
    (slow / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}{os.pathsep}{os.environ['PATH']}")

    async def stopped_midway() -> int:
        notes = HeadNotes(timeout_s=60.0)
        asking = asyncio.ensure_future(notes.notes(path, "edited", DEF_SCRIPT + LEMMA))
        async with asyncio.timeout(30):
            while not started.exists():
                await asyncio.sleep(0.02)
        await notes.close()
        asking.cancel()
        await asyncio.gather(asking, return_exceptions=True)
        return int(started.read_text())

    pid = asyncio.run(stopped_midway())
    assert not psutil.pid_exists(pid), "the git child outlived the close"
