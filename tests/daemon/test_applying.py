"""try --apply against the fake HOL, through a real daemon and real files: the first proved
candidate written in place of the replaced text, only over the bytes the trial ran on, kept
only if the file's own check proves the theorem, else the old bytes put back."""

from __future__ import annotations

import contextlib
import os
import stat
import threading

import pytest

from holctl.render import render
from holsrv import errors
from holsrv.disk.files import content_hash
from holsrv.rpc import messages as m

from conftest import wait_until

SCRIPT = """\
Theory demo
Ancestors arithmetic

Theorem swap:
  !p q. p /\\ q ==> q /\\ p
Proof
  rpt strip_tac >>
  cheat
QED

Theorem other:
  !x. x ==> x
Proof
  rpt strip_tac >> simp[]
QED
"""
LINE = 8  # `  cheat` in swap


def settled(daemon, path) -> m.DiagnosticsResult:
    result = daemon.call(m.Diagnostics(str(path), wait=30))
    assert result.complete, result.headline
    return result


def server_text(daemon, path) -> bytes | None:
    async def text():
        session = daemon.daemon.pool.sessions.get(path)
        return session.data if session is not None else None
    return daemon.run(text())


def test_a_proved_candidate_is_written_in_place_and_the_files_check_then_says_ok(daemon, write_script):
    path = write_script(SCRIPT)
    assert settled(daemon, path).verdict == "CHEATS"
    result = daemon.call(m.Try(str(path), LINE, ['FAIL_TAC "no"', "simp[]", "metis_tac[]"], apply=True), timeout=120)
    assert [c.state for c in result.candidates] == ["failed", "proved", "proved"], [
        (c.state, c.message) for c in result.candidates]
    applied = result.applied
    assert applied is not None and (applied.state, applied.reason, applied.status) == ("kept", "", "proved")
    # The first proved candidate, in the given order, exactly where `cheat` was.
    assert applied.text == "simp[]" and applied.range == m.Range(LINE, 3, LINE, 8)
    written = SCRIPT.replace("  cheat\n", "  simp[]\n").encode()
    assert path.read_bytes() == written and applied.content_hash == content_hash(written)
    assert result.content_hash == content_hash(SCRIPT.encode())  # what the trial ran on
    assert "Applied" in result.message and "not changed" not in result.message
    after = settled(daemon, path)
    assert (after.verdict, after.content_hash) == ("OK", applied.content_hash)
    assert f"applied: KEPT: {LINE}:3-{LINE}:8 'simp[]'" in render(result)


def test_the_rest_of_a_crlf_file_with_unicode_is_byte_identical_after_apply(daemon, tmp_path):
    text = SCRIPT.replace("!p q. p /\\ q ==> q /\\ p", "∀p q. p ∧ q ⇒ q ∧ p").replace("  cheat", "  (* ‘∀’ *) cheat")
    original = text.replace("\n", "\r\n").encode("utf-8")
    path = tmp_path / "crlfScript.sml"
    path.write_bytes(original)
    os.chmod(path, 0o640)
    result = daemon.call(m.Try(str(path), LINE, ["simp[]"], column=13, apply=True, wait=30), timeout=120)
    assert result.applied is not None and result.applied.state == "kept", result.message
    # Columns count characters: `(* ‘∀’ *) ` is ten of them and more bytes.
    assert result.applied.range == m.Range(LINE, 13, LINE, 18)
    assert path.read_bytes() == original.replace("(* ‘∀’ *) cheat\r\n".encode(), "(* ‘∀’ *) simp[]\r\n".encode())
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the original's mode kept
    assert [p.name for p in tmp_path.iterdir()] == ["crlfScript.sml"]  # no temporary file left


