"""The call protocol both clients share: the hello, what a reply frame means,
and how long a request's reply may take from a daemon's own limits.

Imports only the standard library and msgspec (a test checks).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import assert_never

from holsrv import __version__
from holsrv.errors import ProtocolMismatch, error_for_code
from holsrv.rpc import limits
from holsrv.rpc.messages import (
    PROTOCOL_VERSION,
    Completion,
    Definition,
    Diagnostics,
    DocumentSymbol,
    EditorAttach,
    ErrorReply,
    Eval,
    GoalDiff,
    GoalState,
    Hello,
    Holes,
    Holmake,
    Hover,
    Job,
    Logs,
    Metrics,
    Progress,
    References,
    Reply,
    Request,
    Restart,
    RestartDaemon,
    Result,
    RetryCompile,
    Search,
    Shutdown,
    Status,
    Stop,
    Try,
    Uses,
    Verify,
    Welcome,
    WorkspaceSymbol,
)

# On top of the daemon's own limits: the socket, waiting for a lease, syncing
# the text, and stopping an idle server to make room.
REPLY_MARGIN_S = 30.0
# A daemon older than the limits in Welcome sends zeros; these were its defaults.
FALLBACK_REQUEST_TIMEOUT_S = 60.0
FALLBACK_LOOKUP_WAIT_S = 25.0
FALLBACK_START_WAIT_S = 25.0
FALLBACK_HOLMAKE_TIMEOUT_S = 1800.0  # a daemon that does not say its holmake_timeout_s
FALLBACK_TRY_TIMEOUT_S = 30.0
FALLBACK_TRIAL_WAIT_S = 30.0
# The theorem-database questions a search or a uses asks through eval, at most
# (holsrv.answers.scope, .search and .uses bound each).
SEARCH_DB_S = 10.0 + 2 * 30.0
USES_DB_S = 10.0 + 2 * 15.0
# What a client passes on in Hello.settings besides every HOLSRV_* variable:
# the names the reference tool reads, which the daemon also honours.
REFERENCE_SETTINGS = ("HOL_BIN", "HOLDIR", "HOL_LSP_EXTRA_PATH", "HOL_LSP_MCP_MAX_SERVERS")


def given_settings(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings this client was given in its environment, for Hello.settings.

    A daemon started by another client has its own; it answers with a warning
    for each that differs, instead of the client's being ignored in silence.
    """
    env = os.environ if environ is None else environ
    return {k: v for k, v in sorted(env.items()) if k.startswith("HOLSRV_") or k in REFERENCE_SETTINGS}


def hello(name: str, settings: Mapping[str, str] | None = None) -> Hello:
    """The first frame of a connection: our protocol, name and given settings."""
    return Hello(PROTOCOL_VERSION, name, __version__, dict(given_settings() if settings is None else settings))


def welcomed(reply: Reply) -> Welcome:
    """The daemon's answer to hello, or the error it means."""
    if isinstance(reply, ErrorReply):
        raise error_for_code(reply.code, reply.message, reply.detail)
    if not isinstance(reply, Welcome):
        raise ProtocolMismatch(f"the daemon answered hello with {type(reply).__name__}")
    if reply.protocol != PROTOCOL_VERSION:
        # A daemon refuses a hello of another protocol itself; one that welcomed us anyway
        # would misread our requests, so the client refuses it in the same words.
        raise ProtocolMismatch(
            f"protocol mismatch: the daemon (holsrv {reply.daemon_version}, pid {reply.pid}) speaks protocol "
            f"{reply.protocol}, this client ({__version__}) speaks {PROTOCOL_VERSION}. Restart the daemon so it "
            f"matches the installed clients: stop it with `kill {reply.pid}` (or `systemctl --user restart "
            "holsrv`); the next call starts a matching one."
        )
    return reply


def result_of(request: Request, reply: Reply) -> Result:
    """The result a reply frame carries; an ErrorReply becomes its error."""
    if isinstance(reply, ErrorReply):
        raise error_for_code(reply.code, reply.message, reply.detail)
    if isinstance(reply, Welcome | Progress):
        raise ProtocolMismatch(f"the daemon answered {type(request).__name__} with a {type(reply).__name__}")
    return reply


# How long a daemon checks that its new code starts before it restarts in place (the daemon's bound).
RESTART_CHECK_S = 30.0


