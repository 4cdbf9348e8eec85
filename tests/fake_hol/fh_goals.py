"""Deterministic stand-ins for HOL's tactics: split a proof body into tactic
atoms, decide what the proof pool would say about it (from marker words),
and walk the atoms to produce a goal state."""

import re
from dataclasses import dataclass

import fh_catalog
from fh_script import string_literal

# Separators between tactic atoms; structural, so they never count as steps.
_SEP_RE = re.compile(r">>|\\\\|>-|>\||\bTHENL\b|\bTHEN1\b|\bTHEN\b|\bby\b|\bsuffices_by\b")
_STRUCTURAL = {"ALL_TAC"}


@dataclass
class Atom:
    start: int
    end: int
    text: str

    def head(self):
        words = re.findall(r"[A-Za-z_][A-Za-z0-9_'.]*", self.text)
        while words and words[0] in ("rpt", "REPEAT", "TRY", "try"):
            words = words[1:]
        return words[0] if words else ""


def atoms(text, masked, start, end):
    """Tactic atoms of text[start:end], split on the tactic combinators at
    bracket depth 0, with surrounding parentheses and blanks trimmed."""
    out, depth, piece = [], 0, start
    i = start
    while i < end:
        c = masked[i]
        if c == "[":
            depth += 1
        elif c == "]":
            depth = max(0, depth - 1)
        elif depth == 0:
            m = _SEP_RE.match(masked, i, end)
            if m:
                _add_atom(out, text, masked, piece, i)
                piece = i = m.end()
                continue
        i += 1
    _add_atom(out, text, masked, piece, end)
    return out


def _add_atom(out, text, masked, a, b):
    while a < b and (masked[a].isspace() or masked[a] == "("):
        a += 1
    while b > a and (masked[b - 1].isspace() or masked[b - 1] == ")"):
        b -= 1
    if b > a:
        # put back a closing paren that belongs to the atom itself, e.g. FAIL_TAC(..)
        while b < len(masked) and text[a:b].count("(") > text[a:b].count(")") and masked[b] == ")":
            b += 1
        out.append(Atom(a, b, text[a:b]))


# ---------------------------------------------------------------- pool verdicts

_REPEATED = re.compile(r"\b(?:REPEAT|rpt)\s+$")


def undeclared(word):
    """An identifier the fake treats as unbound: `not_a_tactic`, or `NO_SUCH_THM` /
    `no_such_tac` as in the recordings (candidate-unbound-name, error-classes)."""
    return "not_a_tactic" in word or word.lower().startswith("no_such")


def repeats_all(atom_text):
    """`REPEAT ALL_TAC` / `rpt ALL_TAC`: loops in the pool and in the walk."""
    return re.fullmatch(r"\(*\s*(?:REPEAT|rpt)\s+ALL_TAC\s*\)*", atom_text) is not None

@dataclass
class Plan:
    """What the proof pool will do with a proof body, in order."""
    steps: list            # (kind, arg, atom) with kind in sleep|loop|grow|crash|fail
    suspends: list
    diverges: bool
    uncompilable: list     # (start, end, word) of undeclared identifiers


def plan(text, masked, body, stmt_text):
    st = Plan([], [], False, [])
    for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_']*", masked[body[0]:body[1]]):
        word, a = m.group(0), body[0] + m.start()
        _plan_word(st, word, a, text, masked)
    if not st.steps or all(k == "sleep" for k, _, _ in st.steps):
        bad = _false_arithmetic(stmt_text)
        if bad:
            st.steps.append(("fail", "NO_TAC", None))
    return st


def _plan_word(st, word, a, text, masked):
    if undeclared(word):
        st.uncompilable.append((a, a + len(word), word))
    elif word == "ALL_TAC" and _REPEATED.search(masked[max(0, a - 20):a]):
        st.steps.append(("loop", None, a))  # `REPEAT ALL_TAC` never ends: ALL_TAC always succeeds
    elif word == "FAIL_TAC":
        st.steps.append(("fail", _string_after(text, masked, a + len(word)) or "", a))
    elif word == "NO_TAC":
        st.steps.append(("fail", "NO_TAC", a))
    elif word in ("LOOP_TAC", "GROW_TAC", "CRASH_TAC"):
        st.steps.append((word[:-4].lower(), None, a))
    elif word == "SLOW_TAC":
        m = re.match(r"\s*\(?\s*(\d+)", masked[a + len(word):])
        st.steps.append(("sleep", int(m.group(1)) if m else 0, a))
    elif word == "suspend":
        label = _string_after(text, masked, a + len(word))
        if label is not None:
            st.suspends.append(label)
    elif word == "DIVERGE_TAC":
        st.diverges = True


