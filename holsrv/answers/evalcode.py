"""The code the daemon hands HOL's `$/eval` for an agent, and the way back to the agent's lines.

HOL compiles eval code on a request thread of its own, against a namespace in
which nothing is opened (tools-poly/lsp/README.md, "Hover": the boot session
"`open`s nothing on purpose"), and whatever the code binds there is gone by the
next call.  So `EVAL`, `prove` and `rw` are undeclared, a bare expression binds
`it` and prints nothing, and a `val` does not reach the next call.  Every call is
therefore sent as

    open HolKernel Parse boolLib bossLib;           the prelude: what a HOL REPL has open
    open arithmeticTheory; open listTheory;         the script's `Ancestors`, one `open` each
    <the agent's code, up to its last declaration>
    val it = (); val it = (                         only when that last one is an expression:
    <the agent's last declaration, its `;` dropped>    its line is broken where it starts
    );
    val _ = PolyML.print it;                        ...and its value printed (unless unit)

and the positions in HOL's reports are moved back onto the agent's lines.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from holsrv.lsp import hol, replies
from holsrv.text.positions import Text

PRELUDE = "open HolKernel Parse boolLib bossLib;"
_HEADER = "val it = (); val it = ("  # `it` is () until the agent's expression has run
_CLOSE = ");"
_ECHO = "val _ = PolyML.print it;"

# Words that start a declaration rather than an expression (SML's, then HOL's script syntax).
_DECLARATION_WORDS = frozenset("""
    val fun open structure signature functor datatype type abstype exception local
    infix infixl infixr nonfix
    Theorem Triviality Definition Datatype Inductive CoInductive Overload Type Theory
    Ancestors Libs Resume Finalise Quote Termination
    """.split())
# Tokens no expression starts with: what is left of a construct the split misread.
_NOT_A_START = frozenset("in end then else of do and with handle orelse andalso => = : | ) ] } ;".split())
_OPENERS = frozenset("let local struct sig abstype".split())
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_'.]*|[0-9][A-Za-z0-9_.]*|[()\[\]{};,]|[!%&$#+\-/:<=>?@\\~^|*]+")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_']*")
_QUOTES = (("``", "``"), ("`", "`"), ("‘", "’"), ("“", "”"))


@dataclass(frozen=True)
class Sent:
    """What went to HOL, and where the agent's code sits in it.

    `wrapped` is where (0-based line, column) the agent's last declaration
    starts when it is an expression: the sent code breaks the line there and
    puts the wrapper's `val it = (` on a line of its own.
    """

    code: str
    prelude_lines: int
    lines: list[str]  # the agent's lines, as sent
    wrapped: tuple[int, int] | None

    @property
    def echo(self) -> int | None:
        """The 0-based line of the echo declaration, if there is one."""
        return None if self.wrapped is None else self.prelude_lines + len(self.lines) + 3

    @property
    def names(self) -> frozenset[str]:
        """Every identifier the sent code mentions (what HOL's dependency scan may try to load)."""
        return frozenset(_IDENT.findall(self.code))


@dataclass
class Outcome:
    """The agent-facing reading of HOL's reports."""

    output: str = ""
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def prepare(code: str, ancestors: list[str]) -> Sent:
    """The prelude, the script's ancestors opened, and the code; a final expression is wrapped to print its value."""
    prelude = [PRELUDE]
    if ancestors:
        # One declaration each, so that one that cannot be opened spoils only itself.
        prelude.append(" ".join(f"open {name}Theory;" for name in ancestors))
    head = "\n".join(prelude) + "\n"
    masked = _mask(code)
    start = last_expression(masked)
    if start is None:
        return Sent(head + code, len(prelude), code.split("\n"), None)
    end = _final_semicolon(masked)
    body = code if end is None else code[:end] + " " + code[end + 1:]
    sent = f"{head}{body[:start]}\n{_HEADER}\n{body[start:]}\n{_CLOSE}\n{_ECHO}\n"
    line = code.count("\n", 0, start)
    column = start - (code.rfind("\n", 0, start) + 1)
    return Sent(sent, len(prelude), body.split("\n"), (line, column))


def last_expression(masked: str) -> int | None:
    """Where the code's last top-level declaration starts, if it is an expression whose value
    nobody would see; None otherwise.  `masked` is the code with comments, strings and
    quotations blanked (`_mask`).  A `PolyML.print` call prints already and is not echoed.
    """
    tokens = [(t.start(), t.group()) for t in _TOKEN.finditer(masked)]
    final = _final_semicolon(masked)
    cuts = [at for at in _top_level_semicolons(tokens) if at != final]
    last = [(at, token) for at, token in tokens if not cuts or at > cuts[-1]]
    if not last or last[0][1] == ";":
        return None
    at, first = last[0]
    if first in _DECLARATION_WORDS or first in _NOT_A_START or first.startswith("PolyML.print"):
        return None
    return at


def unprinted(code: str) -> list[int]:
    """The 1-based lines of top-level expressions, other than the code's last declaration,
    whose values nobody sees: only the last one is echoed (`prepare`), and HOL prints
    nothing for a bare expression (transcript eval-errors)."""
    masked = _mask(code)
    tokens = [(t.start(), t.group()) for t in _TOKEN.finditer(masked)]
    final = _final_semicolon(masked)
    cuts = [at for at in _top_level_semicolons(tokens) if at != final]
    starts = [next((t for t in tokens if t[0] > cut), None) for cut in [-1, *cuts]][:-1]  # all but the last
    return [code.count("\n", 0, at) + 1 for at, first in filter(None, starts)
            if first not in _DECLARATION_WORDS and first not in _NOT_A_START and not first.startswith("PolyML.print")]


def unprinted_note(lines: list[int]) -> str:
    """What an answer says of `unprinted` expressions, "" when there are none."""
    if not lines:
        return ""
    which = f"line {lines[0]}" if len(lines) == 1 else "lines " + ", ".join(map(str, lines))
    return (f"only the last expression's value is printed: the expression(s) at {which} ran, but their values "
            "are not shown (a bare expression only binds `it`); wrap one in `PolyML.print (…);` to see it, or "
            "give it its own eval")


def read(reports: list, sent: Sent, encoding: str) -> Outcome:
    """Output, errors and warnings, with positions on the agent's own lines (1-based).

    A parse error is an error though HOL marks it soft (`hol.is_eval_failure`);
    the prelude is named only when part of it failed.  When the agent's last
    expression failed, the echo after it can only print the `()` its `it` held
    before: that is not a value the code produced, and is not shown.
    """
    text = Text(sent.code)
    out = Outcome()
    shown: list[str] = []
    expression_failed = False
    for report in reports:
        if isinstance(report, (replies.ToplevelOut, replies.CompilerOut)):
            shown.append(_shown(report, sent))
        elif isinstance(report, replies.ErrorReport):
            where = _add_error(out, report, sent, text, encoding)
            expression_failed |= hol.is_eval_failure(report) and _in_last_expression(sent, where)
        elif isinstance(report, replies.InterruptedReport):
            out.errors.append("interrupted")
    if expression_failed and shown and shown[-1].strip() == "()":
        shown.pop()
    out.output = "".join(shown)
    return out


def _shown(report: replies.ToplevelOut | replies.CompilerOut, sent: Sent) -> str:
    echo = sent.echo
    echoed = echo is not None and report.pos is not None and report.pos.line >= echo
    # The echo of a unit value (`print "…"`, `r := 1`) says nothing a REPL user would miss.
    return "" if echoed and report.body.strip() == "()" else report.body


def _in_last_expression(sent: Sent, where: tuple[int, int] | None) -> bool:
    """Whether a report at agent position `where` lies in the wrapped last expression (or its wrapper)."""
    if sent.wrapped is None or where is None:
        return False
    return where >= (sent.wrapped[0] + 1, sent.wrapped[1] + 1)


def _add_error(
    out: Outcome, report: replies.ErrorReport, sent: Sent, text: Text, encoding: str
) -> tuple[int, int] | None:
    """File the report as an error or a warning; its agent position (None in the prelude)."""
    where = (1, 1) if report.pos is None else agent_position(sent, *text.from_lsp(report.pos.start.as_lsp(), encoding))
    message = report.msg.rstrip()
    failure = hol.is_eval_failure(report)
    if where is None:  # in the prelude: an ancestor that is not loaded, most likely; the code still runs
        if failure:
            out.warnings.append(f"prelude: {message}")
        return None
    said = f"{where[0]}:{where[1]}: {message}"
    (out.errors if failure else out.warnings).append(said)
    return where


def agent_position(sent: Sent, line: int, col: int) -> tuple[int, int] | None:
    """A 1-based (line, col) of the sent code as one in the agent's code; None in the prelude."""
    at = line - 1 - sent.prelude_lines  # 0-based, counted from the agent's first line
    if at < 0:
        return None
    if sent.wrapped is not None:
        split_line, split_col = sent.wrapped
        if at == split_line + 1:  # the wrapper's `val it = (`: the expression as a whole
            return split_line + 1, split_col + 1
        if at == split_line + 2:  # the rest of the line the expression starts on
            return split_line + 1, col + split_col
        if at > split_line:
            at -= 2
    if at >= len(sent.lines):  # the wrapper's `);`: what the code left open
        return len(sent.lines), len(sent.lines[-1]) + 1
    return at + 1, col


def _top_level_semicolons(tokens: list[tuple[int, str]]) -> list[int]:
    depth, found = 0, []
    for at, token in tokens:
        if token in ("(", "[", "{") or token in _OPENERS:
            depth += 1
        elif token in (")", "]", "}", "end"):
            depth = max(0, depth - 1)
        elif token == ";" and depth == 0:
            found.append(at)
    return found


def _final_semicolon(masked: str) -> int | None:
    """The offset of a `;` that ends the code (nothing but blanks after it), if there is one."""
    stripped = masked.rstrip()
    return len(stripped) - 1 if stripped.endswith(";") else None


def _mask(code: str) -> str:
    """`code` with comments blanked, and strings and term quotations reduced to a `q`, offsets kept."""
    out, i, n = list(code), 0, len(code)
    while i < n:
        end = _skip(code, i)
        if end > i:
            for k in range(i, end):
                if out[k] != "\n":
                    out[k] = " "
            if not code.startswith("(*", i):
                out[i] = "q"  # a string or quotation is still an expression's token
            i = end
        else:
            i += 1
    return "".join(out)


def _skip(code: str, i: int) -> int:
    """The end of the comment, string or quotation starting at `i`, or `i` if none does."""
    if code.startswith("(*", i):
        depth, k = 1, i + 2
        while k < len(code) and depth:
            if code.startswith("(*", k):
                depth, k = depth + 1, k + 2
            elif code.startswith("*)", k):
                depth, k = depth - 1, k + 2
            else:
                k += 1
        return k
    if code[i] == '"':
        k = i + 1
        while k < len(code) and code[k] != '"':
            k += 2 if code[k] == "\\" else 1
        return min(k + 1, len(code))
    for opening, closing in _QUOTES:
        if code.startswith(opening, i):
            k = code.find(closing, i + len(opening))
            return len(code) if k < 0 else k + len(closing)
    return i
