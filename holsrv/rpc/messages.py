"""Every message that crosses the daemon socket, declared once.

Every client-to-daemon frame is a `RequestBase`, tagged on `op`; every
daemon-to-client frame a `ReplyBase`, tagged on `type`.  `Request` is the
union of requests and `Reply` the union of what may answer one: `Welcome`,
`ErrorReply` or a `Result`.  Both clients and the daemon decode with the
decoders in `framing`.  Evolution rules: a new field gets a default, a field
never changes type, and a change that an old peer cannot ignore bumps
`PROTOCOL_VERSION`.

Positions are 1-based lines and 1-based columns counted in Unicode code
points, everywhere on this wire.
"""

from __future__ import annotations

from typing import Union

import msgspec

# 2: position requests name their column `column` (was `col`), goalState's is
# optional, lookups take a `wait`, progress frames, `stop`.
# 3: search, holmake, try, goalDiff and logs; `expect_hash` on file requests
# (a daemon that ignored it would answer about a text the caller did not
# expect without saying so); `freshness` on file replies.
PROTOCOL_VERSION = 3
# The daemon lists at most this many completion items and counts the rest in
# `CompletionResult.total`, so a short prefix cannot flood a model's context.
MAX_COMPLETIONS = 50


class Struct(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=False):
    """Base for wire structs: defaults are omitted so old peers stay compatible."""


class RequestBase(Struct, tag_field="op"):
    """A client-to-daemon frame; each subclass sets its `op` with `tag=`."""


class ReplyBase(Struct, tag_field="type"):
    """A daemon-to-client frame; each subclass sets its `type` with `tag=`."""


# -- connection handshake ---------------------------------------------------


class Hello(RequestBase, tag="hello"):
    """First frame of every connection, client to daemon."""

    protocol: int
    client: str
    client_version: str = ""
    # The settings this client was given (environment names and values, e.g.
    # HOLSRV_MAX_HEAP_MB or HOL_BIN), so a daemon started by another client
    # can say where its own differ instead of ignoring them silently.
    settings: dict[str, str] = {}


class Welcome(ReplyBase, tag="welcome"):
    """The daemon's answer to `Hello`, with the limits a client sizes its reply timeouts from."""

    protocol: int
    daemon_version: str
    pid: int
    # The daemon's settings of the same names; 0 means not sent (an older daemon).
    request_timeout_s: float = 0.0
    lookup_wait_s: float = 0.0
    start_wait_s: float = 0.0
    # Trials: a candidate's default time limit, and how long a call waits for a running trial.
    try_timeout_s: float = 0.0
    trial_wait_s: float = 0.0
    # Where the client's settings differ from the daemon's, one sentence each
    # (which setting, the daemon's value, how to apply the client's): clients
    # repeat these in the warnings of every answer on this connection.
    settings_warnings: list[str] = []
    holmake_timeout_s: float = 0.0  # 0: not sent (an older daemon)


# -- requests ---------------------------------------------------------------


class Diagnostics(RequestBase, tag="diagnostics"):
    file: str
    wait: float = 25.0
    # Send `Progress` frames before the result while waiting.
    progress: bool = False
    expect_hash: str = ""  # see PositionRequest
    defer_after: float | None = None  # see DEFER_AFTER
    # A content hash (or its first 8+ characters): first wait, within `wait`,
    # until the file on disk has other content, then answer about that (what
    # `holctl watch` loops on).  An unchanged file at the end of the wait is
    # answered about as it is.  "": answer at once.
    changed_since: str = ""


class PositionRequest(RequestBase):
    """A question about the name at one position of a file.

    `wait` bounds how long the daemon waits for the server to start and the
    compile to reach the position; None means the daemon's lookup wait, 0
    answers with what is known now.
    """

    file: str
    line: int
    column: int
    wait: float | None = None
    # The content hash (or its first 8+ characters) the caller expects the file to have; "": none.
    expect_hash: str = ""


class GoalState(RequestBase, tag="goalState"):
    """The goals at (line, column); with no column, before and after the line's tactics.

    Or, with `positions` (and no `line`: 0), at each (line, column or None) in
    turn, answered by one `GoalStatesResult` (`limits.MAX_POSITIONS` at most).
    """

    file: str
    line: int = 0
    column: int | None = None
    wait: float = 25.0
    progress: bool = False
    expect_hash: str = ""  # see PositionRequest
    positions: list[tuple[int, int | None]] | None = None


class Hover(PositionRequest, tag="hover"):
    pass


class Definition(PositionRequest, tag="definition"):
    pass


class References(PositionRequest, tag="references"):
    pass


class Completion(PositionRequest, tag="completion"):
    pass


class DocumentSymbol(RequestBase, tag="documentSymbol"):
    file: str
    wait: float | None = None
    expect_hash: str = ""  # see PositionRequest


class WorkspaceSymbol(RequestBase, tag="workspaceSymbol"):
    file: str
    query: str
    wait: float | None = None
    # Results come a page at a time, `limit` to a page; `page` is 1-based.
    limit: int = 20
    page: int = 1
    expect_hash: str = ""  # see PositionRequest