def _string_after(text, masked, i):
    m = re.match(r"\s*\(?\s*\"", text[i:])
    if not m:
        return None
    return string_literal(text, i + m.end() - 1)


def _false_arithmetic(stmt):
    """A ground numeral equation that is false (e.g. `1 + 1 = 3`): the real
    decision procedures fail on it with NO_TAC, so the fake does too."""
    s = " ".join(stmt.split())
    if not re.fullmatch(r"[0-9+*\- ()]+=[0-9+*\- ()]+", s):
        return False
    lhs, rhs = s.split("=")
    try:
        return _arith(lhs) != _arith(rhs)
    except (ValueError, SyntaxError):
        return False


def _arith(expr):
    total = 0
    for term in expr.split("+"):
        prod = 1
        for f in term.split("*"):
            prod *= int(f.strip().strip("()") or "x")
        total += prod
    return total


# ---------------------------------------------------------------- goal terms

_SYMBOLS = [("==>", "⇒"), ("<=>", "⇔"), ("/\\", "∧"), ("\\/", "∨"), ("!", "∀"), ("?", "∃"), ("~", "¬")]


def normalise(stmt):
    """The statement as HOL would print it (whitespace collapsed, ASCII
    connectives as Unicode, binder type annotations dropped)."""
    s = " ".join(stmt.split())
    for a, b in _SYMBOLS:
        s = s.replace(a, b)
    s = re.sub(r"([∀∃λ])\s+", r"\1", s)
    return re.sub(r"([∀∃λ][^.]*?)\.", lambda m: re.sub(r":[^\s.]+", "", m.group(1)) + ".", s)


def _top_level(goal, op):
    depth = 0
    for i, c in enumerate(goal):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and goal.startswith(op, i):
            return i
    return -1


def _binder(goal):
    m = re.match(r"([∀∃λ])([^.]*)\.\s*", goal)
    return (m.group(1), m.group(2).split(), goal[m.end():]) if m else None


def strip_one(goal):
    b = _binder(goal)
    if not b or b[0] != "∀":
        return goal
    _, vs, rest = b
    return rest if len(vs) <= 1 else "∀" + " ".join(vs[1:]) + ". " + rest


def _unparen(s):
    s = s.strip()
    if s.startswith("(") and s.endswith(")") and _top_level(s[1:-1], ")") == -1:
        return s[1:-1].strip()
    return s


def split_conj(s):
    s = _unparen(s)
    i = _top_level(s, "∧")
    if i < 0 or _binder(s) or _top_level(s, "⇒") >= 0 or _top_level(s, "∨") >= 0:
        return [s]
    return split_conj(s[:i]) + split_conj(s[i + 1:])


def strip_all(asms, goal):
    while True:
        b = _binder(goal)
        if b and b[0] == "∀":
            goal = b[2]
            continue
        i = -1 if b else _top_level(goal, "⇒")
        if i < 0:
            return asms, goal
        asms = asms + [a for a in split_conj(goal[:i]) if a]
        goal = _unparen(goal[i + 1:])


# ---------------------------------------------------------------- the walk

class Walk:
    """Result of walking a proof's atoms up to a cursor."""

    def __init__(self, goals, step, error=None, failed=None, timed_out=False):
        self.goals, self.step, self.error = goals, step, error
        self.failed, self.timed_out = failed, timed_out


def walk(initial, proof_atoms, cursor, budget_s, cancel, consts=(), on_loop=None):
    """Run atoms that end at or before `cursor` over [initial].  With no budget
    (`budget_s` None: a walker with no time limit), a looping atom calls
    `on_loop`, which never returns (walk-of-a-loop.jsonl)."""
    goals, step = [([], initial)], 0
    for atom in proof_atoms:
        if atom.end > cursor:
            break
        if budget_s is None and (repeats_all(atom.text) or atom.head() in ("LOOP_TAC", "GROW_TAC")):
            on_loop()
        if budget_s is None:
            budget_s = 3600.0  # no limit: only a loop never ends
        if repeats_all(atom.text):
            cancel.wait(budget_s)
            return Walk([], step + 1, "walker timed out (>1500ms)", None, True)
        if atom.head() in _STRUCTURAL:
            continue
        outcome = _apply(atom, goals, budget_s, cancel)
        if outcome == "timeout":
            return Walk([], step + 1, "walker timed out (>1500ms)", None, True)
        if outcome == "fail":
            return Walk(goals, step + 1, f"Tactic `{atom.text}` failed to apply", atom)
        goals = outcome
        step += 1
    return Walk(goals, step)


