"""holctl's questions about a file: its verdict, goals, names, search, eval, trials and Holmake."""

from __future__ import annotations

import sys

import click
import msgspec

from holctl.calls import EXIT_CODES, Target
from holctl.options import (
    PositionType,
    Seconds,
    absolute,
    at_position,
    defer_option,
    file_argument,
    json_option,
    lookup_wait,
    wait_option,
    with_lookup_wait,
    with_paging,
)
from holsrv.errors import BadRequest
from holsrv.rpc import limits, messages


def _with_wait(request_type, wait: float | None, **fields):
    """The request, with `wait` only if given: the daemon's default otherwise."""
    return request_type(**fields) if wait is None else request_type(wait=wait, **fields)


@click.command("diagnostics", epilog=EXIT_CODES)
@file_argument
@wait_option
@defer_option
@json_option
@click.pass_obj
def diagnostics(target: Target, file: str, wait: float | None, defer_after: float | None, as_json: bool) -> None:
    """Compile FILE, check every proof, and print the verdict and problems."""
    target.ask(_with_wait(messages.Diagnostics, wait, file=absolute(file), defer_after=defer_after), as_json)


@click.command("goalState", epilog=EXIT_CODES)
@file_argument
@click.argument("line", type=click.IntRange(min=1), required=False)
@click.argument("column", type=click.IntRange(min=1), required=False)
@click.option("--at", "positions", type=PositionType(), multiple=True,
              help=f"A position LINE or LINE:COL instead of LINE [COLUMN]; repeat it (up to "
              f"{limits.MAX_POSITIONS}) for the goals at each, in order, in one call.")
@wait_option
@json_option
@click.pass_obj
def goal_state(
    target: Target, file: str, line: int | None, column: int | None, positions: tuple[tuple[int, int | None], ...],
    wait: float | None, as_json: bool,
) -> None:
    """Print the goals at LINE:COLUMN inside a Proof…QED block of FILE.

    At a column: the goals before the tactic there (on the QED line, what is
    left at the end). Without COLUMN: the goals before the line's first
    tactic and after its last. With --at, repeated: the same at each
    position, one block per position headed by it, in one call (a position
    the file lacks gets its own error; the others still answer).
    """
    if (line is None) == (not positions):
        raise click.UsageError("give LINE [COLUMN] for one position, or --at LINE[:COL] (repeatable), not both")
    if positions:
        try:
            limits.check_positions(0, list(positions))
        except BadRequest as err:
            raise click.UsageError(str(err)) from None
        request = _with_wait(messages.GoalState, wait, file=absolute(file), positions=list(positions))
    else:
        request = _with_wait(messages.GoalState, wait, file=absolute(file), line=line, column=column)
    target.ask(request, as_json)


@click.command("holes", epilog=EXIT_CODES)
@file_argument
@wait_option
@json_option
@click.pass_obj
def holes(target: Target, file: str, wait: float | None, as_json: bool) -> None:
    """Every unfinished proof of FILE, each with the goals at its hole, in one call.

    A cheat (the goals it stands in for), a failed proof (the goals at its
    failing step), a proof HOL did not check, one resting on a cheated
    ancestor theorem. Read off FILE's verdict (as diagnostics, within the
    wait); at most {max} holes are walked, the rest listed without goals. A
    proof the daemon thinks loops is listed with the reason, not walked.
    """
    target.ask(_with_wait(messages.Holes, wait, file=absolute(file)), as_json)


holes.help = (holes.help or "").replace("{max}", str(limits.MAX_POSITIONS))


PositionLookup = type[messages.Hover | messages.Definition | messages.References | messages.Completion]


def _position_command(name: str, request_type: PositionLookup, summary: str) -> click.Command:
    """A command that takes FILE LINE COLUMN and the lookup wait."""

    @file_argument
    @at_position
    @with_lookup_wait
    @json_option
    @click.pass_obj
    def command(
        target: Target, file: str, line: int, column: int, wait: float | None, no_wait: bool, as_json: bool
    ) -> None:
        request = request_type(file=absolute(file), line=line, column=column, wait=lookup_wait(wait, no_wait))
        target.ask(request, as_json)

    command.__doc__ = summary
    return click.command(name, epilog=EXIT_CODES)(command)


hover = _position_command(
    "hover", messages.Hover, "Print what HOL knows about the name at LINE:COLUMN: its type or statement."
)
definition = _position_command("definition", messages.Definition, "Print where the name at LINE:COLUMN is defined.")
references = _position_command("references", messages.References, "Print where the name at LINE:COLUMN is used.")
completion = _position_command(
    "completion", messages.Completion, "Print completions for the name ending at LINE:COLUMN."
)


@click.command("documentSymbol", epilog=EXIT_CODES)
@file_argument
@with_lookup_wait
@json_option
@click.pass_obj
def document_symbol(target: Target, file: str, wait: float | None, no_wait: bool, as_json: bool) -> None:
    """Print an outline of FILE: its theorems, definitions and values."""
    target.ask(messages.DocumentSymbol(file=absolute(file), wait=lookup_wait(wait, no_wait)), as_json)


