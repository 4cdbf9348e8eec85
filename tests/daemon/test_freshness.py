"""Reading a script costs one stat when nothing changed, and never hides a change."""

from __future__ import annotations

import os
import time

import pytest

from holsrv import errors
from holsrv.disk import files
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT, client_messages

LATER_NS = 60 * 1_000_000_000


def long_after(path) -> files.Reader:
    """A reader whose clock says every file changed long before it was read."""
    later = os.stat(path).st_ctime_ns + LATER_NS
    return files.Reader(clock_ns=lambda: later)


def test_an_unchanged_file_is_not_read_again(write_script):
    path = write_script(GOOD_SCRIPT)
    reader = long_after(path)
    first = reader.read(str(path))
    again = reader.read(str(path))
    assert again is first and reader.reads == 1


def test_a_rewrite_with_the_same_size_and_a_forged_mtime_is_read(write_script):
    path = write_script(GOOD_SCRIPT)
    reader = long_after(path)
    before = os.stat(path)
    assert reader.read(str(path)).text == GOOD_SCRIPT
    edited = GOOD_SCRIPT.replace("simp[]", "fs[]  ", 1)
    assert len(edited) == len(GOOD_SCRIPT)
    path.write_text(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # size and mtime as before
    after = os.stat(path)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (before.st_size, before.st_mtime_ns, before.st_ino)
    assert reader.read(str(path)).text == edited


def test_a_touched_file_with_the_same_bytes_gives_the_same_script(write_script):
    path = write_script(GOOD_SCRIPT)
    reader = long_after(path)
    first = reader.read(str(path))
    os.utime(path)
    again = reader.read(str(path))
    assert reader.reads == 2 and again is first  # read, found equal: the same objects, so caches hit


def test_a_file_changed_just_before_it_was_read_is_read_again_until_it_is_older(write_script):
    path = write_script(GOOD_SCRIPT)
    changed = os.stat(path).st_ctime_ns
    now = [changed + 1_000_000]  # read 1 ms after the change: a same-tick rewrite could hide
    reader = files.Reader(clock_ns=lambda: now[0])
    reader.read(str(path))
    reader.read(str(path))
    assert reader.reads == 2
    now[0] = changed + files.RACY_NS + 1
    reader.read(str(path))
    reader.read(str(path))
    assert reader.reads == 3


def test_a_symlink_pointed_at_another_script_is_followed(write_script, tmp_path):
    one = write_script(GOOD_SCRIPT, "oneScript.sml")
    two = write_script(GOOD_SCRIPT.replace("demo", "other"), "twoScript.sml")
    link = tmp_path / "linkScript.sml"
    link.symlink_to(one)
    reader = long_after(one)
    assert reader.read(str(link)).path == one
    link.unlink()
    link.symlink_to(two)
    script = reader.read(str(link))
    assert script.path == two and "other" in script.text


def test_a_file_removed_after_it_was_read_is_reported_missing(write_script):
    path = write_script(GOOD_SCRIPT)
    reader = long_after(path)
    reader.read(str(path))
    path.unlink()
    with pytest.raises(errors.FileNotFound):
        reader.read(str(path))


def test_the_reader_forgets_the_least_recently_read_file_beyond_its_bound(write_script):
    paths = [write_script(GOOD_SCRIPT, f"s{i}Script.sml") for i in range(3)]
    reader = files.Reader(max_entries=2, clock_ns=lambda: time.time_ns() + LATER_NS)
    for path in paths:
        reader.read(str(path))
    reader.read(str(paths[2]))
    assert reader.reads == 3
    reader.read(str(paths[0]))
    assert reader.reads == 4


def test_a_touched_but_unchanged_file_is_not_resent_to_hol(daemon, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(GOOD_SCRIPT)
    first = daemon.call(m.Diagnostics(str(path), wait=20))
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))
    again = daemon.call(m.Diagnostics(str(path), wait=20))
    assert again.cached and again.content_hash == first.content_hash
    assert [msg["method"] for msg in client_messages(log) if msg.get("method", "").startswith("textDocument/did")] \
        == ["textDocument/didOpen"]


def test_a_same_size_rewrite_with_a_forged_mtime_reaches_hol(daemon, write_script, monkeypatch, tmp_path):
    log = tmp_path / "wire.jsonl"
    monkeypatch.setenv("FAKE_HOL_LOG", str(log))
    path = write_script(GOOD_SCRIPT)
    before = os.stat(path)
    first = daemon.call(m.Diagnostics(str(path), wait=20))
    edited = GOOD_SCRIPT.replace('simp[]\nQED\n\nTheorem conj', 'fs[]  \nQED\n\nTheorem conj')
    path.write_text(edited)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = daemon.call(m.Diagnostics(str(path), wait=20))
    assert not after.cached and after.content_hash != first.content_hash and after.verdict == "OK"
    changes = [msg for msg in client_messages(log) if msg.get("method") == "textDocument/didChange"]
    assert [c["params"]["contentChanges"] for c in changes] == [[{"text": edited}]]