def _apply(atom, goals, budget_s, cancel):
    head, text = atom.head(), atom.text
    if head in ("LOOP_TAC", "GROW_TAC"):
        cancel.wait(budget_s)
        return "timeout"
    if head == "SLOW_TAC":
        m = re.search(r"\d+", text)
        ms = int(m.group(0)) if m else 0
        if cancel.wait(min(ms / 1000, budget_s)) or ms / 1000 >= budget_s:
            return "timeout"
        return goals
    if head in ("FAIL_TAC", "NO_TAC"):
        return "fail"
    if not goals:
        return goals
    (asms, goal), rest = goals[0], goals[1:]
    return _effect(head, text, asms, goal, rest)


def _effect(head, text, asms, goal, rest):
    if head in ("gen_tac", "GEN_TAC", "Induct", "Induct_on", "X_GEN_TAC", "qx_gen_tac"):
        return [(asms, strip_one(goal))] + rest
    if head in ("strip_tac", "STRIP_TAC", "disch_tac", "DISCH_TAC"):
        if text.split()[0] in ("rpt", "REPEAT"):
            return [strip_all(asms, goal)] + rest
        return [_strip_once(asms, goal)] + rest
    if head in ("conj_tac", "CONJ_TAC"):
        parts = split_conj(goal)
        if len(parts) < 2:
            return "fail"
        return [(asms, parts[0]), (asms, " ∧ ".join(parts[1:]))] + rest
    if head in fh_catalog.PROVERS:
        if (head == "ACCEPT_TAC" and "TRUTH" in text and goal != "T") or _false_arithmetic(goal):
            return "fail"
        return rest
    return [(asms, goal)] + rest


def _strip_once(asms, goal):
    b = _binder(goal)
    if b and b[0] == "∀":
        return asms, strip_one(goal)
    i = -1 if b else _top_level(goal, "⇒")
    if i < 0:
        return asms, goal
    return asms + split_conj(goal[:i]), _unparen(goal[i + 1:])


# ---------------------------------------------------------------- rendering

_NOT_VARS = {"if", "then", "else", "let", "in", "and", "case", "of", "T", "F"}


def _bound_vars(s):
    out = set()
    for m in re.finditer(r"[∀∃λ]([^.]*)\.", s):
        out.update(m.group(1).split())
    return out


def render(goals, consts=()):
    """(pretty, segments): REPL layout, current goal last, free variables
    in bold ANSI; segments concatenate to pretty without the escapes."""
    if not goals:
        return "Initial goal proved.\n", [{"text": "Initial goal proved.\n"}]
    blocks = [_goal_lines(asms, g) for asms, g in reversed(goals)]
    plain = "\n\n".join(blocks) + "\n"
    bound = set().union(*(_bound_vars(g) | set().union(*map(_bound_vars, a or [""])) for a, g in goals))
    return _annotate(plain, bound, set(consts))


def _goal_lines(asms, goal):
    if not asms:
        return goal
    lines = [f"{i:>5}.  {a}" for i, a in enumerate(asms)]
    lines.append("   ------------------------------------")
    lines.append(f"        {goal}")
    return "\n".join(lines)


def _annotate(plain, bound, consts):
    pretty, segs, last = [], [], 0
    for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_']*", plain):
        word = m.group(0)
        kind = _word_kind(word, bound, consts)
        if not kind or (m.start() > 0 and plain[m.start() - 1].isdigit()):
            continue
        _plain_piece(plain[last:m.start()], pretty, segs)
        seg = {"text": word, "kind": kind}
        if kind in ("fv", "bv"):
            seg["ty"] = word + " :α"
        segs.append(seg)
        pretty.append(f"\x1b[1m{word}\x1b[0m" if kind == "fv" else word)
        last = m.end()
    _plain_piece(plain[last:], pretty, segs)
    return "".join(pretty), segs


def _word_kind(word, bound, consts):
    if word in _NOT_VARS:
        return None
    if word in bound:
        return "bv"
    if word in consts or not word[0].islower():
        return None
    return "fv"


def _plain_piece(s, pretty, segs):
    if s:
        pretty.append(s)
        segs.append({"text": s})
