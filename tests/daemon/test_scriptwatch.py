"""A script with a live server is sent to HOL when written, with no call (holsrv/pool/scriptwatch.py)."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from holsrv import facilities
from holsrv.disk import files, watching
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, client_messages, wait_until

# Generous: under load, writes 5 ms apart must still fall within one quiet wait.
BURST_DEBOUNCE_S = 0.5


def changes(log) -> list[str]:
    """The texts of the didChanges the fake got, in order."""
    return [msg["params"]["contentChanges"][0]["text"] for msg in client_messages(log, "textDocument/didChange")]


def edited(i: int) -> str:
    return GOOD_SCRIPT + f"\n(* written {i} *)\n"  # after the last QED: one whole-text change


# Sync on write works with inotify and, without it (macOS, portable mode), with the stat poll; only
# inotify sees every write, so only its reads are vouched for (a stat poll's are read again by a call).
VOUCHING = pytest.mark.skipif(not facilities.inotify(),
                              reason="no inotify (portable mode): the stat poll vouches for no read")


def settled(daemon, path) -> m.DiagnosticsResult:
    result = daemon.call(m.Diagnostics(str(path), wait=20))
    assert result.complete, result.headline
    return result


def test_a_write_in_place_reaches_hol_with_no_call(daemon, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(GOOD_SCRIPT)
    settled(daemon, path)
    path.write_text(edited(1), encoding="utf-8")
    wait_until(lambda: edited(1) in changes(log), 30, "the written text in a didChange")
    after = settled(daemon, path)
    assert after.content_hash == files.content_hash(path.read_bytes()) and after.verdict == "OK"
    assert changes(log) == [edited(1)]  # the call found it synced: nothing sent twice


def test_a_write_by_rename_over_the_script_reaches_hol_with_no_call(daemon, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(GOOD_SCRIPT)
    settled(daemon, path)
    temporary = path.with_name(".demoScript.sml.tmp")
    temporary.write_text(edited(2), encoding="utf-8")
    os.replace(temporary, path)  # as editors and write tools save
    wait_until(lambda: edited(2) in changes(log), 30, "the renamed text in a didChange")
    assert changes(log) == [edited(2)]


def test_a_burst_of_writes_costs_hol_one_check_of_the_final_text(daemon_factory, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    daemon = daemon_factory(sync_debounce_s=BURST_DEBOUNCE_S)
    path = write_script(GOOD_SCRIPT)
    settled(daemon, path)
    pause = threading.Event()
    for i in range(20):
        path.write_text(edited(i), encoding="utf-8")
        pause.wait(0.005)  # a generator writing: the pace of the writes, not a synchronisation
    wait_until(lambda: edited(19) in changes(log), 30, "the final text in a didChange")
    sent = changes(log)
    assert sent[-1] == edited(19) and len(sent) <= 3, len(sent)


def test_a_write_during_a_trial_leaves_the_trial_s_text_alone(daemon, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(GOOD_SCRIPT)
    settled(daemon, path)
    looping = threading.Event()
    box: dict = {}

    def trial() -> None:
        with daemon.client("agent") as client:
            box["result"] = client.call(m.Try(str(path), 13, ["LOOP_TAC"], timeout=3.0, progress=True), 120,
                                        on_progress=lambda frame: looping.set())

    thread = threading.Thread(target=trial)
    thread.start()
    try:
        assert looping.wait(60), "the trial never started its candidate"
        path.write_text(edited(3), encoding="utf-8")
    finally:
        thread.join(120)
    # The loop ran to its limit: nobody put the disk text in under the candidate.
    assert [c.state for c in box["result"].candidates] == ["timed_out"]
    assert daemon.daemon.pool.scriptwatch.syncs == 0
    after = settled(daemon, path)
    assert after.content_hash == files.content_hash(path.read_bytes()) and after.verdict == "OK"


def test_a_daemon_without_file_watching_still_answers_about_the_written_text(daemon_factory, write_script, monkeypatch,
                                                                        tmp_path):
    monkeypatch.setattr(watching, "create", lambda *args, **kwargs: None)  # neither inotify nor a poll
    daemon = daemon_factory()
    path = write_script(GOOD_SCRIPT)
    settled(daemon, path)
    broken = GOOD_SCRIPT.replace("gen_tac >> simp[]", 'FAIL_TAC "no"')
    path.write_text(broken, encoding="utf-8")
    after = settled(daemon, path)
    assert after.content_hash == files.content_hash(path.read_bytes()) and after.verdict != "OK"
    assert daemon.daemon.pool.scriptwatch.syncs == 0


def test_a_script_is_no_longer_watched_once_its_server_stops(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    settled(daemon, path)
    real = path.resolve()

    async def watching() -> set:
        return daemon.daemon.pool.scriptwatch.watching()

    assert real in daemon.run(watching())
    daemon.call(m.Stop(str(path)))
    wait_until(lambda: real not in daemon.run(watching()), 30, "the watch on the stopped server's script dropped")


@VOUCHING
def test_the_first_call_after_a_synced_write_finds_its_answer_ready_and_reads_nothing(
    daemon, write_script, monkeypatch, tmp_path
):
    path = write_script(GOOD_SCRIPT)
    settled(daemon, path)
    watch = daemon.daemon.pool.scriptwatch
    path.write_text(edited(4), encoding="utf-8")
    wait_until(lambda: watch.ahead.answered == 1, 30, "the answer about the written text computed ahead")
    reads = daemon.daemon.answers.scripts.reads
    after = settled(daemon, path)
    assert after.cached and after.content_hash == files.content_hash(edited(4).encode()) and after.verdict == "OK"
    # Written under two seconds ago, yet not read again (nor by the freshness stamp): the watch's read stands.
    assert daemon.daemon.answers.scripts.reads == reads


@VOUCHING
def test_the_watch_no_longer_vouches_for_its_read_once_the_file_is_written_again(daemon, write_script):
    path = write_script(GOOD_SCRIPT)
    settled(daemon, path)
    watch = daemon.daemon.pool.scriptwatch
    path.write_text(edited(5), encoding="utf-8")
    wait_until(lambda: daemon.run(_vouched(watch, path)) is not None, 30, "the watch's read of the written text")

    async def rewritten():
        # Written and asked in one go on the daemon's loop: no debounced read can come between,
        # so only the write's own event can make the watch disown its read.
        path.write_text(edited(6), encoding="utf-8")
        return watch.vouch(str(path.resolve()))

    assert daemon.run(rewritten()) is None
    after = settled(daemon, path)
    assert after.content_hash == files.content_hash(edited(6).encode())


async def _vouched(watch, path):
    return watch.vouch(str(path.resolve()))


def test_a_write_while_a_trial_holds_the_server_reaches_hol_once_the_trial_ends(
    daemon, write_script, monkeypatch, tmp_path
):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(GOOD_SCRIPT)
    settled(daemon, path)
    watch = daemon.daemon.pool.scriptwatch
    session = daemon.daemon.pool.sessions[path.resolve()]
    release = asyncio.Event()
    held = threading.Event()

    async def trial() -> None:  # what a trial's hold is, with no text of its own to restore
        async with session.trials.exclusive(30, path.name):
            held.set()
            await release.wait()

    hold = asyncio.run_coroutine_threadsafe(trial(), daemon.loop)
    try:
        assert held.wait(30), "the hold never began"
        path.write_text(edited(7), encoding="utf-8")
        # The watch's sync has begun, and waits for the hold: nothing sent under it.
        wait_until(lambda: path.resolve() in watch._syncing, 30, "the watch's sync of the write")
        assert edited(7) not in changes(log)
    finally:
        daemon.loop.call_soon_threadsafe(release.set)
        hold.result(30)
    wait_until(lambda: edited(7) in changes(log), 30, "the written text in a didChange after the hold")
    # HOL may have read the change before the daemon's sync has returned to count it.
    wait_until(lambda: path.resolve() not in watch._syncing, 30, "the watch's sync to finish")
    assert watch.syncs == 1
