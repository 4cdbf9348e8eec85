"""The daemon's metrics, in Prometheus's conventions (`holsrv_…`, base units, `_total` counters).

Each daemon has its own `CollectorRegistry`, never the process-wide one:
tests run several daemons in one process, and a daemon's numbers are its own.
Two kinds of metric:

- events, counted where they happen: answers by request kind and their
  latency, errors by code, admissions refused, Holmake runs and their time;
- state, read at scrape time by `State` from what status shows (the servers
  by state and their footprints, the memory against the budget, how many
  more servers fit, connected clients by kind) and from counters the pool and
  the caches already keep (runaways, evictions, replacements, restarts,
  cache and prefetch hits).  Reading them at a scrape costs nothing between
  scrapes and cannot disagree with status.

Every label is bounded: request kinds and error codes are the wire's and
errors.py's, states the status rows', client kinds three and "other".  No
label names a file or a pid: the servers' footprints are added up by state,
beside the largest one.
"""

from __future__ import annotations

import bisect
import itertools
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import Counter as PromCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from holsrv.answers.common import Context
from holsrv.errors import MemoryBudget, ServerBusy
from holsrv.rpc import messages as m

MB = 1024 * 1024
# An answer from the cache takes well under a millisecond; a compile's diagnostics, minutes.
ANSWER_BUCKETS = (0.001, 0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 180.0, 600.0)
HOLMAKE_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0)
CLIENT_KINDS = ("holctl", "holmcp", "editor")
_BOUNDS = [*map(floatToGoString, ANSWER_BUCKETS), "+Inf"]  # the `le` labels, as the client library writes them


def client_kind(name: str) -> str:
    """The kind of client a hello's name says: an editor (`holctl lsp`), holmcp, holctl, or other."""
    if name.startswith("holctl lsp"):
        return "editor"
    for kind in ("holmcp", "holctl"):
        if name == kind or name.startswith((kind + " ", kind + "-")):
            return kind
    return "other"


def request_kind(request: m.Request) -> str:
    """The request's wire name (`diagnostics`, `goalState`, ...): one of a fixed set."""
    return str(type(request).__struct_config__.tag)


class Metrics:
    """One daemon's registry: the event metrics, and the collector of its state.

    `clients` gives the names of the connected clients' hellos (the daemon's connections).
    Holmake's times come from the pool's builds, which the daemon has tell `holmake_seconds`."""

    def __init__(self, answers: Context, clients: Callable[[], list[str]]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._by_kind: dict[type, _Answered] = {}  # answers by request kind: `answered`, `Answers`
        self.registry.register(Answers(self._by_kind))
        self.errors = PromCounter("holsrv_errors", "Error replies, by error code (docs/errors.md).", ["code"],
                                  registry=self.registry)
        self.refused = PromCounter("holsrv_admissions_refused",
                                   "Calls refused a server: no room within max_servers (servers_busy) or the "
                                   "memory budget (memory_budget).", ["reason"], registry=self.registry)
        self.holmake_seconds = Histogram("holsrv_holmake_duration_seconds", "Holmake runs and their time.",
                                         buckets=HOLMAKE_BUCKETS, registry=self.registry)
        self.registry.register(State(answers, clients))

    def answered(self, request: m.Request, reply: m.Reply, seconds: float) -> None:
        """Count one answer: its kind, its time, and its error code if it is an error."""
        counted = self._by_kind.get(type(request))
        if counted is None:
            counted = self._by_kind[type(request)] = _Answered(request_kind(request), time.time())
        seconds = max(0.0, seconds)
        counted.count += 1
        counted.sum += seconds
        counted.buckets[bisect.bisect_left(ANSWER_BUCKETS, seconds)] += 1
        if isinstance(reply, m.ErrorReply):
            self.errors.labels(reply.code).inc()
            if reply.code in _REFUSALS:
                self.refused.labels(reply.code).inc()

    def text(self) -> str:
        """The exposition text (format 0.0.4) of everything, the state read now."""
        return generate_latest(self.registry).decode("utf-8")


_REFUSALS = {ServerBusy.code, MemoryBudget.code}


@dataclass(slots=True)
class _Answered:
    """One request kind's answers: how many, their time, and how many fell in each of ANSWER_BUCKETS
    (the last: above them all)."""

    kind: str
    created: float  # when the first was counted (the `_created` sample)
    count: int = 0
    sum: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(ANSWER_BUCKETS) + 1))


