"""Which of HOL's services a server really has, found by asking it a question whose answer is known.

A `hol lsp` can be built without a backend and still take the request: the
server of the issue that led here answered `$/hol/search` with `[]` for
`FILTER` while `DB.find` found `list.FILTER_APPEND_DISTRIB`, `workspace/symbol`
with no ancestor's name, hover with `null`; the July server answers -32600
`unknown method` (docs/protocol.md#json-rpc, #the-july-2026-server).  An empty answer alone cannot tell
"no backend" from "no match", so each service is asked once per server about
something its answer must contain:

* search: `'bool' "TRUTH"` (every heap holds boolTheory's `TRUTH`);
* symbols: `workspace/symbol` for `TRUTH`, which must name an ancestor's theorem;
* hover and definition: a place of the script the compile has passed, given
  by the caller (a tactic of a proof HOL checked; a theorem's own name).

`Services` keeps what was learnt, one probe at a time per service, each
under a deadline.  Pure but for the calls it is given.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Awaitable, Callable

from holsrv.errors import HolsrvError, LspError
from holsrv.lsp.quirks import is_unknown_method

# What the probes ask about: boolTheory's `⊢ T`, in every HOL heap.
KNOWN_THEOREM = "TRUTH"
KNOWN_THEORY = "bool"
SEARCH_PROBE = f"'{KNOWN_THEORY}' \"{KNOWN_THEOREM}\""
PROBE_S = 10.0  # each probe's deadline


class Service(enum.Enum):
    COMPILE = "compile and verdicts"
    GOALS = "goal states"
    HOVER = "hover"
    DEFINITION = "definition"
    SEARCH = "search"
    SYMBOLS = "symbols"
    COMPLETION = "completion"


class Support(enum.Enum):
    WORKS = "works"
    LACKS = "lacking"
    UNKNOWN = "unknown"  # the probe could not tell (no place to ask about, a timeout)


class Finding:
    """One service's state and the evidence, a sentence (`why`) an answer can quote."""

    def __init__(self, support: Support, why: str) -> None:
        self.support, self.why = support, why

    def __repr__(self) -> str:
        return f"Finding({self.support.value}, {self.why!r})"


Probe = Callable[[], Awaitable[Finding]]


class Services:
    """What one server was found to do, by service; each probed at most once (until it says)."""

    def __init__(self) -> None:
        self.found: dict[Service, Finding] = {}
        self._probing: dict[Service, asyncio.Task[Finding]] = {}

    def lacks(self, service: Service) -> bool:
        finding = self.found.get(service)
        return finding is not None and finding.support is Support.LACKS

    def learn(self, service: Service, finding: Finding) -> Finding:
        """Keep what an answer itself showed (a -32600, a match): no probe needed for it."""
        if finding.support is not Support.UNKNOWN:
            self.found[service] = finding
        return finding

    async def probe(self, service: Service, ask: Probe) -> Finding:
        """What `service` does here: known, or learnt by `ask` (shared by concurrent callers).
        An UNKNOWN outcome is not kept, so a later call may ask again."""
        known = self.found.get(service)
        if known is not None:
            return known
        task = self._probing.get(service)
        if task is None:
            task = asyncio.ensure_future(ask())
            self._probing[service] = task
            task.add_done_callback(lambda _: self._probing.pop(service, None))
        finding = await asyncio.shield(task)
        return self.learn(service, finding)

    def shown(self) -> dict[str, str]:
        """For `status`: each service learnt so far, as "works" or "lacking"."""
        return {s.value: f.support.value for s, f in self.found.items()}


def unknown_method(service: Service, method: str) -> Finding:
    return Finding(Support.LACKS, f"this HOL server does not know `{method}` (error -32600): it has no "
                                  f"{service.value} backend")


async def probe_search(search: Callable[[str, int, float], Awaitable[list]], timeout: float = PROBE_S) -> Finding:
    """Search for boolTheory's TRUTH: no hit means the backend is missing, not that nothing matches."""
    method = "$/hol/search"
    try:
        hits = await search(SEARCH_PROBE, 5, timeout)
    except LspError as err:
        if is_unknown_method(err, method):
            return unknown_method(Service.SEARCH, method)
        return Finding(Support.UNKNOWN, f"`{method}` failed: {err}")
    except HolsrvError as err:
        return Finding(Support.UNKNOWN, f"`{method}` got no answer: {err}")
    if hits:
        return Finding(Support.WORKS, f"`{method}` found {KNOWN_THEORY}.{KNOWN_THEOREM}")
    return Finding(Support.LACKS, f"this HOL server's theorem search (`{method}`) finds nothing, not even "
                                  f"{KNOWN_THEORY}.{KNOWN_THEOREM}, which every HOL holds: it has no search backend")


async def probe_symbols(symbols: Callable[[str, float], Awaitable[list]], timeout: float = PROBE_S) -> Finding:
    """`workspace/symbol` for TRUTH: without an ancestor's entry it lists only the open files' names."""
    method = "workspace/symbol"
    try:
        found = await symbols(KNOWN_THEOREM, timeout)
    except LspError as err:
        if is_unknown_method(err, method):
            return unknown_method(Service.SYMBOLS, method)
        return Finding(Support.UNKNOWN, f"`{method}` failed: {err}")
    except HolsrvError as err:
        return Finding(Support.UNKNOWN, f"`{method}` got no answer: {err}")
    if any(getattr(s, "container_name", "") != "this file" and s.name == KNOWN_THEOREM for s in found):
        return Finding(Support.WORKS, f"`{method}` names {KNOWN_THEORY}Theory's {KNOWN_THEOREM}")
    return Finding(Support.LACKS, f"this HOL server's `{method}` does not name the ancestors' theorems (not even "
                                  f"{KNOWN_THEORY}Theory's {KNOWN_THEOREM}), only the open files'")


async def probe_at(service: Service, method: str, ask: Callable[[], Awaitable[object]], what: str) -> Finding:
    """Hover or definition at a place that must have an answer (`what` names it for the message)."""
    try:
        answer = await ask()
    except LspError as err:
        if is_unknown_method(err, method):
            return unknown_method(service, method)
        return Finding(Support.UNKNOWN, f"`{method}` failed: {err}")
    except HolsrvError as err:
        return Finding(Support.UNKNOWN, f"`{method}` got no answer: {err}")
    if answer:
        return Finding(Support.WORKS, f"`{method}` answered for {what}")
    return Finding(Support.LACKS, f"this HOL server's {service.value} (`{method}`) answers nothing, even for "
                                  f"{what}: it has no {service.value} backend")
