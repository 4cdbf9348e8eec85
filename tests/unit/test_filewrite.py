"""The daemon's one writer of a user's file, on real files: only over the bytes expected,
atomically, the mode kept, never through a symbolic link, nothing left behind."""

from __future__ import annotations

import os
import stat

import pytest

from holsrv import errors
from holsrv.disk import filewrite
from holsrv.disk.files import content_hash

OLD = b"Theory demo\r\n\r\nTheorem t:\r\n  T\r\nProof\r\n  cheat\r\nQED\r\n"
NEW = OLD.replace(b"cheat", b"simp[]")


def test_the_new_bytes_replace_the_old_when_the_file_still_has_them(tmp_path):
    path = tmp_path / "tScript.sml"
    path.write_bytes(OLD)
    os.chmod(path, 0o604)
    inode = path.stat().st_ino
    assert filewrite.replace(path, content_hash(OLD), NEW) == content_hash(NEW)
    assert path.read_bytes() == NEW and stat.S_IMODE(path.stat().st_mode) == 0o604
    assert path.stat().st_ino != inode  # a new file renamed over the old, not the old one rewritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tScript.sml"]


def test_a_rollback_puts_the_old_bytes_back_only_over_the_bytes_written(tmp_path):
    path = tmp_path / "tScript.sml"
    path.write_bytes(NEW)
    filewrite.replace(path, content_hash(NEW), OLD)
    assert path.read_bytes() == OLD
    # Someone else wrote meanwhile: their bytes stay.
    theirs = OLD + b"(* mine *)\r\n"
    path.write_bytes(theirs)
    with pytest.raises(errors.FileChanged, match="nothing was written"):
        filewrite.replace(path, content_hash(NEW), OLD)
    assert path.read_bytes() == theirs


def test_a_file_whose_bytes_changed_is_not_written(tmp_path):
    path = tmp_path / "tScript.sml"
    path.write_bytes(OLD + b"\r\n")
    with pytest.raises(errors.FileChanged) as caught:
        filewrite.replace(path, content_hash(OLD), NEW)
    assert caught.value.code == "file_changed" and path.read_bytes() == OLD + b"\r\n"


def test_a_vanished_file_counts_as_changed(tmp_path):
    with pytest.raises(errors.FileChanged, match="no longer exists"):
        filewrite.replace(tmp_path / "goneScript.sml", content_hash(OLD), NEW)
    assert list(tmp_path.iterdir()) == []


def test_a_symbolic_link_at_the_target_is_refused_and_left_a_link(tmp_path):
    real = tmp_path / "realScript.sml"
    real.write_bytes(OLD)
    link = tmp_path / "linkScript.sml"
    link.symlink_to(real)
    with pytest.raises(errors.SymlinkRefused) as caught:
        filewrite.replace(link, content_hash(OLD), NEW)
    assert caught.value.code == "symlink_refused"
    assert link.is_symlink() and real.read_bytes() == OLD
    with pytest.raises(errors.SymlinkRefused):
        filewrite.refuse_link(str(link))
    filewrite.refuse_link(str(real))  # a real file passes


def test_a_directory_the_daemon_may_not_write_in_is_a_permission_error_and_nothing_changes(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root writes in any directory")
    path = tmp_path / "tScript.sml"
    path.write_bytes(OLD)
    os.chmod(tmp_path, 0o500)
    try:
        with pytest.raises(errors.PermissionDenied, match="nothing was written"):
            filewrite.replace(path, content_hash(OLD), NEW)
    finally:
        os.chmod(tmp_path, 0o700)
    assert path.read_bytes() == OLD and sorted(p.name for p in tmp_path.iterdir()) == ["tScript.sml"]