class Answers(Collector):
    """`holsrv_answers_total` and `holsrv_answer_duration_seconds`, as a Counter and a Histogram with a
    `kind` label would give them, from plain numbers the event loop adds to with no lock: every
    answer is counted, a cached one in tens of microseconds, and the client library's `inc` and
    `observe` (each takes a lock) were a fifth of that.  The daemon counts and scrapes on its one
    event loop thread, so nothing else touches them."""

    def __init__(self, by_kind: dict[type, _Answered]) -> None:
        self.by_kind = by_kind

    def collect(self) -> Iterable[Metric]:
        answers = CounterMetricFamily("holsrv_answers", "Requests answered, by request kind (errors included).",
                                      labels=["kind"])
        seconds = HistogramMetricFamily("holsrv_answer_duration_seconds", "Time to answer a request, by kind.",
                                        labels=["kind"])
        for counted in list(self.by_kind.values()):
            answers.add_metric([counted.kind], counted.count, created=counted.created)
            cumulative = itertools.accumulate(counted.buckets)
            seconds.add_metric([counted.kind], list(zip(_BOUNDS, cumulative, strict=True)), counted.sum)
        return [answers, seconds]


class State(Collector):
    """The daemon's state at scrape time, as status shows it."""

    def __init__(self, answers: Context, clients: Callable[[], list[str]]) -> None:
        self.ctx = answers
        self.clients = clients

    def collect(self) -> Iterable[Metric]:
        ctx = self.ctx
        pool, settings = ctx.pool, ctx.settings
        rows = pool.status_rows(pool.clock())
        servers = GaugeMetricFamily("holsrv_servers", "HOL servers, by state (as `holctl status` shows them).",
                                    labels=["state"])
        for state, count in sorted(Counter(row.state for row in rows).items()):
            servers.add_metric([state], count)
        yield servers
        yield from _footprints([(row.state, row.footprint_mb) for row in rows if row.footprint_mb is not None])
        yield GaugeMetricFamily("holsrv_servers_max", "At most this many servers run at once (max_servers).",
                                value=settings.max_servers)
        yield GaugeMetricFamily("holsrv_memory_budget_bytes", "The fleet's memory budget; 0: none.",
                                value=settings.memory_budget_mb * MB)
        yield GaugeMetricFamily("holsrv_memory_used_bytes",
                                "What the running servers use against the budget (measured, else expected).",
                                value=pool.memory_held_mb() * MB)
        yield GaugeMetricFamily("holsrv_server_usual_footprint_bytes", "What a new server is expected to take.",
                                value=pool.admission.expected_mb(settings.max_heap_mb) * MB)
        yield GaugeMetricFamily("holsrv_servers_fit", "How many more servers of the usual size fit now.",
                                value=pool.admission.fit(pool.live(), settings.max_heap_mb))
        kinds = Counter(client_kind(name) for name in self.clients())
        clients = GaugeMetricFamily("holsrv_clients", "Connected clients, by kind.", labels=["kind"])
        for kind in (*CLIENT_KINDS, "other"):
            clients.add_metric([kind], kinds.get(kind, 0))
        yield clients
        yield _counter("holsrv_runaways", "Servers replaced as runaways (see `holctl status`).", pool.runaways)
        yield _counter("holsrv_evictions", "Idle servers stopped to make room for another.", pool.evictions)
        yield _counter("holsrv_replacements", "Servers replaced by a successor after their ancestors were rebuilt.",
                       pool.replacer.switched)
        yield _counter("holsrv_restarts", "Servers started again for a file whose server had ended.",
                       pool.history.restarted)
        yield _counter("holsrv_cache_hits", "Answers given from the cache of settled answers.", ctx.cache.hits)
        yield _counter("holsrv_cache_misses", "Cacheable questions not in the cache.", ctx.cache.misses)
        yield _counter("holsrv_prefetch_asked", "Goal states asked for ahead of a call.", ctx.prefetches.asked)
        yield _counter("holsrv_prefetch_hits", "Calls answered by a goal state asked for ahead.", ctx.prefetches.hits)
        yield GaugeMetricFamily("holsrv_holmake_running", "Holmake runs in progress.", value=len(pool.builds.running))


def _counter(name: str, documentation: str, value: float) -> CounterMetricFamily:
    return CounterMetricFamily(name, documentation, value=value)


def _footprints(found: list[tuple[str, float]]) -> Iterable[Metric]:
    """The servers' footprints now: their sum by state, and the largest one (no label per server)."""
    total = GaugeMetricFamily("holsrv_servers_footprint_bytes",
                              "The running servers' footprints (resident + swapped) added up, by state.",
                              labels=["state"])
    for state in sorted({state for state, _ in found}):
        total.add_metric([state], sum(mb for s, mb in found if s == state) * MB)
    yield total
    yield GaugeMetricFamily("holsrv_server_footprint_largest_bytes", "The largest running server's footprint.",
                            value=max((mb for _, mb in found), default=0.0) * MB)