class Eval(RequestBase, tag="eval"):
    file: str
    code: str
    timeout: float = 120.0
    expect_hash: str = ""  # see PositionRequest


class RetryCompile(RequestBase, tag="retryCompile"):
    file: str
    expect_hash: str = ""  # see PositionRequest


class Restart(RequestBase, tag="restart"):
    file: str
    # None keeps the file's current cap; 0 means no cap.
    max_heap_mb: int | None = None


class Stop(RequestBase, tag="stop"):
    """Stop the file's HOL server (freeing its memory and its place); the next call starts another."""

    file: str


class Status(RequestBase, tag="status"):
    pass


class Shutdown(RequestBase, tag="shutdown"):
    pass


class RestartDaemon(RequestBase, tag="restartDaemon"):
    """Restart the daemon in place, keeping its warm HOL servers (docs/operations.md#restarting-the-daemon)."""


class Metrics(RequestBase, tag="metrics"):
    """The daemon's Prometheus metrics, as the `/metrics` endpoint serves them (docs/operations.md)."""


# -- search and holmake -------------------------------------------


class Search(RequestBase, tag="search"):
    """The theorem database's search: `"name fragment"`, `'theory'`, the rest a term pattern; all narrow."""

    file: str
    query: str
    limit: int = 20
    page: int = 1  # 1-based
    wait: float | None = None
    expect_hash: str = ""  # see PositionRequest
    # "ancestors": the script's theory and what it builds on (its Ancestors and
    # theirs, as HOL reports them); "all": every theory the server has loaded;
    # or a list of theory names.  A 'theory' in the query is searched whatever the scope.
    scope: str | list[str] = "ancestors"
    kind: str = ""  # "theorem" | "definition" | "axiom"; "" or "any": all three
    # Term patterns the statement's conclusion (resp. one of its hypotheses)
    # must contain, as HOL's DB.polarity_search reads them; "": no such condition.
    conclusion: str = ""
    hypothesis: str = ""


class Uses(RequestBase, tag="uses"):
    """What theorem `name`'s proof depends on, and which theorems of the open scripts mention it."""

    file: str
    name: str  # NAME, thy.NAME or thyTheory.NAME
    wait: float | None = None
    expect_hash: str = ""  # see PositionRequest


class Holmake(RequestBase, tag="holmake"):
    """Run Holmake in the script's directory (one at a time per directory; a second caller shares the run)."""

    file: str
    target: str = ""  # "": Holmake's default target
    jobs: int = 0  # 0: the daemon's holmake_jobs setting
    progress: bool = False
    defer_after: float | None = None  # see DEFER_AFTER


class Verify(RequestBase, tag="verify"):
    """Is FILE really proved, as stated?  Its statements against a reference, its proofs,
    HOL's record of oracles and axioms after a Holmake build, and the build itself."""

    file: str
    theorems: list[str] = []  # the theorems whose proofs must hold; []: every one of the file's
    # The reference statements: a git revision ("": HEAD when the file is in a git repository) …
    against: str = ""
    # … or a file of pinned statements (absolute path; see docs/holctl.md), instead of git.
    pinned: str = ""
    wait: float = 25.0  # for the server to start and the file to settle (the build has its own limit)
    progress: bool = False


# -- trials: try candidate tactics, and the goal diff ------------------------


class Try(RequestBase, tag="try"):
    """Try each tactic in `tactics` in place of the line's tactic (from `column`, or
    the whole line's when None), in the server's copy of the text only.

    `line` on a theorem's declaration outside its body (its `Theorem`, statement,
    `Proof` or `QED` line, no `column`): each candidate replaces the whole proof
    body.  A candidate that is a whole `Theorem name: … Proof … QED` of the same
    theorem replaces the declaration, its statement included (see `placement`)."""

    file: str
    line: int
    tactics: list[str]
    column: int | None = None
    # Seconds each candidate may take (goals and its proof's verdict); None: the daemon's setting.
    timeout: float | None = None
    # Bounds the wait for the server to start and the file to compile first.
    wait: float = 25.0
    progress: bool = False
    # Write the first proved candidate into the file (see `Applied`); off unless asked.
    apply: bool = False
    defer_after: float | None = None  # see DEFER_AFTER


class GoalDiff(RequestBase, tag="goalDiff"):
    """What changed in the goals between (line1, column1) and (line2, column2) of one proof."""

    file: str
    line1: int
    line2: int
    column1: int | None = None
    column2: int | None = None
    wait: float = 25.0


class Logs(RequestBase, tag="logs"):
    """The last `lines` lines the file's HOL server wrote to stderr (or its last server's, if it died)."""

    file: str
    lines: int = 200


# -- jobs: long calls handed back as a handle ---------------------------------

# `defer_after` (diagnostics, try, holmake): None, the call answers when done,
# as always; else once it has run this many seconds it answers `JobStarted`
# instead, and the work goes on in the daemon as a job, whose answer `Job` gets.


class Job(RequestBase, tag="job"):
    """Wait up to `wait` seconds for job `id`'s answer (its own reply, as the plain call's), or cancel it."""

    id: str
    wait: float = 25.0
    cancel: bool = False


