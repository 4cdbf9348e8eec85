"""Projects: the nearest `holsrv.toml` beside a script sets its HOL and heap cap, several HOLs in one daemon.

The second "HOL" is a wrapper script in a HOL tree of its own (`bin/hol`,
`bin/Holmake`) that runs the fake with `FAKE_HOL_HOLDIR` set to that tree, so
the fake's `serverInfo.holdir` says which HOL a server is.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from holctl.cli import cli as holctl_main
from holctl.render import render
from holsrv import errors
from holsrv.rpc import messages as m

from conftest import FAKE_HOL, GOOD_SCRIPT, wait_until

FAKE_HOLMAKE = FAKE_HOL.parent / "Holmake"


def hol_tree(root: Path) -> Path:
    """A HOL tree whose bin/hol runs the fake saying it is `root`, and whose bin/Holmake is the fake's."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    hol = bin_dir / "hol"
    hol.write_text(f'#!/bin/sh\nFAKE_HOL_HOLDIR="{root}" exec "{sys.executable}" "{FAKE_HOL}" "$@"\n')
    holmake = bin_dir / "Holmake"
    holmake.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_HOLMAKE}" "$@"\n')
    for program in (hol, holmake):
        program.chmod(0o755)
    return root


def project(root: Path, text: str, mode: int = 0o644) -> Path:
    """A development at `root` (a repository: `.git`) with `text` as its project file."""
    (root / ".git").mkdir(parents=True)
    file = root / "holsrv.toml"
    file.write_text(text)
    file.chmod(mode)
    return file


def cmdline(pid: int) -> list[str]:
    """The server's command line: the watchdog's child runs `hol` (here a shell script that execs the fake)."""
    return psutil.Process(pid).cmdline()


@pytest.fixture
def two_projects(tmp_path, write_script):
    hol_a = hol_tree(tmp_path / "HOL-A")
    hol_b = hol_tree(tmp_path / "HOL-B")
    file_a = project(tmp_path / "devA", f'holdir = "{hol_a}"\nmax_heap_mb = 777\n')
    file_b = project(tmp_path / "devB", 'hol_bin = "../HOL-B/bin/hol"  # relative to the project file\n')
    script_a = write_script(GOOD_SCRIPT, dir=tmp_path / "devA" / "src")
    script_b = write_script(GOOD_SCRIPT, dir=tmp_path / "devB")
    return hol_a, hol_b, file_a, file_b, script_a, script_b


def test_each_projects_file_runs_its_own_hol_side_by_side(daemon, two_projects, tmp_path, write_script):
    hol_a, hol_b, file_a, file_b, script_a, script_b = two_projects
    plain = write_script(GOOD_SCRIPT, dir=tmp_path / "loose")
    for script in (script_a, script_b, plain):
        assert daemon.call(m.Diagnostics(str(script), wait=20)).verdict == "OK"
    rows = {Path(r.file): r for r in daemon.call(m.Status()).sessions}
    assert all(r.state not in ("dead", "stopped") for r in rows.values())  # side by side, in one daemon
    a, b, loose = rows[script_a], rows[script_b], rows[plain]
    assert (a.holdir, a.project, a.hol) == (str(hol_a), str(file_a), str(hol_a / "bin" / "hol"))
    assert (b.holdir, b.project) == (str(hol_b), str(file_b))
    assert loose.project == "" and loose.hol == daemon.settings.hol_bin  # no project file: the user-wide HOL
    # A project's heap cap reaches --maxheap; the other project's server keeps the daemon's.
    assert a.max_heap_mb == 777 and cmdline(a.pid)[cmdline(a.pid).index("--maxheap") + 1] == "777"
    assert b.max_heap_mb == daemon.settings.max_heap_mb
    text = render(daemon.call(m.Status()))
    assert f"runs {hol_a / 'bin' / 'hol'} (HOL tree {hol_a}) with the settings of project file {file_a}" in text


def test_holmake_runs_the_holmake_of_the_files_project(daemon, two_projects):
    hol_a, hol_b, _, _, script_a, script_b = two_projects
    for script, hol in ((script_a, hol_a), (script_b, hol_b)):
        reply = daemon.call(m.Holmake(str(script)), timeout=60)
        assert reply.ok, reply.message
        assert reply.command[0] == str(hol / "bin" / "Holmake")


def test_a_calls_own_heap_cap_overrides_the_project_file(daemon, two_projects):
    script_a = two_projects[4]
    daemon.call(m.Diagnostics(str(script_a), wait=20))
    assert daemon.call(m.Status()).sessions[0].max_heap_mb == 777
    reply = daemon.call(m.Restart(str(script_a), max_heap_mb=321))
    assert reply.max_heap_mb == 321
    assert cmdline(reply.new_pid)[cmdline(reply.new_pid).index("--maxheap") + 1] == "321"


def test_the_project_file_overrides_the_daemons_flags_and_environment(daemon_factory, two_projects, tmp_path):
    hol_a, _, _, _, script_a, _ = two_projects
    daemon = daemon_factory(max_heap_mb=999, hol_bin=str(FAKE_HOL))
    row = daemon.call(m.Diagnostics(str(script_a), wait=20)).server
    assert row.pid is not None
    [status] = daemon.call(m.Status()).sessions
    assert status.hol == str(hol_a / "bin" / "hol") and status.max_heap_mb == 777