@click.command("workspaceSymbol", epilog=EXIT_CODES)
@file_argument
@click.argument("query")
@with_paging
@with_lookup_wait
@json_option
@click.pass_obj
def workspace_symbol(
    target: Target, file: str, query: str, limit: int, page: int, wait: float | None, no_wait: bool, as_json: bool
) -> None:
    """Search the theorems and constants FILE can see for names containing QUERY (2 characters or more):
    FILE's own, and its ancestors' where this HOL can list them (else the answer's note says so)."""
    request = messages.WorkspaceSymbol(
        file=absolute(file), query=query, limit=limit, page=page, wait=lookup_wait(wait, no_wait)
    )
    target.ask(request, as_json)


@click.command("eval", epilog=EXIT_CODES)
@file_argument
@click.argument("code")
@click.option(
    "--timeout",
    type=Seconds(),
    default=None,
    help="Seconds the code may run (daemon default 120).",
)
@json_option
@click.pass_obj
def eval_(target: Target, file: str, code: str, timeout: float | None, as_json: bool) -> None:
    """Evaluate SML CODE in FILE's HOL session (CODE `-` reads standard input).

    The session is the HOL server every agent on FILE shares: what CODE
    changes in HOL's global state (theories loaded, flags, grammar,
    definitions) persists there and is seen by all of them until the server
    restarts. No ML binding lasts to the next call. `holctl status` shows
    which servers have run eval code.
    """
    if code == "-":
        code = sys.stdin.read()
    path = absolute(file)
    request = messages.Eval(path, code) if timeout is None else messages.Eval(path, code, timeout)
    target.ask(request, as_json)


@click.command("try", epilog=EXIT_CODES)
@file_argument
@click.argument("line", type=click.IntRange(min=1))
@click.argument("candidates", nargs=-1, required=True, metavar="[COLUMN] TACTIC...")
@click.option("--timeout", type=Seconds(), default=None, help="Seconds each candidate may take (daemon default 30).")
@click.option("--apply", "apply", is_flag=True, help="Write the first proved candidate into FILE (see below).")
@wait_option
@defer_option
@json_option
@click.pass_obj
def try_(
    target: Target, file: str, line: int, candidates: tuple[str, ...], timeout: float | None,
    apply: bool, wait: float | None, defer_after: float | None, as_json: bool,
) -> None:
    """Try each TACTIC in place of LINE's tactic, one after another: try FILE LINE [COLUMN] TACTIC...

    A whole number right after LINE is the COLUMN the replaced text starts
    at; without it the line's whole tactic is replaced (a leading or trailing
    `>>` kept). The file is not changed, only the HOL server's copy, which gets
    the file's text back at the end. Prints, per candidate, the goals it
    leaves (or its error), its proof's status, its time and what changed.
    Put `--` before tactics that start with `-`.

    LINE on a theorem's Theorem, statement, Proof or QED line (no COLUMN):
    each TACTIC replaces the whole proof body. A TACTIC that is a whole
    `Theorem name: ... Proof ... QED` replaces the declaration; if its
    statement differs, the answer says so (verify will name it).

    With --apply, the first candidate that proves the theorem is written
    into FILE in place of the replaced text, only if FILE still has the
    bytes the trial ran on; it is kept only if FILE's own check then proves
    the theorem, else the old bytes are put back.
    """
    column = None
    if candidates and candidates[0].isdigit():
        column, candidates = int(candidates[0]), candidates[1:]
    if not candidates or column == 0:
        raise click.UsageError("give LINE, an optional COLUMN (1-based), then one or more tactics to try")
    request = _with_wait(messages.Try, wait, file=absolute(file), line=line, column=column, tactics=list(candidates))
    target.ask(msgspec.structs.replace(request, timeout=timeout, apply=apply, defer_after=defer_after), as_json)


@click.command("goalDiff", epilog=EXIT_CODES)
@file_argument
@click.argument("positions", nargs=-1, required=True, type=click.IntRange(min=1),
                metavar="LINE1 [COL1] LINE2 [COL2]")
@wait_option
@json_option
@click.pass_obj
def goal_diff(target: Target, file: str, positions: tuple[int, ...], wait: float | None, as_json: bool) -> None:
    """What changed in the goals from LINE1 [COL1] to LINE2 [COL2] of one proof.

    Give LINE1 LINE2, or LINE1 COL1 LINE2 COL2. Without columns: from before
    LINE1's first tactic to after LINE2's last.
    """
    if len(positions) not in (2, 4):
        raise click.UsageError("give LINE1 LINE2, or LINE1 COL1 LINE2 COL2")
    line1, col1, line2, col2 = (positions[0], None, positions[1], None) if len(positions) == 2 else positions
    target.ask(_with_wait(messages.GoalDiff, wait, file=absolute(file), line1=line1, column1=col1,
                          line2=line2, column2=col2), as_json)