class EditorAttach(RequestBase, tag="editorAttach"):
    """Turn this connection into one editor's channel (`holctl lsp`): from here on
    its frames are `holsrv.rpc.editor`'s, both ways, until it closes."""

    editor: str = ""  # the editor's name, as its LSP client gave it (for status)


class Holes(RequestBase, tag="holes"):
    """Every unfinished proof of the file, each with the goals at its hole (`HolesResult`):
    the file's verdict first (as `Diagnostics`, within `wait`), then goal states as a batch."""

    file: str
    wait: float = 25.0
    progress: bool = False
    expect_hash: str = ""  # see PositionRequest


Request = Union[
    Diagnostics,
    GoalState,
    Hover,
    Definition,
    References,
    Completion,
    DocumentSymbol,
    WorkspaceSymbol,
    Eval,
    RetryCompile,
    Restart,
    Stop,
    Status,
    Shutdown,
    Search,
    Holmake,
    Try,
    GoalDiff,
    Logs,
    Job,
    Uses,
    EditorAttach,
    Verify,
    Holes,
    Metrics,
    RestartDaemon,
]

# -- pieces of replies ------------------------------------------------------


# gc=False: structs of strings and numbers only, which a diagnostics answer
# holds by the thousand; the cycle collector need not walk them.
class Range(Struct, gc=False):
    line: int
    col: int
    end_line: int
    end_col: int


class ServerNote(Struct):
    """Which HOL server answered, and whether this call had to start it."""

    pid: int
    # "warm": already running; "started": this call started it; "restarted":
    # a previous server for this file died or was stopped and this call
    # started a new one (see `note`); "none": the answer needed no server and
    # none was started (`pid` 0).
    start: str = "warm"
    note: str = ""
    # After a death: the last lines the previous server wrote to stderr.
    stderr_tail: str = ""


class Diagnostic(Struct, gc=False):
    range: Range
    severity: str  # "error" | "warning" | "info"
    message: str
    # Why this diagnostic reads differently from what HOL sent, or where it is
    # provisional: a parse error HOL reported as a warning, a failure still
    # placed at the theorem's name.
    note: str = ""


class Proof(Struct, gc=False):
    name: str
    line: int
    # proved, checking, failed, suspended, diverged (the pool's verdicts);
    # "cheated": HOL ran it, but it uses cheat (or CHEAT_TAC, mk_thm);
    # "parse_error": HOL recovered from a parse error in it and checked what
    # it recovered, which Holmake refuses; "unchecked": the pool dropped it
    # without checking; "unreported": in the text, but nothing of the current
    # text was checked yet (blocked, starting).  A theorem with no pool entry
    # after a completed compile is "proved" (detail "checked by HOL while
    # compiling") or "failed" with its compile error.
    status: str
    detail: str = ""
    # Seconds this daemon has seen the proof checking (since the last edit at most).
    checking_s: float | None = None
    # A failed or diverged proof: one short next step chosen by the class of HOL's
    # message (`holsrv.verdict.hints`); "" when none.  `detail` keeps HOL's own words.
    hint: str = ""


class Tally(Struct):
    proved: int = 0
    checking: int = 0
    failed: int = 0
    suspended: int = 0
    diverged: int = 0
    unchecked: int = 0  # dropped by the pool, or never reported: not checked
    cheated: int = 0  # ran, but uses cheat: not proved
    parse_error: int = 0  # ran on what HOL recovered from a parse error: not proved

    @property
    def total(self) -> int:
        return (
            self.proved + self.checking + self.failed + self.suspended
            + self.diverged + self.unchecked + self.cheated + self.parse_error
        )


class CheatUse(Struct):
    theorem: str
    line: int
    col: int


class InheritedCheat(Struct):
    """A proof of the file that rests on a cheated theorem of an ancestor theory: HOL's pool
    says `proved`, Holmake marks the theory CHEATED.  Linked by the names its proof uses
    (the server cannot tell what a proof of the file really used)."""

    theorem: str
    line: int  # of its declaration, 1-based
    rests_on: list[str]  # the cheated ancestor theorems, `midTheory.dbl_even`
    through: list[str] = []  # the file's own proofs by which it rests on them, if not directly


class Blocked(Struct):
    modules: list[str]
    message: str


class Goal(Struct):
    asms: list[str]
    goal: str


class Location(Struct):
    path: str
    range: Range


class CompletionItem(Struct):
    label: str
    kind: str
    detail: str = ""


class Symbol(Struct):
    name: str
    kind: str
    line: int
    col: int
    end_line: int
    detail: str = ""
    depth: int = 0


class WorkspaceSymbolItem(Struct):
    name: str
    kind: str
    theory: str
    # Relative to the script's directory or HOLDIR (`$HOLDIR/src/…`) where it
    # lies under one of them, else absolute.
    path: str = ""
    line: int = 0
    # `⊢ …` for a theorem or definition, when HOL has it ("" otherwise).
    statement: str = ""


