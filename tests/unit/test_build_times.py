"""Ancestors' build times are kept per directory and dropped when a theory is rebuilt."""

from __future__ import annotations

import os

import pytest

from holsrv.disk import ancestors

NAMES = ["mylib", "other"]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def built(path, when: float):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("built")
    os.utime(path, (when, when))
    return path


@pytest.fixture
def watched():
    times = ancestors.BuildTimes(clock=Clock())
    times.times([], ancestors.Path("/"))  # sets up the watch
    if not times.watching:
        pytest.skip("no inotify on this system: only the re-check interval applies")
    yield times
    times.close()


def test_build_times_are_read_once_and_kept(tmp_path):
    built(tmp_path / ".hol" / "objs" / "mylibTheory.uo", 1000)
    times = ancestors.BuildTimes(clock=Clock(), watch=False)
    for _ in range(3):
        assert times.times(NAMES, tmp_path) == {"mylib": 1000.0, "other": 0.0}
    assert times.computed == 2  # one look per ancestor, not one per call


def test_a_theory_rebuilt_in_place_is_noticed_at_once_through_the_watch(tmp_path, watched):
    uo = built(tmp_path / ".hol" / "objs" / "mylibTheory.uo", 1000)
    assert watched.times(NAMES, tmp_path)["mylib"] == 1000.0
    os.utime(uo, (2000, 2000))  # Holmake rebuilt it; the clock has not moved
    assert watched.times(NAMES, tmp_path)["mylib"] == 2000.0


def test_a_theory_built_where_there_was_no_objs_directory_is_noticed_at_once(tmp_path, watched):
    assert watched.times(NAMES, tmp_path)["other"] == 0.0
    built(tmp_path / ".hol" / "objs" / "otherTheory.dat", 1500)
    assert watched.times(NAMES, tmp_path)["other"] == 1500.0


def test_a_new_holmakefile_include_is_searched_at_once(tmp_path, watched):
    script_dir, lib = tmp_path / "proofs", tmp_path / "lib"
    script_dir.mkdir()
    built(lib / "otherTheory.uo", 1200)
    assert watched.times(NAMES, script_dir)["other"] == 0.0
    (script_dir / "Holmakefile").write_text("INCLUDES = ../lib\n")
    assert watched.times(NAMES, script_dir)["other"] == 1200.0


def test_a_rebuild_in_an_included_directory_is_noticed_at_once(tmp_path, watched):
    script_dir, lib = tmp_path / "proofs", tmp_path / "lib"
    script_dir.mkdir()
    (script_dir / "Holmakefile").write_text("INCLUDES = ../lib\n")
    dat = built(lib / ".hol" / "objs" / "otherTheory.dat", 1200)
    assert watched.times(NAMES, script_dir)["other"] == 1200.0
    os.utime(dat, (1300, 1300))
    assert watched.times(NAMES, script_dir)["other"] == 1300.0


def test_without_a_watch_a_rebuild_is_noticed_after_the_recheck_interval(tmp_path):
    clock = Clock()
    uo = built(tmp_path / "mylibTheory.uo", 1000)
    times = ancestors.BuildTimes(clock=clock, watch=False)
    assert times.times(NAMES, tmp_path)["mylib"] == 1000.0
    os.utime(uo, (2000, 2000))
    assert times.times(NAMES, tmp_path)["mylib"] == 1000.0  # kept: not re-read within the interval
    clock.now += ancestors.RECHECK_S
    assert times.times(NAMES, tmp_path)["mylib"] == 2000.0


def test_a_rebuild_after_the_server_loaded_it_is_reported_through_the_cache(tmp_path, watched):
    uo = built(tmp_path / "mylibTheory.uo", 1000)
    watch = ancestors.Watch()
    watch.loaded(watched.times(NAMES, tmp_path))
    assert watch.rebuilt(watched.times(NAMES, tmp_path)) == []
    os.utime(uo, (2000, 2000))
    assert watch.rebuilt(watched.times(NAMES, tmp_path)) == ["mylibTheory"]


def test_the_serial_of_a_directorys_times_holds_until_a_build_is_seen_or_the_recheck_is_due(tmp_path, watched):
    uo = built(tmp_path / ".hol" / "objs" / "mylibTheory.uo", 1000)
    assert watched.serial(tmp_path) is None  # never asked: the next `times` reads them
    watched.times(NAMES, tmp_path)
    serial = watched.serial(tmp_path)
    assert serial is not None and watched.serial(tmp_path) == serial
    os.utime(uo, (2000, 2000))  # Holmake rebuilt it; the clock has not moved
    assert watched.serial(tmp_path) is None
    watched.times(NAMES, tmp_path)
    again = watched.serial(tmp_path)
    assert again is not None and again != serial
    watched._clock.now += ancestors.WATCHED_RECHECK_S  # the safety net's re-read is due
    assert watched.serial(tmp_path) is None


def _development(root):
    """base ← mid ← top in three directories, each Holmakefile naming the one below; base and mid built."""
    for name, below in (("base", None), ("mid", "base"), ("top", "mid")):
        (root / name).mkdir()
        header = f"Ancestors {below}\n" if below else ""
        (root / name / f"{name}Script.sml").write_text(f"Theory {name}\n{header}\n")
        if below:
            (root / name / "Holmakefile").write_text(f"INCLUDES = ../{below}\n")
    built(root / "base" / ".hol" / "objs" / "baseTheory.uo", 1000)
    built(root / "mid" / ".hol" / "objs" / "midTheory.uo", 1100)
    return root / "top"


def test_ancestors_are_followed_however_deep_and_a_rebuild_two_levels_up_is_noticed(tmp_path, watched):
    top = _development(tmp_path)
    dev = watched.development(["mid"], top)
    assert dev.times == {"mid": 1100.0, "base": 1000.0} and dev.out_of_date() == {}
    assert dev.scripts["mid"] == tmp_path / "mid" / "midScript.sml" and dev.parents["mid"] == ["base"]
    computed = watched.computed
    assert watched.development(["mid"], top) is dev and watched.computed == computed  # kept while nothing changes
    serial = watched.serial(top)

    os.utime(tmp_path / "base" / ".hol" / "objs" / "baseTheory.uo", (1200, 1200))  # base rebuilt, mid not
    assert watched.serial(top) != serial  # base's directory is not top's, nor in its INCLUDES
    dev = watched.development(["mid"], top)
    assert dev.times["base"] == 1200.0 and dev.out_of_date() == {"mid": ["base"]}
    assert any(place.is_relative_to(tmp_path / "base") for place in watched.places(top))


def test_only_the_lowest_theory_built_against_an_old_ancestor_is_named(tmp_path):
    dev = ancestors.Development(times={"top": 1.0, "mid": 2.0, "base": 3.0},
                                parents={"top": ["mid"], "mid": ["base"], "base": []})
    assert dev.out_of_date() == {"mid": ["base"]}  # top waits for mid anyway
