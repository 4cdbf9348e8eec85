"""The census: the proofs HOL's pool reports for a text, and whether this pass has given each its final word.

HOL never says "all proofs done" (docs/protocol.md#proof-states-and-the-census), but it says enough.
Every `cheated` and `checking` of a pass comes before that pass's
`$/compileCompleted` (verdicts may come before or after it: transcripts
edit-timing-rich-list*), so once the compile of the current version has
completed, a proof whose status is a verdict has its final word for this
pass, and one still `cheated` or `checking` does not.  The census is the
text's theorems that get a pool entry: not those inside `local … end`, nor
one whose declaration does not compile (no entry, or `cheated` for good).

When the text and HOL disagree (HOL reports a proof the text does not
declare, or has no entry for one it should have), or the completion named
no version or no census, the census cannot be trusted and the caller falls
back to a quiet period.
"""

from __future__ import annotations

import enum

from holsrv.lsp.proofstates import ProofStatus
from holsrv.text import textinfo
from holsrv.text.textinfo import Blocks
from holsrv.verdict.compileerrors import compile_errors
from holsrv.verdict.diagnosticlist import diagnostics
from holsrv.verdict.filestate import SETTLED, WRONG, FileState, Phase


class Census(enum.Enum):
    OVER = "over"  # every proof of the census has its final word for this pass
    PENDING = "pending"  # one is still dropped or checking in this pass
    UNTRUSTED = "untrusted"  # the text's census and HOL's pool disagree, or HOL gave none


def judge(file: FileState) -> Census:
    """Whether the pass over the current text has given every proof of its census a final word."""
    if file.judged is not None and file.judged[0] == file.revision:
        return file.judged[1]
    verdict = _judge(file)
    file.judged = (file.revision, verdict)
    return verdict


def _judge(file: FileState) -> Census:
    if file.phase != Phase.COMPLETED or file.completed_version != file.version or not file.census_given:
        return Census.UNTRUSTED
    pooled = textinfo.of(file.text).pooled  # once per text
    if any(name not in pooled for name in file.proofs):
        return Census.UNTRUSTED  # a state HOL sent that the census does not know
    unsaid = [name for name, entry in file.proofs.items() if entry.status not in SETTLED and entry.status not in WRONG]
    checking = ProofStatus.CHECKING  # a local, per proof (see `filestate._CHECKING`)
    if any(file.proofs[name].status == checking for name in unsaid):
        return Census.PENDING
    missing = [name for name in pooled if name not in file.proofs] if len(file.proofs) < len(pooled) else []
    if not unsaid and not missing:
        return Census.OVER
    # A declaration that does not compile gets no entry on a fresh open, and
    # stays `cheated` after an edit (transcripts error-classes,
    # candidate-unbound-name): its compile error is its final word.  Only
    # lines and zero-width ranges matter here, the same in any encoding.
    excused = compile_errors(Blocks(file.text), diagnostics(file, "utf-8", set()))
    if any(name not in excused for name in missing):
        return Census.UNTRUSTED  # HOL does not pool a theorem the scanner thinks it does
    return Census.PENDING if any(name not in excused for name in unsaid) else Census.OVER