class SettingSource(Struct):
    """One effective setting of the daemon, and where its value came from."""

    name: str
    value: str
    # "default", "environment HOLSRV_X" (or the reference tool's name),
    # "flag --x", "config FILE"; for a constant "fixed" (at its value) or
    # "set" (another, given by whoever built the daemon's settings, as tests do).
    source: str


class SessionStatus(Struct):
    file: str
    pid: int | None
    state: str
    uptime_s: float
    idle_s: float
    footprint_mb: float | None
    max_heap_mb: int
    tally: Tally
    waiting_calls: int
    clients: list[str]
    restarts: int = 0
    large: bool = False
    hol_version: str = ""  # serverInfo.version of the HOL server, when it said
    # When that says nothing ("unknown", or no serverInfo): the HOL tree, `hol`'s
    # path and date, and `git describe` of the tree if it is a checkout.
    hol_build: str = ""
    # The verdict of the last diagnostics answer about this server's file.
    last_verdict: str = ""
    # Its proofs that rest on cheated theorems of ancestor theories, as that answer found them:
    # "theorem: midTheory.dbl_even, …" (see DiagnosticsResult.inherited_cheats).
    inherited_cheats: list[str] = []
    # A replacement under way because an ancestor was rebuilt: why, for how
    # long, and the new server's pid (answers come from this one meanwhile).
    replacing: str = ""
    replacing_since_s: float | None = None
    replacement_pid: int | None = None
    peak_mb: float | None = None  # the largest footprint sampled, MB
    # What it counts against the memory budget while that is not its footprint: a server
    # still loading (not yet measured after its first compile) counts as a new one would.
    counted_mb: float | None = None
    # eval calls run in this server since it started, and seconds since the last (None: none).
    evals: int = 0
    last_eval_s: float | None = None
    # The editor (`holctl lsp`) that has this file open, "" when none, and whether
    # its buffer differs from the disk (agents' answers are then about the buffer).
    editor: str = ""
    editor_unsaved: bool = False
    # What this server was found to do, by service ("search", "hover", …): "works" or
    # "lacking"; a service not listed has not been asked about yet (`holsrv.lsp.services`).
    services: dict[str, str] = {}
    # The `hol` it runs, the HOL tree it says it is (`serverInfo.holdir`), and the project file
    # (`holsrv.toml`) its settings came from ("": none, the user-wide settings).
    hol: str = ""
    holdir: str = ""
    project: str = ""


class EditorClient(Struct):
    """One editor attached through `holctl lsp`, as `status` lists it beside the agents."""

    name: str
    documents: list[str] = []  # the files it has open
    unsaved: list[str] = []  # those whose buffer differs from the disk
    dropped: int = 0  # progress notifications dropped because it read too slowly


class Freshness(Struct, omit_defaults=False):
    """How fresh a file's answer is: every file-scoped reply carries one, every field sent
    (a structured reader should not have to know the defaults)."""

    content_hash: str  # of the text the answer is about
    # False: the file was still compiling or checking; asking again may say more.
    settled: bool = True
    age_s: float = 0.0  # since the answer was computed (a cached one is older)
    may_be_stale: bool = False
    # Why it may be stale, one sentence each: a dependency rebuilt since the
    # server loaded it, the file changed since, a Holmake running.
    reasons: list[str] = []
    # The hash the caller expected (`expect_hash`), when it gave one.
    expected_hash: str = ""


# -- replies ----------------------------------------------------------------


class DiagnosticsResult(ReplyBase, tag="diagnostics"):
    file: str
    content_hash: str
    # One of OK, FAILED, ERRORS, CHEATS, SUSPENDED, UNCHECKED, BLOCKED, INCOMPLETE.
    verdict: str
    headline: str
    complete: bool
    tally: Tally
    proofs: list[Proof]
    diagnostics: list[Diagnostic]
    cheats: list[CheatUse]
    server: ServerNote
    blocked: Blocked | None = None
    outstanding: list[str] = []
    warnings: list[str] = []
    cached: bool = False
    # Diagnostics beyond the first MAX_DIAGNOSTICS are counted, not listed.
    diagnostics_omitted: int = 0
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)
    # Said once for the whole answer: which proofs HOL checked while compiling
    # (no pool entry: inside `local … in … end`), and what their status means.
    note: str = ""
    # Proofs that rest on cheated theorems of ancestor theories (verdict CHEATS: Holmake
    # would mark this theory CHEATED), found by the names they use.
    inherited_cheats: list[InheritedCheat] = []


class GoalStateResult(ReplyBase, tag="goalState"):
    file: str
    content_hash: str
    line: int
    # None: the whole line was asked about (goals before its first tactic in
    # `before`, after its last in `goals`).
    column: int | None
    # What an agent branches on:
    # "goals": goals below; "proved_here": no goals are left at this point;
    # "cheated": none are left only because of cheat (the goal is not proved);
    # "failed": the tactic here fails (`error`, `failed_range`; `goals` is
    # the state before it); "not_in_proof": not inside Proof…QED;
    # "compiling" / "starting": ask again shortly; "blocked": the file's
    # dependencies could not be loaded; "looping": the proof here loops (or has
    # been checking far longer than the rest), so HOL is not asked (`message`);
    # "unsupported": this HOL server has no goal-state walker (`message` says
    # what to use instead).
    state: str
    message: str
    server: ServerNote
    theorem: str = ""
    step: int = 0
    goals: list[Goal] = []
    context: list[str] = []
    note: str = ""
    error: str = ""
    failed_range: Range | None = None
    provisional: bool = False
    cached: bool = False
    # With the column omitted: the line's text and the goals before it.
    line_text: str = ""
    before: list[Goal] | None = None
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)


