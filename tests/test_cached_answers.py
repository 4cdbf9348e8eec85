"""The fast path: a cached answer given at once, with nothing awaited, and the same as the ordinary path's."""

from __future__ import annotations

import time

import msgspec

from holsrv.files import content_hash
from holsrv.rpc import framing
from holsrv.rpc import messages as m

from conftest import GOOD_SCRIPT

TACTIC = (7, 3)  # `gen_tac` in GOOD_SCRIPT


def files_read_long_ago(daemon) -> None:
    """The daemon's file reader believes every read happened well after the file's last write: a file
    changed in the last two seconds is otherwise read and hashed on every call, never answered at once."""
    daemon.daemon.answers.scripts._clock_ns = lambda: time.time_ns() + 60 * 10**9


def wire_bytes(reply) -> bytes:
    """The reply's frame, its age (which moves on between two calls) left out."""
    fresh = msgspec.structs.replace(reply.freshness, age_s=0.0)
    return framing.encode(msgspec.structs.replace(reply, freshness=fresh))


async def _at_once(daemon, request):
    return daemon.daemon.dispatch.at_once(request, "test")


def test_a_cached_goal_state_is_answered_at_once_with_the_ordinary_paths_bytes(daemon, write_script):
    files_read_long_ago(daemon)
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    request = m.GoalState(str(path), *TACTIC)
    assert not daemon.call(request).cached
    with daemon.client() as client:
        fast = client.call(request)
    at_once = daemon.run(_at_once(daemon, request))
    ordinary = daemon.run(daemon.daemon.dispatch.answer(request, "test"))
    assert at_once is not None and fast.cached and fast.goals
    assert wire_bytes(fast) == wire_bytes(at_once) == wire_bytes(ordinary)


def test_the_fast_path_notices_a_file_changed_since_its_answer_was_cached(daemon, write_script):
    files_read_long_ago(daemon)
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    request = m.GoalState(str(path), *TACTIC)
    daemon.call(request)
    assert daemon.call(request).cached
    changed = GOOD_SCRIPT.replace("gen_tac >> simp[]", "gen_tac >> rw[]")
    path.write_text(changed, encoding="utf-8")
    after = daemon.call(request)
    assert after.content_hash == content_hash(changed.encode()) and not after.cached
    assert not after.freshness.may_be_stale
