"""The oracles-and-axioms check of `verify`: HOL's own record of what each theorem rests on.

HOL records in each theorem's tag the oracles it rests on (`cheat` among
them) and, for a theorem made in the session, the axioms; a theorem loaded
from a built theory lists no axioms in its tag (transcript `theorem-tags`:
`uses_ax`, proved from `new_axiom`, reads `(["DISK_THM"], [])` once loaded,
while `DB.axioms "tags"` lists `my_ax`).  The server's own copies of the
file's theorems carry only a placeholder (`lsp_deferred`), so after a
Holmake build the daemon asks the file's server, in one `$/eval` (`holdep`
0, bounded), to `load` the built theory and print, for each of its
theorems, its tag's oracles and axioms, and the axioms of that theory and
of the development's ancestor theories (`query_code`).

Judged (`judge`): no theorem carries `cheat`; other oracles than HOL's own
`DISK_THM` only from the `verify_oracles` setting; no axiom in the file's
theory or the development's ancestors unless `verify_axioms` names it.
The eval leaves the theory loaded in that server's session (an eval's effects
stay: docs/protocol.md#eval): the recordings show a later answer unharmed by it,
but not a later compile, so `verify` has a fresh server take over in the
background (`Replacer.refresh`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from holsrv.answers.states import CheckStatus
from holsrv.lsp import theorydb
from holsrv.lsp.quirks import sml_string
from holsrv.rpc import messages as m

MAX_ROWS = 20_000  # theorems and axioms read from one answer
SHOWN = 10  # names shown in a summary
HOL_OWN = frozenset({"DISK_THM"})  # the oracle HOL gives every theorem loaded from disk


def query_code(theory: str, ancestors: list[str]) -> str:
    """The code loading `theory`'s build and printing one line per theorem (`T`, name, its
    oracles, its axioms) and per axiom of `theory` and `ancestors` (`A`, theory, name)."""
    listed = ", ".join(sml_string(t) for t in [theory, *ancestors][:256])
    return (f"val _ = PolyML.print (let val thy = {sml_string(theory)} val _ = load {sml_string(theory + 'Theory')} "
            'fun thm (n, th) = let val (os, axs) = Tag.dest_tag (Thm.tag th) in "T\\t" ^ n ^ "\\t" ^ '
            'String.concatWith " " os ^ "\\t" ^ String.concatWith " " axs end '
            'fun axioms t = map (fn (n, _) => "A\\t" ^ t ^ "\\t" ^ n) (DB.axioms t) handle _ => [] '
            'in String.concatWith "\\n" (map thm (DB.thms thy) @ List.concat (map axioms '
            f"[{listed}])) end" + theorydb.FAILED)


@dataclass
class Record:
    """HOL's answer: each theorem's (oracles, axioms), and the axioms by theory."""

    tags: dict[str, tuple[list[str], list[str]]] = field(default_factory=dict)
    axioms: list[tuple[str, str]] = field(default_factory=list)


def parse(printed: str) -> Record:
    record = Record()
    for line in printed.splitlines()[:MAX_ROWS]:
        parts = line.split("\t")
        if len(parts) == 4 and parts[0] == "T":
            record.tags[parts[1]] = (parts[2].split(), parts[3].split())
        elif len(parts) == 3 and parts[0] == "A":
            record.axioms.append((parts[1], parts[2]))
    return record


def judge(record: Record, theory: str, allowed_oracles: tuple[str, ...],
          allowed_axioms: tuple[str, ...]) -> m.VerifyCheck:
    """The check's verdict on `record`, HOL's answer about `theory`."""
    if not record.tags:
        return m.VerifyCheck("oracles", CheckStatus.UNCHECKED, f"HOL listed no theorems of {theory}Theory, so "
                             "what they rest on could not be read.")
    evidence: list[str] = []
    cheated, other, placeholder = [], [], []
    for name, (oracles, axioms) in record.tags.items():
        if "lsp_deferred" in oracles:
            placeholder.append(name)
        if "cheat" in oracles:
            cheated.append(name)
            evidence.append(f"{name}: oracles {', '.join(oracles)} (cheat)")
        extra = [o for o in oracles if o not in HOL_OWN and o not in ("cheat", "lsp_deferred")
                 and o not in allowed_oracles]
        extra += [f"axiom {a}" for a in axioms if a not in allowed_axioms and f"{theory}.{a}" not in allowed_axioms]
        if extra:
            other.append(name)
            evidence.append(f"{name}: rests on {', '.join(extra)}")
    axioms = [f"{t}.{n}" for t, n in record.axioms if f"{t}.{n}" not in allowed_axioms and n not in allowed_axioms]
    evidence += [f"axiom {a} (DB.axioms {a.split('.')[0]})" for a in axioms]
    problems = []
    if cheated:
        problems.append(f"{_names(cheated)} rest{'s' if len(cheated) == 1 else ''} on cheat")
    if other:
        problems.append(f"{_names(other)} rest{'s' if len(other) == 1 else ''} on oracles or axioms not allowed "
                        "(settings verify_oracles, verify_axioms)")
    if axioms:
        problems.append(f"axioms not allowed: {_names(axioms)} (new_axiom; setting verify_axioms)")
    if problems:
        return m.VerifyCheck("oracles", CheckStatus.FAILED, "HOL's record: " + "; ".join(problems) + ".", evidence)
    if placeholder:
        return m.VerifyCheck("oracles", CheckStatus.UNCHECKED, "HOL gave only placeholder tags for "
                             f"{_names(placeholder)} (its session's copies, not the built theory's), so their "
                             "oracles could not be read.",
                             evidence)
    return m.VerifyCheck("oracles", CheckStatus.PASSED, f"HOL's record of {len(record.tags)} theorems of "
                         f"{theory}Theory: no cheat, no oracle or axiom beyond those allowed.", evidence)


def _names(names: list[str]) -> str:
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
