"""Generated HOL scripts of a chosen size, shaped like HOL's own theories.

`rich_listScript.sml` (276 KB, 8,747 lines, 563 proofs) averages about 490
bytes per theorem: a statement quotation, a few tactic lines, and comments
and strings now and then.  The generator repeats that shape, with Unicode
syntax, nested comments and string escapes, so the daemon's scans meet what
real scripts give them.  Every proof is one the fake HOL proves.
"""

from __future__ import annotations

import random

HEADER = """\
Theory {name}
Ancestors
  arithmetic list

(* Generated for holsrv's benchmark: the shape of a real theory. *)

"""

_STATEMENTS = [
    "‘∀l n. LENGTH (REPLICATE n x) = n ∧ EVERY P l ⇒ MEM x l ∨ l = []’",
    "“∀m n:num. m + SUC n = SUC (m + n)”",
    "‘!f l1 l2. MAP f (l1 ++ l2) = MAP f l1 ++ MAP f l2’",
    "`!n. EVEN n \\/ ODD n`",
    "‘∀P l. EXISTS P l ⇔ ¬EVERY ($~ o P) l’",
]
_TACTICS = [
    "rpt strip_tac >> simp[LENGTH_REPLICATE]",
    "Induct_on ‘l’ >> gvs[] >> metis_tac[]",
    "rw[listTheory.MAP_APPEND] \\\\ fs[]",
    "qspec_then ‘n’ mp_tac arithmeticTheory.LESS_EQ_REFL >> simp[]",
    "gen_tac >> simp[]",
    "strip_tac >> first_x_assum irule >> simp[]",
]
_COMMENTS = [
    "(* the base case is trivial *)",
    "(* uses (* nested *) comments, as SML allows *)",
    '(* a "quoted" word and a ‘term’ inside a comment *)',
    "(* cheat here would be a word in a comment, not a tactic *)",
]


def generate(size_bytes: int, name: str = "gen", seed: int = 11) -> str:
    """A script of about `size_bytes` bytes (UTF-8), deterministic for a seed."""
    rng = random.Random(seed)
    parts = [HEADER.format(name=name)]
    total = len(parts[0].encode())
    index = 0
    while total < size_bytes:
        chunk = _theorem(rng, index) if index % 8 else _definition(rng, index) + _theorem(rng, index)
        parts.append(chunk)
        total += len(chunk.encode())
        index += 1
    return "".join(parts)


def _theorem(rng: random.Random, index: int) -> str:
    lines = [rng.choice(_COMMENTS)] if rng.random() < 0.3 else []
    lines += [f"Theorem thm_{index}:", f"  {rng.choice(_STATEMENTS)}", "Proof"]
    steps = rng.randint(2, 5)
    for step in range(steps):
        tactic = rng.choice(_TACTICS)
        lines.append(f"  {tactic}{' >>' if step < steps - 1 else ''}")
        if rng.random() < 0.15:
            lines.append(f"  {rng.choice(_COMMENTS)}")
    lines += ["QED", ""]
    if rng.random() < 0.1:
        lines += [f'val _ = print "thm_{index} done\\n\\"ok\\"\\n";', ""]
    return "\n".join(lines) + "\n"


def _definition(rng: random.Random, index: int) -> str:
    return (
        f"Definition fn_{index}_def:\n"
        f"  fn_{index} [] = 0 ∧\n"
        f"  fn_{index} (h::t) = h + fn_{index} t\n"
        "End\n\n"
    )
