"""The answers' counter and histogram, kept as plain numbers, read as the client library's would be."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from holsrv.metrics.metrics import ANSWER_BUCKETS, Answers, Metrics
from holsrv.rpc import messages as m

# Bounds themselves (a bucket's `le` holds its bound), between them, zero, and past the last.
SECONDS = [0.0, 0.001, 0.0010001, 0.004, 0.005, 0.3, 1.0, 59.9, 600.0, 601.0, 0.025]


def _lines(registry: CollectorRegistry) -> list[str]:
    return sorted(line for line in generate_latest(registry).decode().splitlines()
                  if line and "_created" not in line and not line.startswith("#"))


def test_the_answers_exposition_is_the_client_librarys_for_the_same_answers():
    ours = CollectorRegistry()
    metrics = Metrics.__new__(Metrics)  # the counting alone: no daemon behind it
    metrics._by_kind = {}
    metrics.errors = metrics.refused = None  # type: ignore[assignment]
    ours.register(Answers(metrics._by_kind))
    theirs = CollectorRegistry()
    count = Counter("holsrv_answers", "Requests answered, by request kind (errors included).", ["kind"],
                    registry=theirs)
    hist = Histogram("holsrv_answer_duration_seconds", "Time to answer a request, by kind.", ["kind"],
                     buckets=ANSWER_BUCKETS, registry=theirs)
    requests = [m.GoalState("a.sml", 1, 1), m.Diagnostics("a.sml")]
    for i, seconds in enumerate(SECONDS):
        request = requests[i % 2]
        metrics.answered(request, m.Welcome(1, "x", 1), seconds)  # any reply but an error
        kind = type(request).__struct_config__.tag
        count.labels(kind).inc()
        hist.labels(kind).observe(seconds)
    assert _lines(ours) == _lines(theirs)
