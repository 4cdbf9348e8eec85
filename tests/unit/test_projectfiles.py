"""Project files on their own: where one is found, what it may set, and that it is read once per change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from holsrv.config import projects
from holsrv.config.settings import Settings
from holsrv.errors import ProjectError


def _hol(root: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    for name in ("hol", "Holmake"):
        (root / "bin" / name).write_text("#!/bin/sh\n")
        (root / "bin" / name).chmod(0o755)
    return root


def test_the_nearest_project_file_is_found_up_to_the_repository_root_and_never_in_home(tmp_path):
    repo = tmp_path / "home" / "me" / "dev"
    deep = repo / "a" / "b"
    deep.mkdir(parents=True)
    script = deep / "xScript.sml"
    home = tmp_path / "home" / "me"
    (tmp_path / "home" / "holsrv.toml").write_text("")  # above the home: never read
    (home / "holsrv.toml").write_text("")  # the home's own: never read either
    assert projects.find(script, home) is None
    (repo / "holsrv.toml").write_text("")
    assert projects.find(script, home) == repo / "holsrv.toml"
    (repo / "a" / "holsrv.toml").write_text("")
    assert projects.find(script, home) == repo / "a" / "holsrv.toml"  # the nearest wins
    (deep / ".git").write_text("gitdir: elsewhere\n")  # a worktree's .git is a file: the root is here
    assert projects.find(script, home) is None
    (deep / "holsrv.toml").write_text("")
    assert projects.find(script, home) == deep / "holsrv.toml"  # the root itself is searched


def test_a_project_file_is_read_once_per_inode_mtime_and_size(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", "/nonexistent-home")
    (tmp_path / ".git").mkdir()
    file = tmp_path / "holsrv.toml"
    file.write_text("max_heap_mb = 100\n")
    file.chmod(0o600)
    reads = []
    real = projects.read
    monkeypatch.setattr(projects, "read", lambda *a: reads.append(a[0]) or real(*a))
    known = projects.Projects()
    script = tmp_path / "xScript.sml"
    first = known.of(script)
    assert first is not None and first.values == {"max_heap_mb": 100}
    assert known.of(script) is first and len(reads) == 1
    file.write_text("max_heap_mb = 2000\n")
    os.utime(file, ns=(1, 1))  # a new mtime (and size) even on a coarse clock
    assert known.of(script).values == {"max_heap_mb": 2000} and len(reads) == 2


def test_a_project_hol_brings_its_own_holmake_and_sources_say_the_file(tmp_path):
    hol = _hol(tmp_path / "HOL")
    file = tmp_path / "holsrv.toml"
    project = projects.read(file, (1, 1, 1), f'holdir = "{hol}"\nletgo_s = 4\n'.encode())
    user = Settings(hol_bin="/usr/bin/hol", holmake_bin="/usr/bin/Holmake", letgo_s=10.0, max_heap_mb=3000)
    got = project.apply(user)
    assert got.hol_command() == str(hol / "bin" / "hol")
    assert got.holmake_command() == str(hol / "bin" / "Holmake")  # not the user-wide Holmake of another HOL
    assert (got.letgo_s, got.max_heap_mb) == (4, 3000)
    assert got.sources["letgo_s"] == f"project file {file}"


@pytest.mark.parametrize(("text", "said"), [
    ("socket = 'x'\n", "'socket' is a setting of the daemon as a whole"),
    ("max_servers = 3\n", "set it in"),
    ("hol_bn = 'x'\n", "did you mean 'hol_bin'?"),
    ("max_heap_mb = 'big'\n", "bad value for 'max_heap_mb'"),
    ("max_heap_mb = = 1\n", "line 1"),
    ("hol_bin = 'missing/hol'\n", "is not an executable file"),
])
def test_a_broken_project_file_is_refused_naming_the_file_and_why(tmp_path, text, said):
    file = tmp_path / "holsrv.toml"
    project = projects.read(file, (1, 1, 1), text.encode())
    with pytest.raises(ProjectError) as refused:
        project.apply(Settings())
    assert said in str(refused.value) and str(file) in str(refused.value)


def test_a_new_servers_expected_size_is_learned_per_hol_and_heap_cap():
    import asyncio
    from types import SimpleNamespace

    from holsrv.pool.admission import Admission

    admission = Admission(Settings(start_footprint_mb=100, soft_footprint_mb=4096), busy=lambda s: True,
                          current=lambda p: None, shedder=None)  # type: ignore[arg-type]
    big = SimpleNamespace(id=1, footprint=None, peak=None, measured_warm=False, path=Path("a"), pid=1,
                          file=SimpleNamespace(phase="completed"), hol_cmd="/hol-a/bin/hol", max_heap_mb=2048,
                          footprint_mb=lambda: 900.0, alive=False)
    asyncio.run(admission.sample([big]))  # type: ignore[list-item]
    assert admission.expected_mb(2048, "/hol-a/bin/hol") == 900
    assert admission.expected_mb(2048, "/hol-b/bin/hol") == 100  # another HOL: not yet measured
    assert admission.expected_mb(1024, "/hol-a/bin/hol") == 100  # another heap cap neither
    assert "server of /hol-a/bin/hol started with a heap cap of 2048 MB" in admission.basis(2048, "/hol-a/bin/hol")
