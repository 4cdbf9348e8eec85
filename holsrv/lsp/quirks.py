"""HOL's quirks as named predicates, and the text cleaning its messages need.

Every protocol decision that rests on HOL's words or shapes is named here
once (docs/protocol.md#requests, #goal-states, #eval, #quirks), never sniffed for at the call site.
Pure: testable without a server.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from holsrv.errors import LspError
from holsrv.lsp.evalreports import ErrorReport
from holsrv.lsp.goalstates import GoalState, Pending
from holsrv.lsp.proofstates import ProofStatus
from holsrv.lsp.shapes import Diagnostic

UNKNOWN_METHOD = -32600  # HOL's code for a method it lacks; not -32601 (docs/protocol.md#json-rpc, #methods-hol-lacks)
_ANSI = re.compile(r"\x1B\[[0-9;]*m")
_WALK_TIMEOUT = re.compile(r"\btimed out\b", re.IGNORECASE)
_PARSE_RECOVERY = re.compile(r"\bexpected\b|\bunclosed quotation\b", re.IGNORECASE)
_NOT_COMPILING = re.compile(r"\bnot compiling\b")
# What HOL's module loader (tools-poly/poly/poly-init2.ML, `load`) writes to stderr for a module without a `.ui`.
_HOLDEP_NOISE = re.compile(r'(?:Cannot find file (\S+)\.ui|error in load (\S+) : Fail "Cannot find file \S+\.ui")')
_SML_ESCAPES = re.compile(r"(?:\\(?:2[0-5][0-9]|1[0-9][0-9]))+")  # bytes 128-255 in SML's \ddd
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_NO_PROOF_CHECKING = re.compile(r"^Unrecognized option: --lsp-check-proofs\b", re.MULTILINE)


# -- HOL's quirks ---------------------------------------------------------------


def lacks_proof_checking(stderr: str) -> bool:
    """What an older `hol lsp` (the July 2026 one) says when started with
    `--lsp-check-proofs`, before it exits 1 unspoken (docs/protocol.md#launch, #the-july-2026-server)."""
    return _NO_PROOF_CHECKING.search(stderr) is not None


def is_pending(reply: GoalState | Pending | None) -> bool:
    """HOL's bare pending answer: no goal state yet, ask after `$/compileCompleted`
    (docs/protocol.md#goal-state-answers, #not-ready-yet)."""
    return isinstance(reply, Pending)


def is_provisional(reply: GoalState | Pending | None) -> bool:
    """A full goal state marked `status: pending`: the file's compile is unfinished; show, don't trust
    (docs/protocol.md#goal-state-answers)."""
    return isinstance(reply, GoalState) and reply.status == "pending"


def walk_timed_out(reply: GoalState | Pending | None) -> bool:
    """The goal-state walk ran out of time (`walker timed out (>1500ms)`,
    docs/protocol.md#goal-state-answers): don't cache it."""
    return isinstance(reply, GoalState) and bool(_WALK_TIMEOUT.search(reply.error))


def is_settled(reply: GoalState | Pending | None) -> bool:
    """A full goal state that asking again would not improve: neither provisional nor timed out
    (docs/protocol.md#goal-state-answers, #goal-state-walks)."""
    return isinstance(reply, GoalState) and not is_provisional(reply) and not walk_timed_out(reply)


def is_unknown_method(err: BaseException, method: str | None = None) -> bool:
    """HOL lacks the method: error -32600 `unknown method: <method>` (docs/protocol.md#json-rpc, #methods-hol-lacks)."""
    if not isinstance(err, LspError) or err.rpc_code != UNKNOWN_METHOD:
        return False
    said = str(err)
    return said.startswith("unknown method") and (method is None or said.endswith(method))


def is_not_compiling_notice(message: str) -> bool:
    """A showMessage/logMessage saying HOL will not compile a file: blocked or refused
    (docs/protocol.md#log-and-show-messages)."""
    return bool(_NOT_COMPILING.search(message))


def is_parse_report(message: str) -> bool:
    """HOL's words for a parse error it recovered from (`expected …`), which it marks soft
    (a severity-2 diagnostic, an eval report with `hard: false`) though what it went on
    with is not the text as written."""
    return bool(_PARSE_RECOVERY.search(message))


def is_parse_recovery(diagnostic: Diagnostic | Mapping[str, Any]) -> bool:
    """A warning that is really a parse error HOL recovered from; Holmake fails on it (docs/protocol.md#diagnostics)."""
    if isinstance(diagnostic, Mapping):
        severity, message = diagnostic.get("severity"), str(diagnostic.get("message", ""))
    else:
        severity, message = diagnostic.severity, diagnostic.message
    return severity == 2 and is_parse_report(message)


def is_eval_failure(report: ErrorReport) -> bool:
    """An `$/eval` error report that means the code did not run as written: a hard one (a type
    error, an uncaught exception) or a parse error, which HOL marks `hard: false` (transcript
    `eval-errors`).  Only the rest (`Matches are not exhaustive.`, a free type variable) are warnings."""
    return report.hard or is_parse_report(report.msg)


def did_not_compile(status: str | None, error_in_proof: bool, compiled: bool) -> bool:
    """A proof HOL will never check because its `Proof … QED` does not compile.

    After `$/compileCompleted`, with a compile error inside the block, the pool
    leaves such a proof `cheated` after an edit (no `checking`, no verdict), or
    has no entry for it on a fresh open; `status` None means no entry
    (transcripts candidate-unbound-name, error-classes).
    """
    return compiled and error_in_proof and status in (None, ProofStatus.CHEATED)


def is_compile_error(diagnostic: Mapping[str, Any]) -> bool:
    """An error the compile reported, not one of the pool's own about a failed proof
    (docs/protocol.md#proof-diagnostics)."""
    return diagnostic.get("severity") == 1 and not is_proof_diagnostic(str(diagnostic.get("message", "")))


def is_proof_failure(message: str) -> bool:
    """The pool's `proof failed: …` error, first on the theorem's name, later on the failing step
    (docs/protocol.md#proof-diagnostics)."""
    return message.startswith("proof failed")


def is_failing_branch_end(message: str) -> bool:
    """The pool's second error, on the closing paren of a failing `>-` branch (docs/protocol.md#proof-diagnostics)."""
    return message.startswith("end of the failing branch")


def is_proof_diagnostic(message: str) -> bool:
    """One of the pool's own diagnostics about a failed proof, not the compile's
    (docs/protocol.md#proof-diagnostics)."""
    return is_proof_failure(message) or is_failing_branch_end(message)


def readable(message: str) -> str:
    """HOL's message text as a reader should see it.

    SML prints non-ASCII bytes of a string as decimal escapes (`\\206\\177`
    is the UTF-8 of `α`); a run of them that decodes as UTF-8 is decoded.
    Other control characters are shown as `\\xNN` rather than sent raw.
    """
    decoded = _SML_ESCAPES.sub(_decode_escapes, message)
    return _CONTROL.sub(lambda c: f"\\x{ord(c.group()):02x}", decoded)


def _decode_escapes(run: re.Match) -> str:
    try:
        return bytes(int(code) for code in run.group()[1:].split("\\")).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return run.group()


def is_holdep_noise(line: str, names: Collection[str]) -> bool:
    """A stderr line from `$/eval`'s dependency load of a module `names` mentions that has no `.ui`.

    With `holdep` 1 HOL tries to load every structure the code names, Basis ones
    (`PolyML`, `TextIO`) included; each miss writes `Cannot find file X.ui` and
    `error in load X : Fail "…"` and is otherwise ignored (docs/protocol.md#eval).  A real
    miss still shows, as the compile's `Structure (X) has not been declared`.
    """
    match = _HOLDEP_NOISE.fullmatch(line.strip())
    if match is None:
        return False
    module = (match.group(1) or match.group(2)).rsplit("/", 1)[-1]
    return module in names


def without_holdep_noise(text: str, names: Collection[str]) -> str:
    """`text` (server stderr) without the `is_holdep_noise` lines."""
    kept = [line for line in text.splitlines(keepends=True) if not is_holdep_noise(line, names)]
    return "".join(kept)


def sml_string(text: str) -> str:
    """`text` as an SML string literal: quotes, backslashes and control characters escaped."""
    def escape(c: str) -> str:
        if c in '"\\':
            return "\\" + c
        return f"\\{ord(c):03d}" if ord(c) < 32 or ord(c) == 127 else c
    return '"' + "".join(escape(c) for c in text) + '"'


def sml_unquote(printed: str) -> str:
    """A string as `PolyML.print` shows it (`"a\\nb"`), as text; anything else as it is."""
    if len(printed) < 2 or not (printed.startswith('"') and printed.endswith('"')):
        return printed
    simple = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
    return re.sub(r'\\(\d{3}|.)', lambda e: simple.get(e.group(1), e.group()), printed[1:-1])


def strip_ansi(text: str) -> str:
    """`text` without the colour escapes HOL puts in goal-state text (docs/protocol.md#goal-state-answers)."""
    return _ANSI.sub("", text)