@click.command("search", epilog=EXIT_CODES)
@file_argument
@click.argument("query", required=False, default="")
@click.option("--scope", default="ancestors", show_default=True, metavar="SCOPE",
              help="ancestors: FILE's theory and what it builds on; all: every loaded theory; "
                   "or theory names, comma-separated (list,arithmetic).")
@click.option("--kind", type=click.Choice(["theorem", "definition", "axiom", "any"]), default="any",
              show_default=True, help="Keep only theorems, definitions or axioms.")
@click.option("--conclusion", default="", metavar="PATTERN", help="A term the statement's conclusion contains.")
@click.option("--hypothesis", default="", metavar="PATTERN", help="A term one of its hypotheses contains.")
@with_paging
@with_lookup_wait
@json_option
@click.pass_obj
def search(
    target: Target, file: str, query: str, scope: str, kind: str, conclusion: str, hypothesis: str, limit: int,
    page: int, wait: float | None, no_wait: bool, as_json: bool
) -> None:
    """Search the theorems FILE's HOL has loaded: QUERY is "name fragments", 'theories' and a term pattern.

    E.g. holctl search fooScript.sml "'arithmetic' x + y = y + x", or
    holctl search fooScript.sml --conclusion "x <= y" --kind theorem.
    """
    scoped: str | list[str] = scope if scope in ("ancestors", "all") else [t.strip() for t in scope.split(",")]
    request = messages.Search(file=absolute(file), query=query, limit=limit, page=page,
                              wait=lookup_wait(wait, no_wait), scope=scoped, kind="" if kind == "any" else kind,
                              conclusion=conclusion, hypothesis=hypothesis)
    target.ask(request, as_json)


@click.command("uses", epilog=EXIT_CODES)
@file_argument
@click.argument("name")
@with_lookup_wait
@json_option
@click.pass_obj
def uses(target: Target, file: str, name: str, wait: float | None, no_wait: bool, as_json: bool) -> None:
    """What theorem NAME's proof depends on, and which proofs in the open scripts mention it.

    NAME is NAME, theory.NAME or theoryTheory.NAME. For a stored theorem the
    dependencies are HOL's tags; for one of FILE's, the theorems its proof names.
    """
    target.ask(messages.Uses(file=absolute(file), name=name, wait=lookup_wait(wait, no_wait)), as_json)


@click.command("holmake", epilog=EXIT_CODES)
@file_argument
@click.argument("make_target", metavar="[TARGET]", required=False, default="")
@click.option("-j", "--jobs", type=click.IntRange(min=0, max=256), default=0,
              help="Holmake's -j (default: the daemon's holmake_jobs setting).")
@defer_option
@json_option
@click.pass_obj
def holmake(target: Target, file: str, make_target: str, jobs: int, defer_after: float | None, as_json: bool) -> None:
    """Run Holmake in FILE's directory with the servers' HOL; print success or the failing theory's log tail."""
    target.ask(messages.Holmake(file=absolute(file), target=make_target, jobs=jobs, defer_after=defer_after), as_json)


VERIFY_EXIT = """\b
Exit codes: 0 VERIFIED; 1 NOT VERIFIED (a check failed or could not run; the
answer says which and why); 2-5 as for the other commands (bad input, HOL, daemon).
"""


@click.command("verify", epilog=VERIFY_EXIT)
@file_argument
@click.argument("theorems", nargs=-1)
@click.option("--against", "against", metavar="REV", default="",
              help="Compare the statements with the file at this git revision (default: HEAD).")
@click.option("--pinned", "pinned", metavar="FILE", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Compare with a file of pinned statements instead of git: a .sml whose Theorem/Definition "
              "blocks are read as the script's (a copy of the script as it was is one).")
@wait_option
@json_option
@click.pass_obj
def verify(target: Target, file: str, theorems: tuple[str, ...], against: str, pinned: str | None,
           wait: float | None, as_json: bool) -> None:
    """Is FILE really proved, as stated? Print VERIFIED or NOT VERIFIED with each check.

    Checks: the statements equal the committed ones (git HEAD, or --against/--pinned);
    every theorem (or each THEOREM named) is proved by HOL with no cheat; HOL's record of
    oracles and axioms after a Holmake build; the build itself, not CHEATED.
    """
    if against and pinned:
        raise click.UsageError("give --against REV or --pinned FILE, not both")
    request = _with_wait(messages.Verify, wait, file=absolute(file), theorems=list(theorems), against=against,
                         pinned=absolute(pinned) if pinned else "")
    reply = target.ask(request, as_json)
    if not (isinstance(reply, messages.VerifyResult) and reply.verified):
        sys.exit(1)


COMMANDS = [diagnostics, goal_state, hover, definition, references, completion, document_symbol, workspace_symbol,
            eval_, try_, goal_diff, search, uses, holmake, verify, holes]
