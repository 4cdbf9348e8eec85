"""The stat poll, inotify's fallback (holsrv/disk/statpoll.py): what it reports, and its bounds."""

from __future__ import annotations

import os
import select
from pathlib import Path

import pytest

from holsrv.disk import statpoll, watching


def _scripts(directory: Path, name: str) -> bool:
    return name.endswith("Script.sml")


def test_a_watcher_with_no_poller_sees_a_build_done_just_before_its_owner_looks(tmp_path):
    built = tmp_path / "mylibTheory.uo"
    built.write_text("old")
    other = tmp_path / "other"
    other.mkdir()
    watcher = statpoll.PollWatcher(watching.build_file, poller=None)
    try:
        assert watcher.watch(tmp_path) and watcher.watch(other)
        watcher.sweep()
        assert watcher.changed() == set()
        (tmp_path / "notes.txt").write_text("not a build file")
        watcher.sweep()
        assert watcher.changed() == set()
        os.utime(built, (2000, 2000))  # no interval to wait out: the look is now
        (other / "baseTheory.dat").write_text("new")
        watcher.sweep([tmp_path])  # the directories the call cares about
        assert watcher.changed() == {tmp_path}
        watcher.sweep()  # the other one's change is kept for its own look
        assert watcher.changed() == {other}
        built.unlink()
        watcher.sweep()
        assert watcher.changed() == {tmp_path}
    finally:
        watcher.close()


def test_a_polled_watcher_wakes_its_descriptor_and_names_the_file_written(tmp_path):
    script = tmp_path / "demoScript.sml"
    script.write_text("one")
    watcher = statpoll.PollWatcher(_scripts, statpoll.Poller(interval_s=0.05))
    try:
        assert watcher.watch(tmp_path)
        (tmp_path / "other.txt").write_text("ignored")
        script.write_text("two, longer")
        readable, _, _ = select.select([watcher.fd], [], [], 30)
        assert readable == [watcher.fd]
        assert watcher.written() == {script}
        assert select.select([watcher.fd], [], [], 0)[0] == []  # taken in: not readable again
    finally:
        watcher.close()


def test_a_directory_removed_is_reported_once_and_no_longer_watched(tmp_path):
    place = tmp_path / "objs"
    place.mkdir()
    watcher = statpoll.PollWatcher(watching.build_file, poller=None)
    try:
        assert watcher.watch(place)
        place.rmdir()
        watcher.sweep()
        assert watcher.changed() == {place}
        assert watcher.watched() == 0 and watcher.changed() == set()
        assert not watcher.watch(place)  # nothing there to look at
    finally:
        watcher.close()


def test_the_number_of_directories_watched_is_bounded(tmp_path):
    poller = statpoll.Poller(interval_s=0.05, max_dirs=2)
    first, second = statpoll.PollWatcher(_scripts, poller), statpoll.PollWatcher(_scripts, poller)
    dirs = [tmp_path / name for name in "abc"]
    try:
        for directory in dirs:
            directory.mkdir()
        assert first.watch(dirs[0]) and second.watch(dirs[1])
        assert not second.watch(dirs[2])  # the poller's bound, whichever watcher asks
        first.unwatch(dirs[0])
        assert second.watch(dirs[2])
    finally:
        first.close()
        second.close()


def test_more_events_than_kept_is_an_overflow(tmp_path, monkeypatch):
    monkeypatch.setattr(statpoll, "MAX_PENDING", 3)
    watcher = statpoll.PollWatcher(_scripts, poller=None)
    try:
        assert watcher.watch(tmp_path)
        for i in range(5):
            (tmp_path / f"n{i}Script.sml").write_text("new")
        watcher.sweep()
        assert watcher.written() is None  # anything may have been written
        assert watcher.written() == set()
    finally:
        watcher.close()


@pytest.mark.parametrize("rename", [False, True])
def test_a_rewrite_in_place_or_by_rename_is_a_write(tmp_path, rename):
    script = tmp_path / "demoScript.sml"
    script.write_text("one")
    watcher = statpoll.PollWatcher(_scripts, poller=None)
    try:
        assert watcher.watch(tmp_path)
        if rename:
            temporary = tmp_path / "demoScript.sml.tmp"
            temporary.write_text("one")  # the same bytes, another inode
            os.replace(temporary, script)
        else:
            script.write_text("two")  # the same size: mtime and ctime tell
            os.utime(script, ns=(0, 1))
        watcher.sweep()
        assert watcher.written() == {script}
    finally:
        watcher.close()