class GoalStateEntry(Struct):
    """One position of a `GoalStatesResult`: `GoalStateResult`'s fields about it, or the error it alone got."""

    line: int
    column: int | None
    # As `GoalStateResult.state`, or "error": this position alone was refused
    # (`code`, `message`), or the server failed at it and so for the rest.
    state: str
    message: str
    theorem: str = ""
    step: int = 0
    goals: list[Goal] = []
    context: list[str] = []
    note: str = ""
    error: str = ""
    failed_range: Range | None = None
    provisional: bool = False
    cached: bool = False
    line_text: str = ""
    before: list[Goal] | None = None
    code: str = ""  # with state "error": the error's stable code (position_out_of_range…)


class GoalStatesResult(ReplyBase, tag="goalStates"):
    """The answer to a `GoalState` with `positions`: one entry per position, in order."""

    file: str
    content_hash: str
    server: ServerNote
    positions: list[GoalStateEntry]
    freshness: Freshness | None = None


class HoverResult(ReplyBase, tag="hover"):
    file: str
    content_hash: str
    text: str | None
    server: ServerNote
    range: Range | None = None
    # Set when the answer may be incomplete: the file is still compiling or blocked.
    note: str = ""
    # When the hovered name is a theorem of this file that is not proved
    # (failed, cheated, unchecked…): what its proof's status is.
    proof_status: str = ""
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)
    # Set when this HOL server has no hover: that it cannot, and what to use instead
    # (`text` is then the theorem database's statement of the name, when it is a theorem).
    message: str = ""


class DefinitionResult(ReplyBase, tag="definition"):
    file: str
    content_hash: str
    targets: list[Location]
    server: ServerNote
    # Set when the answer may be incomplete: the file is still compiling or blocked.
    note: str = ""
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)
    # Set when this HOL server has no definition backend: that it cannot, and what to use
    # instead (`targets` then holds where the theorem database says a theorem is stored).
    message: str = ""


class ReferencesResult(ReplyBase, tag="references"):
    file: str
    content_hash: str
    supported: bool
    locations: list[Location]
    message: str
    server: ServerNote
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)


class CompletionResult(ReplyBase, tag="completion"):
    file: str
    content_hash: str
    items: list[CompletionItem]
    total: int
    incomplete: bool
    server: ServerNote
    # Set when the answer may be incomplete: the file is still compiling or blocked.
    note: str = ""
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)
    # Set when this HOL server has no completion: that it cannot, and what to use instead
    # (`items` then holds the theorem database's theorems whose name starts with the prefix).
    message: str = ""


class DocumentSymbolResult(ReplyBase, tag="documentSymbol"):
    file: str
    content_hash: str
    symbols: list[Symbol]
    server: ServerNote
    # Symbols past the daemon's cap, counted, not listed.
    omitted: int = 0
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)


class WorkspaceSymbolResult(ReplyBase, tag="workspaceSymbol"):
    file: str
    query: str
    symbols: list[WorkspaceSymbolItem]
    server: ServerNote
    # Set when the answer may be incomplete: the file is still compiling or blocked.
    note: str = ""
    page: int = 1
    # Matches in all pages; `more` of them come after this page.
    total: int = 0
    more: int = 0
    # HOL stops at a fixed number of matches: there may be more than `total`.
    capped: bool = False
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)


class EvalResult(ReplyBase, tag="eval"):
    file: str
    output: str
    errors: list[str]
    stderr: str
    timed_out: bool
    server: ServerNote
    # Soft reports (HOL's `hard: false`: the code ran) and notes on what ran.
    warnings: list[str] = []
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)
    # One per entry of `errors`, in order: a short next step chosen by the class
    # of HOL's message (`holsrv.verdict.hints`), "" when none.
    hints: list[str] = []
    # That the code ran in a server every caller about this file shares, whose global state it may change.
    shared_state: str = ""


class RetryCompileResult(ReplyBase, tag="retryCompile"):
    file: str
    content_hash: str
    was_blocked: bool
    message: str
    server: ServerNote
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)


class RestartResult(ReplyBase, tag="restart"):
    file: str
    old_pid: int | None
    new_pid: int
    max_heap_mb: int
    message: str


class StopResult(ReplyBase, tag="stop"):
    file: str
    pid: int | None  # of the server stopped; None when there was none
    message: str