def reply_timeout(request: Request, welcome: Welcome) -> float:
    """How long to wait for `request`'s reply from the daemon that sent `welcome`.

    The sum of every wait the daemon may spend on it, plus REPLY_MARGIN_S.
    """
    lsp = welcome.request_timeout_s or FALLBACK_REQUEST_TIMEOUT_S
    lookup = welcome.lookup_wait_s or FALLBACK_LOOKUP_WAIT_S
    start = welcome.start_wait_s or FALLBACK_START_WAIT_S
    # Each arm adds up the daemon's waits in order.  Too long only delays
    # noticing a hung daemon; too short throws away an answer it is about to
    # send, so every bound errs long.
    match request:
        case Diagnostics() | GoalState():
            # The own wait is the daemon's deadline for start, compile and
            # proofs; an LSP request begun just before it (goalState polls)
            # may still take request_timeout.  The start shares the deadline
            # today; start_wait is added so a daemon that waits for it
            # separately is not cut off.
            spent = limits.bounded(request.wait) + start + lsp
            if isinstance(request, GoalState) and request.positions:
                # Past its wait a batch still asks each position left, at most
                # two walks of MIN_REQUEST_S each.
                spent += len(request.positions) * 2 * limits.MIN_REQUEST_S
        case Holes():
            # A diagnostics within the wait, then a batch of up to MAX_POSITIONS holes,
            # each asked past the wait at most twice for MIN_REQUEST_S (as GoalState's).
            spent = limits.bounded(request.wait) + start + 2 * lsp
            spent += limits.MAX_POSITIONS * 2 * limits.MIN_REQUEST_S
        case Hover() | Definition() | References() | Completion() | DocumentSymbol() | WorkspaceSymbol():
            # Start, then the compile reaching the tree (lookup_wait), then the LSP
            # request; a caller's own wait replaces both waits.
            waits = start + lookup if request.wait is None else 2 * limits.bounded(request.wait)
            spent = waits + lsp
        case RetryCompile():
            # As a lookup, then a second lookup_wait for HOL's answer to the retry.
            spent = start + 2 * lookup + lsp
        case Eval():
            # Its LSP request is bounded by its own timeout instead of request_timeout.
            spent = start + limits.bounded(request.timeout)
        case Restart() | Stop():
            # Stopping the old server (its shutdown exchange), then the new one's start.
            spent = lsp + start
        case Status() | Shutdown() | Logs() | Metrics():
            spent = 0.0  # answered at once, from the daemon's own state
        case RestartDaemon():
            spent = RESTART_CHECK_S  # the new code's check (`holsrv.pool.handover.CHECK_TIMEOUT_S`), then at once
        case EditorAttach():
            spent = start  # its first frame says the channel is open; what follows has no end
        case Search():
            # A lookup, then (for an empty answer) HOL parsing the pattern alone; the
            # ancestry (10 s) and a conclusion and a hypothesis search (30 s each) besides.
            waits = start + lookup if request.wait is None else 2 * limits.bounded(request.wait)
            spent = waits + 2 * lsp + SEARCH_DB_S
        case Uses():
            # A lookup, a search for the theory, then the ancestry and one or two database questions.
            waits = start + lookup if request.wait is None else 2 * limits.bounded(request.wait)
            spent = waits + lsp + USES_DB_S
        case Holmake():
            # The daemon kills a Holmake at its own limit and then answers.
            spent = welcome.holmake_timeout_s or FALLBACK_HOLMAKE_TIMEOUT_S
        case Try():
            spent = _try_spent(request, welcome, start, lookup, lsp)
        case Verify():
            # Reading the reference (two git runs, each bounded by request_timeout), the diagnostics
            # wait, the build (killed at its limit), then opening the file again and HOL's record.
            build = welcome.holmake_timeout_s or FALLBACK_HOLMAKE_TIMEOUT_S
            spent = 2 * lsp + limits.bounded(request.wait) + start + lsp + build + start + lookup + lsp
        case GoalDiff():
            spent = 2 * (limits.bounded(request.wait) + start + lsp)
        case Job():
            # Its wait, then its answer's freshness (a read); a cancel waits for
            # a trial to give the file's text back (lookup_wait and a request).
            spent = limits.bounded(request.wait) + (lookup + lsp if request.cancel else 0.0)
        case _:
            assert_never(request)
    return spent + REPLY_MARGIN_S


def _try_spent(request: Try, welcome: Welcome, start: float, lookup: float, lsp: float) -> float:
    """Start and compile, then each candidate's own limit, then the restored
    text's compile (lookup_wait) and one LSP request late."""
    each = welcome.try_timeout_s or FALLBACK_TRY_TIMEOUT_S
    if request.timeout is not None:
        each = limits.bounded(request.timeout)
    trial = welcome.trial_wait_s or FALLBACK_TRIAL_WAIT_S  # other calls on the file finishing first
    each += limits.try_release_s(each)  # HOL letting go of the candidate before
    return start + trial + limits.bounded(request.wait) + len(request.tactics) * each + lookup + 2 * lsp
