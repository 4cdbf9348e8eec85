"""Finding ancestor theories rebuilt after a HOL server loaded them."""

import os

from holsrv import ancestors

HEADER = "Theory demo\nAncestors\n  arithmetic mylib[qualified]\n  other\n\nTheorem t:\n  T\nProof\n  simp[]\nQED\n"


def test_ancestors_are_read_from_a_header_over_several_lines():
    assert ancestors.ancestors(HEADER) == ["arithmetic", "mylib", "other"]
    assert ancestors.ancestors("Theory x\nAncestors list\nLibs bossLib\n") == ["list"]
    assert ancestors.ancestors("Theory x\n") == []


def test_a_theory_built_again_after_the_server_loaded_it_is_reported(tmp_path):
    objs = tmp_path / ".hol" / "objs"
    objs.mkdir(parents=True)
    built = objs / "mylibTheory.uo"
    built.write_text("old")
    os.utime(built, (1000, 1000))
    watch = ancestors.Watch()
    watch.loaded(ancestors.built_times(HEADER, tmp_path))
    assert watch.rebuilt(ancestors.built_times(HEADER, tmp_path)) == []
    os.utime(built, (2000, 2000))
    assert watch.rebuilt(ancestors.built_times(HEADER, tmp_path)) == ["mylibTheory"]


def test_a_theory_that_was_missing_when_loaded_is_not_called_rebuilt(tmp_path):
    watch = ancestors.Watch()
    watch.loaded(ancestors.built_times(HEADER, tmp_path))  # nothing built yet (a blocked file)
    (tmp_path / "mylibTheory.uo").write_text("first build")
    assert watch.rebuilt(ancestors.built_times(HEADER, tmp_path)) == []


def test_holmakefile_includes_are_searched_too(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    script_dir = tmp_path / "proofs"
    script_dir.mkdir()
    (script_dir / "Holmakefile").write_text("INCLUDES = ../lib \\\n  $(HOLDIR)/examples/nothing\n")
    (lib / "otherTheory.dat").write_text("new")
    assert ancestors.built_times(HEADER, script_dir)["other"] > 0
