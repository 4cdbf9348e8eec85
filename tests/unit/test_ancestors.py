"""Finding ancestor theories rebuilt after a HOL server loaded them."""

import os

from holsrv.disk import ancestors, holproject

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


OLD_STYLE = """\
open HolKernel Parse boolLib bossLib
     arithmeticTheory mylibTheory;
(* open commentedTheory; *)
val s = "open quotedTheory";

val _ = new_theory "demo";
open laterTheory;
"""


def test_an_old_style_script_names_its_ancestors_by_the_theories_it_opens():
    assert ancestors.ancestors(OLD_STYLE) == ["arithmetic", "mylib"]
    # Both styles in one script: the header first, each name once.
    assert ancestors.ancestors("Theory x\nAncestors other mylib\n\nopen mylibTheory extraTheory;\n") == [
        "other", "mylib", "extra"]


def test_a_rebuilt_theory_an_old_style_script_opens_is_reported(tmp_path):
    built = tmp_path / "mylibTheory.uo"
    built.write_text("old")
    os.utime(built, (1000, 1000))
    watch = ancestors.Watch()
    watch.loaded(ancestors.built_times(OLD_STYLE, tmp_path))
    os.utime(built, (2000, 2000))
    assert watch.rebuilt(ancestors.built_times(OLD_STYLE, tmp_path)) == ["mylibTheory"]


def _project(tmp_path):
    """root/holproject.toml with proofs/ (the script), lib/deep/, an excluded dir,
    a nested project, and an external project beside the root."""
    root = tmp_path / "root"
    for sub in ("proofs", "lib/deep/.hol/objs", "scratch", "nested", "vendored"):
        (root / sub).mkdir(parents=True)
    (tmp_path / "ext" / "part").mkdir(parents=True)
    (tmp_path / "inc").mkdir()
    (root / "holproject.toml").write_text(
        'name = "demo"\nexclude = ["scratch"]\nexternal_includes = ["../inc", "$(HOLDIR)/src/x"]\n'
        '[projects.ext]\npath = "../ext"\n'
    )
    (root / "nested" / "holproject.toml").write_text('name = "other"\n')
    (tmp_path / "ext" / "holproject.toml").write_text('name = "ext"\n')
    return root


def test_a_holproject_toml_project_is_searched_as_holmake_builds_it(tmp_path):
    root = _project(tmp_path)
    found = ancestors.include_dirs(root / "proofs")
    assert found[0] == root / "proofs"
    assert set(found) == {root / "proofs", root, root / "lib", root / "lib" / "deep", root / "vendored",
                          tmp_path / "ext", tmp_path / "ext" / "part", tmp_path / "inc"}


def test_a_theory_built_deep_in_the_project_counts_as_the_scripts_ancestor(tmp_path):
    root = _project(tmp_path)
    (root / "lib" / "deep" / ".hol" / "objs" / "mylibTheory.uo").write_text("built")
    (root / "scratch" / "otherTheory.uo").write_text("excluded: not what Holmake would load")
    times = ancestors.built_times(HEADER, root / "proofs")
    assert times["mylib"] > 0 and times["other"] == 0


def test_a_project_with_holmake_off_or_a_broken_manifest_adds_only_what_it_can(tmp_path):
    root = _project(tmp_path)
    (root / "holproject.toml").write_text('holmake = false\nexternal_includes = ["../inc"]\n')
    assert ancestors.include_dirs(root / "proofs") == [root / "proofs", tmp_path / "inc"]
    (root / "holproject.toml").write_text("name = [unclosed\n")
    assert ancestors.include_dirs(root / "proofs") == [root / "proofs"]


def test_a_huge_project_tree_is_walked_only_so_far(tmp_path, monkeypatch):
    monkeypatch.setattr(holproject, "MAX_PROJECT_DIRS", 5)
    (tmp_path / "holproject.toml").write_text('name = "big"\n')
    for n in range(20):
        (tmp_path / f"d{n:02}").mkdir()
    assert len(holproject.dirs(tmp_path)) == 5
