"""The rules of a cached answer, pinned where they are written (`answers.cache`), which
the ordinary path and the fast path both use."""

from __future__ import annotations

import functools
from types import SimpleNamespace

from holsrv.answers import cache
from holsrv.answers.cache import AnswerCache
from holsrv.rpc import messages as m
from holsrv.server.session import Session

SERVER = m.ServerNote(pid=7, start="warm")


def _answer(content: str = "abc") -> m.GoalStateResult:
    return m.GoalStateResult(file="/p/aScript.sml", content_hash=content, line=3, column=None, state="goals",
                             message="", server=m.ServerNote(pid=5, start="started"))


def _session(ident: int = 1, events: int = 0, publishes: int = 0) -> SimpleNamespace:
    """What a key reads of a server: its identity and how much it has said."""
    session = SimpleNamespace(id=ident, _epoch=0, file=SimpleNamespace(events=events, publishes=publishes))
    session.cache_key = functools.partial(Session.cache_key, session)
    return session


def test_an_unsettled_answer_is_never_stored():
    answers = AnswerCache(8)
    assert answers.keep("k", _answer(), settled=False) is False
    assert "k" not in answers and answers.hit("k", SERVER) is None


def test_a_settled_answer_is_given_back_marked_cached_with_its_server_and_age():
    now = [100.0]
    answers = AnswerCache(8, clock=lambda: now[0])
    stored = _answer()
    assert answers.keep("k", stored, settled=True) is True
    now[0] += 2.5
    given = answers.hit("k", SERVER)
    assert given.cached and given.server == SERVER
    assert given.freshness == m.Freshness("abc", age_s=2.5)
    assert not stored.cached  # a copy: the cache keeps the answer as it was put
    assert (answers.hits, answers.misses) == (1, 0)


def test_a_look_the_ordinary_path_repeats_on_a_miss_does_not_count_it_twice():
    answers = AnswerCache(8)
    assert answers.look("k") is None  # the fast path's
    assert answers.hit("k", SERVER) is None
    assert answers.misses == 1


def test_the_fast_path_and_the_ordinary_path_make_the_same_reply_of_a_hit():
    now = [100.0]
    answers = AnswerCache(8, clock=lambda: now[0])
    answers.keep("k", _answer(), settled=True)
    now[0] += 1.25
    cached, age = answers.look("k")
    assert cache.given(cached, SERVER, m.Freshness("abc", age_s=age)) == answers.hit("k", SERVER)


def test_an_edit_a_new_server_or_news_from_it_invalidates_a_key():
    session = _session()
    key = cache.goal_key(session, "h1", 3, None)
    assert key == cache.goal_key(_session(), "h1", 3, None)
    assert key != cache.goal_key(session, "h2", 3, None)  # an edit
    assert key != cache.goal_key(_session(ident=2), "h1", 3, None)  # a new server
    assert key != cache.goal_key(_session(events=1), "h1", 3, None)  # it said more
    assert key != cache.goal_key(session, "h1", 3, 1)  # another question


def test_published_diagnostics_change_no_goal_state_but_every_diagnostics_answer(tmp_path):
    session, told = _session(), _session(events=1, publishes=1)
    session.path = told.path = tmp_path / "aScript.sml"  # no git repository: no HEAD in the key
    assert cache.goal_key(session, "h1", 3, None) == cache.goal_key(told, "h1", 3, None)
    assert cache.diagnostics_key(session, "h1", ()) != cache.diagnostics_key(told, "h1", ())
    assert cache.diagnostics_key(session, "h1", ()) != cache.diagnostics_key(session, "h1", ("rebuilt",))