class StatusResult(ReplyBase, tag="status"):
    daemon_version: str
    protocol: int
    pid: int
    uptime_s: float
    socket: str
    max_servers: int
    sessions: list[SessionStatus]
    cache_hits: int
    cache_misses: int
    # The daemon's effective settings and where each came from.
    settings: list[SettingSource] = []
    # The fleet's memory budget (0: none) and how much of it the running
    # servers use: each its measured footprint (what it is expected to use
    # until its first sample).
    memory_budget_mb: int = 0
    memory_used_mb: float = 0.0
    # Where the budget came from: a setting, or the default's share of the
    # machine's memory or of a cgroup's limit ("75% of cgroup memory.max of /x").
    memory_budget_source: str = ""
    # Each server's heap cap (Poly/ML --maxheap, MB; 0: none), what a new
    # server is expected to use, and how many more of those fit now.
    max_heap_mb: int = 0
    usual_footprint_mb: float = 0.0
    servers_fit: int = 0
    jobs: list[JobRow] = []  # the jobs the daemon holds, running or finished, oldest first
    editors: list[EditorClient] = []  # the editors attached through `holctl lsp`
    # Goal-state walks asked of HOL ahead of any call, and the answers so asked that a call was then given (each once).
    prefetch_asked: int = 0
    prefetch_hits: int = 0
    # Servers replaced as runaways (they would not let go of their work: `holsrv.server.runaway`), and the last why.
    runaways: int = 0
    last_runaway: str = ""
    # Each platform concern and the facility the daemon uses for it ("peer credentials": "SO_PEERCRED",
    # or "no check possible: ..."): `holsrv.facilities.described`.
    facilities: dict[str, str] = {}
    # The daemon's restarts in place (`restart-daemon`, SIGHUP) in this process, and the last one's story:
    # when (wall clock), how long it took, how many servers it adopted and how many started fresh.
    restarts: int = 0
    restarted_at: float = 0.0
    restart_s: float = 0.0
    adopted: int = 0
    not_adopted: int = 0
    # Restarts that failed at the `exec` (the daemon served on with its servers), and the last one's why.
    failed_restarts: int = 0
    restart_failed: str = ""


class Progress(ReplyBase, tag="progress"):
    """Sent before the result of a request that asked for progress, while it waits."""

    message: str
    done: int = 0  # e.g. proofs finished
    total: int = 0  # 0: unknown


class ShutdownResult(ReplyBase, tag="shutdown"):
    message: str


class RestartDaemonResult(ReplyBase, tag="restartDaemon"):
    """The daemon checked that its new code starts and now hands over; the connection then closes."""

    servers: int  # HOL servers running, which it hands over (those busy past the drain start fresh)
    version: str  # the holsrv version it restarts into
    pid: int  # the daemon's, which stays
    restarts: int  # the daemon's restarts before this one: `status` shows one more once it is back
    message: str


class MetricsResult(ReplyBase, tag="metrics"):
    text: str  # Prometheus's text exposition format, version 0.0.4


class LogsResult(ReplyBase, tag="logs"):
    file: str
    pid: int | None  # of the server the lines are from; None when none ran
    running: bool  # the server is alive (else the lines are a dead server's last words)
    lines: list[str]
    message: str = ""  # what the lines are, or why there are none


class ErrorReply(ReplyBase, tag="error"):
    code: str
    message: str
    detail: str = ""


# -- search and holmake replies -----------------------------------


class SearchMatch(Struct):
    name: str
    theory: str
    kind: str  # "theorem" | "definition" | "axiom"
    statement: str
    # As in WorkspaceSymbolItem: relative to the script's directory or `$HOLDIR/…`; "" if unknown.
    path: str = ""
    line: int = 0  # 1-based; 0 if unknown
    # Other theories that export a theorem of this name with the identical statement
    # (rich_list re-exports list's): one hit for all of them, `theory` the first HOL named.
    also_in: list[str] = []


class SearchResult(ReplyBase, tag="search"):
    file: str
    query: str
    hits: list[SearchMatch]
    server: ServerNote
    page: int = 1
    total: int = 0  # matches in all pages (HOL's, up to its cap)
    more: int = 0  # after this page
    capped: bool = False  # HOL stopped at the daemon's cap: there may be more than `total`
    # Why there are no hits: "no_match", "unparsable" (the pattern did not parse), "past_end",
    # "unsupported" (this HOL cannot search its theorems: `message` says what to use instead).
    empty_because: str = ""
    message: str = ""  # for an empty answer: why, with HOL's words, and how to relax the query
    note: str = ""  # the file is still compiling or blocked: the database may lack its theorems
    freshness: Freshness | None = None
    scope: list[str] = []  # the theories searched; [] with scope "all"
    # Matches the scope left out, by theory (an empty answer names them and how to widen).
    outside: dict[str, int] = {}
    # How the hits were found when not by HOL's search: this server has no search backend,
    # so through eval over its loaded theories (hits then have no path or line).
    via: str = ""


class UsedTheorem(Struct):
    """A theorem named in a `uses` answer: `theory` "" for one of an open script (then `path`, `line`)."""

    name: str
    theory: str = ""
    path: str = ""
    line: int = 0  # 1-based; 0 if unknown