def test_an_edited_project_file_is_reported_until_a_restart_applies_it(daemon, two_projects):
    hol_a, _, file_a, _, script_a, _ = two_projects
    first = daemon.call(m.Diagnostics(str(script_a), wait=20))
    assert not first.freshness.may_be_stale, first.freshness.reasons
    file_a.write_text(f'holdir = "{hol_a}"\nmax_heap_mb = 555\n')
    again = daemon.call(m.Diagnostics(str(script_a), wait=20))
    assert again.server.pid == first.server.pid  # not restarted behind the user's back
    [reason] = [r for r in again.freshness.reasons if "project settings" in r]
    assert f"its project file {file_a} changed" in reason and "`restart`" in reason
    reply = daemon.call(m.Restart(str(script_a)))
    assert reply.max_heap_mb == 555
    after = daemon.call(m.Diagnostics(str(script_a), wait=20))
    assert not any("project settings" in r for r in after.freshness.reasons)


def test_an_edited_project_file_is_reported_by_an_answer_from_the_cache_too(daemon, two_projects):
    # A script older than the file system's timestamp granularity is answered from the cache with
    # one stat (the fast path): its project file is looked at all the same, within a second.
    hol_a, _, file_a, _, script_a, _ = two_projects
    first = daemon.call(m.Diagnostics(str(script_a), wait=20))
    # Until its inode changed two seconds ago (`files.RACY_NS`), a script is read again on every call.
    wait_until(lambda: time.time() - os.stat(script_a).st_ctime > 2.5, what="the script to be two seconds old")
    assert daemon.call(m.Diagnostics(str(script_a), wait=20)).cached
    file_a.write_text(f'holdir = "{hol_a}"\nmax_heap_mb = 555\n')

    def told() -> bool:
        again = daemon.call(m.Diagnostics(str(script_a), wait=20))
        assert again.server.pid == first.server.pid
        return any(f"its project file {file_a} changed" in r for r in again.freshness.reasons)
    wait_until(told, what="a cached answer to say its project file changed")


@pytest.mark.parametrize("problem", ["group-writable", "syntax", "daemon-setting", "unknown-key", "no-hol"])
def test_a_refused_project_file_names_why_while_the_other_project_works(daemon, two_projects, problem):
    _, hol_b, file_a, _, script_a, script_b = two_projects
    texts = {
        "syntax": 'max_heap_mb = 512\nholdir = "unterminated\n',
        "daemon-setting": "max_heap_mb = 512\nmemory_budget_mb = 9000\n",
        "unknown-key": "max_heap_mb = 512\nmax_heap = 9000\n",
        "no-hol": 'holdir = "nowhere"\n',
    }
    if problem == "group-writable":
        file_a.chmod(0o664)
    else:
        file_a.write_text(texts[problem])
    with pytest.raises(errors.ProjectError) as refused:
        daemon.call(m.Diagnostics(str(script_a), wait=20))
    said = str(refused.value)
    assert str(file_a) in said and refused.value.code == "project_file"
    assert {
        "group-writable": "writable by others (mode 0664)",
        "syntax": "line 2",
        "daemon-setting": "memory_budget_mb' is a setting of the daemon as a whole",
        "unknown-key": "did you mean 'max_heap_mb'?",
        "no-hol": "has no executable bin/hol",
    }[problem] in said
    if problem in ("daemon-setting", "unknown-key"):
        assert "line 2" in said
    ok = daemon.call(m.Diagnostics(str(script_b), wait=20))
    assert ok.verdict == "OK"
    [row] = daemon.call(m.Status()).sessions
    assert row.holdir == str(hol_b)


def test_a_symlinked_project_file_is_refused(daemon, tmp_path, write_script):
    hol_a = hol_tree(tmp_path / "HOL-A")
    real = tmp_path / "elsewhere.toml"
    real.write_text(f'holdir = "{hol_a}"\n')
    (tmp_path / "dev" / ".git").mkdir(parents=True)
    os.symlink(real, tmp_path / "dev" / "holsrv.toml")
    script = write_script(GOOD_SCRIPT, dir=tmp_path / "dev")
    with pytest.raises(errors.ProjectError, match="is a symbolic link, so it was ignored"):
        daemon.call(m.Diagnostics(str(script), wait=20))


def test_holctl_config_shows_each_setting_of_a_script_and_where_it_came_from(two_projects, monkeypatch, tmp_path):
    hol_a, _, file_a, _, script_a, _ = two_projects
    monkeypatch.setenv("HOLSRV_MAX_HEAP_MB", "4096")
    monkeypatch.setenv("HOLSRV_LETGO_S", "12")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "no-config"))
    monkeypatch.setenv("HOLSRV_SOCKET", str(tmp_path / "none.sock"))
    result = CliRunner().invoke(holctl_main, ["config", str(script_a)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"project file: {file_a} (sets holdir, max_heap_mb)" in lines
    assert f"HOL for {script_a.name}: {hol_a / 'bin' / 'hol'}" in lines
    line = {ln.split()[0]: ln for ln in lines if ln.startswith("  ")}
    assert "= 777" in line["max_heap_mb"] and f"project file {file_a}" in line["max_heap_mb"]  # over the environment
    assert "= 12" in line["letgo_s"] and "environment HOLSRV_LETGO_S" in line["letgo_s"]  # the project leaves it
    assert f"project file {file_a}" in line["hol_bin"]