def test_a_file_changed_after_the_trial_began_is_not_written_and_the_answer_says_why(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    edited = SCRIPT.replace("Theorem other", "Theorem other_edited").encode()
    box: dict = {}

    def call() -> None:
        box["reply"] = daemon.call(m.Try(str(path), LINE, ["simp[]", "SLOW_TAC 1500 >> simp[]"], apply=True),
                                   timeout=120)

    caller = threading.Thread(target=call)
    caller.start()
    # The second candidate is in the server: the trial is under way; someone edits the file.
    wait_until(lambda: b"SLOW_TAC" in (server_text(daemon, path) or b""), timeout=60, what="the second candidate")
    path.write_bytes(edited)
    caller.join(120)
    result = box["reply"]
    assert result.candidates[0].state == "proved" and result.changed_on_disk
    applied = result.applied
    assert applied is not None and (applied.state, applied.reason) == ("refused", "file_changed")
    assert "changed on disk since the trial" in applied.message and "nothing was written" in applied.message
    assert path.read_bytes() == edited and applied.content_hash == ""


def test_a_candidate_whose_check_in_the_file_gives_no_verdict_within_the_wait_is_rolled_back(daemon, write_script):
    # Proved in the trial (each candidate has `timeout`), but the file's own check has only the
    # trial's `wait`, and this proof takes longer: not proved there, so the old bytes go back.
    path = write_script(SCRIPT)
    settled(daemon, path)
    original = path.read_bytes()
    result = daemon.call(m.Try(str(path), LINE, ["SLOW_TAC 3000 >> simp[]"], timeout=60, wait=1.0, apply=True),
                         timeout=120)
    assert result.candidates[0].state == "proved", result.candidates[0].message
    applied = result.applied
    assert applied is not None and (applied.state, applied.reason) == ("rolled_back", "no_verdict"), applied
    assert applied.status == "checking" and "Rolled back" in result.message
    assert applied.content_hash == content_hash(SCRIPT.replace("  cheat\n", "  SLOW_TAC 3000 >> simp[]\n").encode())
    assert path.read_bytes() == original
    assert settled(daemon, path).content_hash == content_hash(original)


def test_a_rollback_never_overwrites_what_someone_else_wrote_after_the_apply(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    slow = "SLOW_TAC 8000 >> simp[]"
    box: dict = {}

    def call() -> None:
        box["reply"] = daemon.call(m.Try(str(path), LINE, [slow], timeout=60, wait=5.0, apply=True), timeout=120)

    caller = threading.Thread(target=call)
    caller.start()
    # Written; its check cannot give a verdict before the proof's 8 s: an editor saves meanwhile.
    wait_until(lambda: slow.encode() in path.read_bytes(), timeout=60, what="the candidate written")
    theirs = SCRIPT.replace("Theorem other", "Theorem other_saved").encode()
    path.write_bytes(theirs)
    caller.join(120)
    applied = box["reply"].applied
    assert applied is not None and applied.state == "rollback_skipped", applied
    assert applied.reason in ("file_changed", "no_verdict")  # the save came before the check read, or after
    assert path.read_bytes() == theirs


def test_a_caller_hanging_up_after_the_write_still_gets_its_file_checked_and_rolled_back(daemon, write_script):
    path = write_script(SCRIPT)
    settled(daemon, path)
    original = path.read_bytes()
    slow = "SLOW_TAC 3000 >> simp[]"
    client = daemon.client()

    def hang_up(progress: m.Progress) -> None:
        if progress.message.startswith("applying"):
            client.close()  # the daemon cancels a call whose caller hung up

    def call() -> None:
        with contextlib.suppress(errors.DaemonUnreachable):
            client.call(m.Try(str(path), LINE, [slow], timeout=60, wait=2.0, apply=True, progress=True),
                        timeout=120, on_progress=hang_up)

    caller = threading.Thread(target=call)
    caller.start()
    wait_until(lambda: slow.encode() in path.read_bytes(), timeout=60, what="the candidate written")
    caller.join(60)
    # No verdict within the wait, so the old bytes come back, though no one waits for the answer.
    wait_until(lambda: path.read_bytes() == original, timeout=60, what="the rollback")


def test_a_symlinked_file_is_refused_and_neither_the_link_nor_its_target_written(daemon, write_script, tmp_path):
    real = write_script(SCRIPT)
    link = tmp_path / "linkScript.sml"
    link.symlink_to(real)
    with pytest.raises(errors.SymlinkRefused, match="symbolic link") as caught:
        daemon.call(m.Try(str(link), LINE, ["simp[]"], apply=True), timeout=120)
    assert caught.value.code == "symlink_refused"
    assert real.read_text() == SCRIPT and link.is_symlink() and os.readlink(link) == str(real)


def test_apply_with_no_proved_candidate_writes_nothing(daemon, write_script):
    path = write_script(SCRIPT)
    before = path.stat()
    result = daemon.call(m.Try(str(path), LINE, ['FAIL_TAC "no"', "conj_tac >> DIVERGE_TAC"], apply=True), timeout=120)
    assert [c.state for c in result.candidates] == ["failed", "goals"]
    assert result.applied is None and "Nothing was written" in result.message
    after = path.stat()
    assert path.read_text() == SCRIPT and (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_without_apply_a_proved_candidate_leaves_the_file_untouched(daemon, write_script):
    path = write_script(SCRIPT)
    result = daemon.call(m.Try(str(path), LINE, ["simp[]"]), timeout=120)
    assert result.candidates[0].state == "proved" and result.applied is None
    assert path.read_text() == SCRIPT and "the file on disk was not changed" in result.message