class UsesResult(ReplyBase, tag="uses"):
    file: str
    name: str
    theory: str  # the theorem's theory; "" when it is one of this script's and HOL has not stored it
    # "tags": HOL's dependency tags (Tag.dep_of); "text": the names its proof text
    # mentions that are theorems (a theorem of an open script); "": not known.
    depends_from: str
    depends_on: list[UsedTheorem]
    used_by: list[UsedTheorem]  # theorems of the open scripts whose proof text mentions it
    server: ServerNote
    message: str = ""  # when a list is empty or partial: why
    freshness: Freshness | None = None


class HolmakeResult(ReplyBase, tag="holmake"):
    file: str
    directory: str
    ok: bool
    message: str
    command: list[str] = []
    exit_code: int | None = None  # None: killed (timeout, shutdown) or not started
    timed_out: bool = False
    # The theory (or script) Holmake says failed, and the last lines of its log
    # (or of Holmake's output), bounded.
    failed: str = ""
    log_tail: str = ""
    elapsed_s: float = 0.0
    shared: bool = False  # this call joined a Holmake another call had started
    # Theories Holmake reported CHEATED (built, but a proof in them is a cheat), by name as in `failed`.
    cheated: list[str] = []
    # Open files whose blocked compile this build let go on: the daemon retried them.
    unblocked: list[str] = []
# -- trials -------------------------------------------------------------------


class GoalChange(Struct):
    """One goal a tactic changed: 1-based indexes into the goals before and after."""

    before_index: int
    after_index: int
    hyps_added: list[str] = []
    hyps_removed: list[str] = []
    rewritten: bool = False  # the conclusion changed (then goal_before/goal_after say how)
    goal_before: str = ""
    goal_after: str = ""


class GoalsDiff(Struct):
    goals_before: int
    goals_after: int
    unchanged: int = 0
    closed: list[Goal] = []
    added: list[Goal] = []
    changed: list[GoalChange] = []
    summary: str = ""


class TryCandidate(Struct):
    tactic: str
    # "proved": no goals left and the proof checks; "proved_here": no goals
    # left at this point (a branch, or the rest of the proof fails);
    # "goals": goals remain; "failed": the tactic fails (`error`,
    # `failed_range` in the trial's text); "timed_out": cut off after the
    # timeout (a looping or very slow tactic); its check was dropped;
    # "not_tried": HOL never took its text (still stopping the one before), see
    # `message`.  A "proved" candidate may have `goals`: those the tactics after
    # it close.
    state: str
    message: str = ""
    goals: list[Goal] = []
    error: str = ""
    failed_range: Range | None = None
    # The proof's status with this candidate in place (as diagnostics lists it).
    proof: Proof | None = None
    # From when HOL took the candidate's text (see `taken_s`) to its answer.
    time_s: float = 0.0
    diff: GoalsDiff | None = None
    # `failed_range` in the candidate's own text (line 1 is its first line).
    candidate_range: Range | None = None
    # Seconds from sending the candidate until HOL took it: about 0.3 normally,
    # longer while HOL stops a looping candidate before it.
    taken_s: float | None = None
    # A failed or timed-out candidate: one short next step chosen by the class of
    # HOL's message (`holsrv.verdict.hints`); "" when none.
    hint: str = ""
    # A candidate that is a whole `Theorem … QED` whose statement differs from the file's:
    # its statement ("" when it keeps the file's); `message` says so.
    statement: str = ""


class Applied(Struct):
    """What `try` with `apply` did to the file with its first proved candidate.

    `state`: "kept" (written, and the file's own check proves the theorem);
    "rolled_back" (written, the check did not prove it, the old bytes are
    back); "rollback_skipped" (written, the check did not prove it, but the
    file changed again since, so it was left as it is); "refused" (nothing
    was written).  `reason`: a stable code, "" when kept: "file_changed",
    "symlink_refused", "not_a_file", "permission_denied", "write_failed"
    (refused); "not_proved" (the check's verdict is another), "no_verdict"
    (none within the wait) when rolled back or skipped.
    """

    state: str
    reason: str
    # The replaced text's range in the file as it was (1-based, end exclusive), and what went there.
    range: Range
    text: str
    # The content hash of the file with `text` in place ("" if refused); after
    # a rollback the file has the trial's `content_hash` again.
    content_hash: str
    message: str = ""
    # The theorem's status in the file's check of the new text ("" if refused).
    status: str = ""


class TryResult(ReplyBase, tag="try"):
    file: str
    content_hash: str
    line: int
    column: int | None
    theorem: str
    # The text each candidate replaced, and the goals before it.
    replaced: str
    before: list[Goal]
    candidates: list[TryCandidate]
    message: str = ""
    server: ServerNote | None = None
    time_s: float = 0.0
    # The file changed on disk during the trial: the candidates were tried
    # against the text it had when the trial began.
    changed_on_disk: bool = False
    # The trial left the server past the soft footprint; a fresh one is
    # starting in the background (see `message`).
    replacing_server: bool = False
    # `apply` was asked and a candidate proved the theorem: what was done with it.
    applied: Applied | None = None
    # The file is blocked (its dependencies could not be loaded): no candidate
    # was tried (each is `not_tried`), as goalState answers state "blocked".
    blocked: Blocked | None = None
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)
    # `line` was on the theorem's declaration (not in its body): each candidate replaced the
    # whole proof between Proof and QED (`replaced`), or the declaration if it is a whole Theorem.
    whole_proof: bool = False


