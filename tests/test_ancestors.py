"""Finding ancestor theories rebuilt after a HOL server loaded them."""

import os
import time

from holsrv import ancestors

HEADER = "Theory demo\nAncestors\n  arithmetic mylib[qualified]\n  other\n\nTheorem t:\n  T\nProof\n  simp[]\nQED\n"


def test_ancestors_are_read_from_a_header_over_several_lines():
    assert ancestors.ancestors(HEADER) == ["arithmetic", "mylib", "other"]
    assert ancestors.ancestors("Theory x\nAncestors list\nLibs bossLib\n") == ["list"]
    assert ancestors.ancestors("Theory x\n") == []


def test_a_theory_built_after_the_server_started_is_reported(tmp_path):
    started = time.time()
    objs = tmp_path / ".hol" / "objs"
    objs.mkdir(parents=True)
    (objs / "mylibTheory.uo").write_text("old")
    os.utime(objs / "mylibTheory.uo", (started - 60, started - 60))
    assert ancestors.rebuilt_since(HEADER, tmp_path, started) == []
    os.utime(objs / "mylibTheory.uo", (started + 5, started + 5))
    assert ancestors.rebuilt_since(HEADER, tmp_path, started) == ["mylibTheory"]


def test_holmakefile_includes_are_searched_too(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    script_dir = tmp_path / "proofs"
    script_dir.mkdir()
    (script_dir / "Holmakefile").write_text("INCLUDES = ../lib \\\n  $(HOLDIR)/examples/nothing\n")
    (lib / "otherTheory.dat").write_text("new")
    assert ancestors.rebuilt_since(HEADER, script_dir, time.time() - 60) == ["otherTheory"]
