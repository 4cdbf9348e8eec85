"""The fast path: a cached answer given at once, with nothing awaited, and the same as the ordinary path's."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator

import msgspec

from holsrv.disk.files import content_hash
from holsrv.rpc import framing
from holsrv.rpc import messages as m

from conftest import FAILING_SCRIPT, GOOD_SCRIPT

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


def test_a_cached_diagnostics_is_answered_at_once_with_the_ordinary_paths_bytes(daemon_factory, write_script):
    daemon = daemon_factory(prefetch_per_pass=0)  # nothing asked ahead re-caches the verdict meanwhile
    files_read_long_ago(daemon)
    path = write_script(FAILING_SCRIPT)
    request = m.Diagnostics(str(path), wait=20)
    first = daemon.call(request)
    assert first.complete and not first.cached and first.verdict == "FAILED"
    with daemon.client() as client:
        fast = client.call(request)
    at_once = daemon.run(_at_once(daemon, request))
    ordinary = daemon.run(daemon.daemon.dispatch.answer(request, "test"))
    assert at_once is not None and fast.cached and fast.diagnostics
    assert wire_bytes(fast) == wire_bytes(at_once) == wire_bytes(ordinary)


def test_a_diagnostics_that_waits_for_a_change_or_may_become_a_job_is_not_answered_at_once(daemon, write_script):
    files_read_long_ago(daemon)
    path = write_script(GOOD_SCRIPT)
    settled = daemon.call(m.Diagnostics(str(path), wait=20))
    assert daemon.run(_at_once(daemon, m.Diagnostics(str(path), wait=20))) is not None
    for request in (m.Diagnostics(str(path), wait=0.2, changed_since=settled.content_hash),
                    m.Diagnostics(str(path), wait=20, defer_after=0.0)):
        assert daemon.run(_at_once(daemon, request)) is None


def test_an_ancestor_built_just_now_shows_in_the_next_cached_answer(daemon, write_script, tmp_path):
    files_read_long_ago(daemon)
    built = tmp_path / "mylibTheory.uo"
    built.write_text("built")
    os.utime(built, (time.time() - 60, time.time() - 60))
    path = write_script(GOOD_SCRIPT.replace("Ancestors arithmetic", "Ancestors arithmetic mylib"))
    goal, verdict = m.GoalState(str(path), *TACTIC), m.Diagnostics(str(path), wait=20)
    daemon.call(verdict)
    daemon.call(goal)
    for request in (goal, verdict):
        clean = daemon.run(_at_once(daemon, request))
        assert clean is not None and not clean.freshness.may_be_stale
    os.utime(built)  # Holmake rebuilt it just now: no call has looked since
    for request in (goal, verdict):
        # Not at once: the ordinary path looks at the build (and starts the replacement) first.
        assert daemon.run(_at_once(daemon, request)) is None
        after = daemon.call(request)
        assert after.freshness.may_be_stale
        assert any("mylibTheory" in reason for reason in after.freshness.reasons), after.freshness.reasons


def test_a_client_pipelining_cached_questions_does_not_hold_the_loop_until_its_burst_ends(daemon, write_script):
    files_read_long_ago(daemon)
    path = write_script(GOOD_SCRIPT)
    daemon.call(m.Diagnostics(str(path), wait=20))
    request = m.GoalState(str(path), *TACTIC)
    daemon.call(request)
    assert daemon.run(_at_once(daemon, request)) is not None  # each of the burst is answered at once
    burst = 100  # their replies fit the socket's buffer: the daemon never waits for them to be read
    with _hello(daemon) as piper, _hello(daemon) as other:
        hits = daemon.call(m.Status()).cache_hits
        with _loop_held(daemon):  # both arrive before the daemon reads either
            piper.sendall(framing.encode(request) * burst)
            other.sendall(framing.encode(m.Status()))
        status = _reply(other)
        replies = [_reply(piper) for _ in range(burst)]
    assert all(isinstance(r, m.GoalStateResult) and r.cached for r in replies)
    # Status counts the cache hits so far: the burst answered one a turn of the loop, not all
    # that was buffered, while status was being made.
    during = status.cache_hits - hits
    assert during < burst / 2, f"{during} pipelined requests were answered while another client waited for one"


@contextlib.contextmanager
def _loop_held(daemon) -> Iterator[None]:
    """The daemon's loop blocked (for at most 15 s) until the block ends."""
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        entered.set()
        release.wait(15)

    daemon.loop.call_soon_threadsafe(hold)
    assert entered.wait(15), "the daemon's loop did not run the hold"
    try:
        yield
    finally:
        release.set()


@contextlib.contextmanager
def _hello(daemon) -> Iterator[socket.socket]:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(15)
        sock.connect(str(daemon.socket))
        sock.sendall(framing.encode(m.Hello(m.PROTOCOL_VERSION, "pipelining-test")))
        assert isinstance(_reply(sock), m.Welcome)
        yield sock


def _reply(sock: socket.socket):
    body = framing.recv_body(sock)
    assert body is not None, "the daemon closed the connection without a reply"
    return framing.decode(framing.reply_decoder, body)