class JobRow(Struct):
    """One job, as status lists it."""

    id: str
    op: str  # the call's op: "diagnostics", "try" or "holmake"
    file: str
    state: str  # "running", "done" (its answer is kept) or "cancelled"
    age_s: float  # since it started


class JobStarted(ReplyBase, tag="jobStarted"):
    """A call outran its `defer_after`: it goes on as job `id`, whose answer `Job` gets."""

    id: str
    op: str
    file: str
    started: float  # Unix time
    message: str  # how to get the answer, and how long it is kept


class JobState(ReplyBase, tag="job"):
    """A job with no answer to give: still running when the wait ended, or cancelled."""

    id: str
    op: str
    file: str
    state: str  # "running", "cancelled" or "done" (a cancel came after it finished)
    elapsed_s: float  # since it started
    message: str


class GoalDiffResult(ReplyBase, tag="goalDiff"):
    file: str
    content_hash: str
    theorem: str
    before: list[Goal]
    after: list[Goal]
    diff: GoalsDiff
    message: str = ""
    server: ServerNote | None = None
    freshness: Freshness | None = None  # how fresh this answer is (see Freshness)


# -- verify -------------------------------------------------------------------


class StatementChange(Struct):
    """A theorem or definition whose statement differs from the reference's (compared as HOL
    reads them: whitespace and comments aside)."""

    name: str
    kind: str  # "theorem" | "definition" (Definition, Inductive, CoInductive, Datatype)
    change: str  # "changed" | "removed" | "added" | "renamed"
    line: int = 0  # in the current text (0: removed)
    reference: str = ""  # the statement as the reference has it ("" when added)
    current: str = ""  # as the file has it now ("" when removed)
    renamed_to: str = ""  # for "renamed": the current name of the same statement
    allowed: bool = False  # a new theorem (or definition) is allowed; anything else is not


class VerifyCheck(Struct):
    """One check of `verify`: passed, failed, or not checked (and why), with its evidence."""

    name: str  # "statements" | "proofs" | "oracles" | "build"
    status: str  # "passed" | "failed" | "unchecked"
    summary: str
    evidence: list[str] = []


class VerifyResult(ReplyBase, tag="verify"):
    file: str
    content_hash: str
    verified: bool
    headline: str  # starts with VERIFIED or NOT VERIFIED
    checks: list[VerifyCheck]
    reference: str = ""  # what the statements were compared with: "git HEAD (abc123…)", a pinned file, or ""
    statements: list[StatementChange] = []
    theorems: list[str] = []  # the theorems whose proofs were checked
    unchecked: list[str] = []  # what could not be checked, one sentence each
    elapsed_s: float = 0.0


class Hole(Struct):
    """One unfinished proof of a `holes` answer, and the goals at its hole."""

    theorem: str  # its pool name
    # The hole: a cheat's position, a failing step's, else the proof's QED line (column None).
    line: int
    column: int | None
    # "cheat"; the proof's status: "failed", "unchecked", "suspended", "diverged", "parse_error",
    # "checking", "unreported"; or "inherited_cheat" (proved, but resting on a cheated ancestor theorem).
    kind: str
    theorem_line: int = 0  # its declaration's, 1-based
    detail: str = ""  # the verdict's words on the proof (HOL's message, the theorems it rests on)
    # The goals at the hole, as one goalState position; None when not asked (`unwalked` says why).
    goals: GoalStateEntry | None = None
    unwalked: str = ""


class HolesResult(ReplyBase, tag="holes"):
    """The answer to `Holes`: the unfinished proofs in the text's order, the first
    `limits.MAX_POSITIONS` walkable ones with their goals."""

    file: str
    content_hash: str
    verdict: str  # the diagnostics verdict the holes were read from
    headline: str
    complete: bool  # the verdict was settled (INCOMPLETE: proofs still checking are listed as such)
    holes: list[Hole]
    server: ServerNote
    walked: int = 0  # holes whose goals were asked
    # Holes listed without goals past the bound, a file changed after its verdict: said once.
    message: str = ""
    freshness: Freshness | None = None


Result = Union[
    DiagnosticsResult,
    GoalStateResult,
    GoalStatesResult,
    HoverResult,
    DefinitionResult,
    ReferencesResult,
    CompletionResult,
    DocumentSymbolResult,
    WorkspaceSymbolResult,
    EvalResult,
    RetryCompileResult,
    RestartResult,
    StopResult,
    StatusResult,
    ShutdownResult,
    SearchResult,
    HolmakeResult,
    TryResult,
    GoalDiffResult,
    LogsResult,
    JobStarted,
    JobState,
    UsesResult,
    VerifyResult,
    HolesResult,
    MetricsResult,
    RestartDaemonResult,
]

# typing flattens the nested union, so msgspec sees one flat tagged union.
# `Progress` frames may come before a result; every other frame ends a call.
Reply = Union[Welcome, ErrorReply, Progress, Result]
