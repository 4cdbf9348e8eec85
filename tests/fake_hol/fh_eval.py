"""A toy SML top level for `$/eval`, shaped like the real one.

The real server compiles eval code on a request thread of its own against a
namespace where nothing is opened (tools-poly/lsp/README.md, "Hover"), so:

* `EVAL`, `prove`, `rw`, `>>` … are undeclared until `open bossLib;` (or
  `open HolKernel Parse boolLib bossLib;`), a theorem name until its theory is
  opened (`open arithmeticTheory;`); qualified names (`DB.find`,
  `arithmeticTheory.ADD_COMM`) always resolve;
* bindings and opens last for one call (the caller's `env` is fresh each call);
* a bare expression binds `it` and prints nothing; `PolyML.print` prints (to
  the report stream, at the declaration's start); `print` goes to stderr;
* `val f = fn 0 => …` binds, with the soft (`hard: false`) report
  `Matches are not exhaustive.`;
* parse recovery is soft too: a missing expression (`val x = ;`, `1 + ;`)
  is `expected an expression`, read as `()`, and type-checking goes on;
  `raise E` reports a soft free-type-variable note, then the hard exception
  (transcript eval-errors);
* `load_deps` is what `holdep` ≠ 0 does first: every module the code names is
  loaded, and one that has no `.ui` (any Basis structure: `PolyML`, `TextIO`…)
  writes `Cannot find file X.ui` and `error in load X : …` to stderr.

Values: ints, strings, bools, unit, lists, tuples, theorems (`Thm`), and
opaque ones (`fn`).  `EVAL` knows `LENGTH [..]` and ground `+`/`*`; `DB.find`
searches `fh_catalog.THEOREMS`.  Loops run until cancelled.
"""

import re
import sys

import fh_built
import fh_catalog

_TYPE_ERROR = ("Type error in function application.\n"
               "   Function: + : int * int -> int\n"
               "   Argument: ({lhs}, {rhs}) : int * bool\n"
               "   Reason: Can't unify int (*In Basis*) with bool (*In Basis*)"
               " (Different type constructors)\n")
_NOT_EXHAUSTIVE = "Matches are not exhaustive.\n"

# Basis structures: always in scope, but no `.ui` for the loader to find.
BASIS = frozenset("""
    PolyML TextIO String Char Substring Int List Real Bool Option OS Word Word8
    Vector Array ListPair Math StringCvt IntInf LargeInt Time General CharVector
    """.split())
# What poly-init2.ML marks loaded at boot: the loader is quiet about these.
_MARKED_LOADED = frozenset("Real Int List Binaryset Binarymap Listsort Array Array2 Vector".split())
# HOL modules in the heap besides fh_catalog's libraries.
_HEAP = fh_catalog.STD_LIBS | frozenset("DB Lib Feedback Globals Portable Thm Term Type Theory Tag Dep".split())

_TACTICS = (frozenset(fh_catalog.SML_VALUES) - {"print"}) | fh_catalog.PROVERS
_EXPORTS = {
    "bossLib": _TACTICS | frozenset("EVAL prove store_thm Define Hol_defn >> >- THEN THENL ORELSE \\\\".split()),
    "boolLib": frozenset("concl hyp dest_thm mk_var mk_comb Term type_of".split()),
    "HolKernel": frozenset("concl hyp dest_thm mk_var mk_comb type_of".split()),
    "Parse": frozenset("Term Type term_to_string thm_to_string".split()),
    "DB": frozenset("find match fetch thms".split()),
}

_OPENED = object()  # env key: the structures opened so far in this call
_NOISED = object()  # env key: modules the loader has complained about
_SKIPPED = re.compile(r"(fun|structure|datatype|type|local|load|signature|functor|exception|infixr?|infixl|nonfix)\b")


class EvalError(Exception):
    """A compile or run error; `soft` are the `hard: false` reports HOL made before it."""

    def __init__(self, start, end, msg, hard=True, soft=()):
        super().__init__(msg)
        self.start, self.end, self.msg, self.hard, self.soft = start, end, msg, hard, list(soft)

    def reports(self):
        return [*self.soft, self]


# HOL's parse recovery (transcript eval-errors): a missing expression is reported
# soft, zero-width where it should start, and read as `()`.
_MISSING = "expected an expression"
_FREE_TYPE = "The type of ({name}) contains a free type variable. Setting it to a unique monotype.\n"
_UNIT_TYPE_ERROR = ("Type error in function application.\n"
                    "   Function: + : int * int -> int\n"
                    "   Argument: ({lhs}, ()) : int * unit\n"
                    "   Reason: Can't unify int to {{}} (Incompatible types)\n")


class Thm:
    def __init__(self, stmt):
        self.stmt = stmt

    def __str__(self):
        return self.stmt


class Opaque:
    """A value the toy does not compute with (a function, a tactic, …)."""

    def __init__(self, name):
        self.name = name


class Quote:
    def __init__(self, text):
        self.text = text


class Builtin:
    """One of the few functions the toy runs: PolyML.print, print, EVAL, DB.find."""

    def __init__(self, name):
        self.name = name


# ------------------------------------------------------------ declarations


def split_decls(code):
    """(start, end) of each top-level declaration, ending after its `;`
    (a trailing piece without `;` counts too).  A `;` inside brackets,
    `let … end`, a string, a comment or a term quotation does not split."""
    masked = _mask(code, strings=True)
    out, start, depth = [], 0, 0
    for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_']*|[()\[\]{};]", masked):
        tok = m.group()
        if tok in ("(", "[", "{", "let", "local", "struct", "sig"):
            depth += 1
        elif tok in (")", "]", "}", "end"):
            depth = max(0, depth - 1)
        elif tok == ";" and depth == 0:
            out.append((start, m.end()))
            start = m.end()
    if code[start:].strip() and masked[start:].strip():
        out.append((start, len(code)))
    return [(a + len(code[a:b]) - len(code[a:b].lstrip()), b) for a, b in out]


def loops(text):
    return "LOOP_TAC" in text or re.search(r"\bwhile\s+true\s+do\b", text) is not None


def load_deps(code):
    """What the real server does before compiling when `holdep` ≠ 0: load
    every module named by `open` or a qualified name; a module it cannot
    find is written to stderr and otherwise ignored.  Returns the modules
    it could not find (the server logs each, transcript eval-errors)."""
    masked = _mask(code, strings=True, quotes=True)
    names = set(re.findall(r"\b([A-Za-z_][A-Za-z0-9_']*)\.[A-Za-z_]", masked))
    for m in re.finditer(r"\bopen\s+((?:[A-Za-z_][A-Za-z0-9_']*\s*)+)", masked):
        names.update(m.group(1).split())
    missed = [name for name in sorted(names - _MARKED_LOADED - {"open"}) if not _loadable(name)]
    for name in missed:
        sys.stderr.write(f"Cannot find file {name}.ui\n"
                         f'error in load {name} : Fail "Cannot find file {name}.ui"\n')
    sys.stderr.flush()
    return missed


def run(text, start, env):
    """Run one declaration; return a list of (kind, offset, body) outputs.
    Raises EvalError for a compile/type error (offsets into the code); a
    soft one (`hard` false) after the declaration has taken effect."""
    text = _mask(text)  # comments out, offsets kept
    body = text.strip().rstrip(";").rstrip()
    at = start + len(text) - len(text.lstrip())
    out = []
    m = re.match(r"open\b", body)
    if m:
        _open(body, at, env)
        return out
    m = _PARSE_CHECK.fullmatch(body)
    if m:  # the daemon's check of a search pattern: HOL's parse error, or ""
        pattern = re.sub(r'\\(\d{3}|.)', _unescape, m.group(1))
        problem = term_problem(pattern)
        message = f"at Parse.Term:\n{problem}" if problem else ""
        shown = message.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        out.append(("toplevelOut", at, f'"{shown}"\n'))  # as PolyML.print shows a string
        return out
    tagged = tags_query(body, env)
    if tagged is not None:  # what a theorem rests on, as HOL's tags record it
        out.append(("toplevelOut", at, tagged))
        return out
    printed = db_query(body)
    if printed is not None:  # one of the daemon's theorem-database queries: one printed string
        shown = printed.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        out.append(("toplevelOut", at, f'"{shown}"\n'))
        return out
    m = re.fullmatch(r"val\s+([A-Za-z_][A-Za-z0-9_']*)\s*=\s*(.*)", body, re.S)
    if m and not m.group(2).strip():
        missing = start + len(text.rstrip().rstrip(";").rstrip())
        missing += len(text[missing - start:]) - len(text[missing - start:].lstrip())
        raise EvalError(missing, missing, _MISSING, hard=False)
    raised = _RAISE.fullmatch(m.group(2) if m else body)
    if raised:
        _raise(text, start, at, body, m.group(1) if m else "it", raised.group(1))
    if m:
        rhs_at = at + m.start(2)
        if re.match(r"fn\s+(\d+|\"[^\"]*\")\s*=>", m.group(2)) and "|" not in m.group(2):
            env[m.group(1)] = Opaque(m.group(1))
            raise EvalError(rhs_at, at + len(body), _NOT_EXHAUSTIVE, hard=False)
        value = _Eval(m.group(2), rhs_at, env, out, at).value()
        if m.group(1) != "_":
            env[m.group(1)] = value
        return out
    if _SKIPPED.match(body):
        m = re.match(r"fun\s+([A-Za-z_][A-Za-z0-9_']*)", body)
        if m:
            env[m.group(1)] = Opaque(m.group(1))
        return out
    if body:
        env["it"] = _Eval(body, at, env, out, at, stop=_semicolon(text, start, at, body)).value()
    return out


_RAISE = re.compile(r"\(*\s*raise\s+(.*?)\s*\)*", re.S)


def _semicolon(text, start, at, body):
    """The offset of the `;` ending a declaration, or of its end if it has none."""
    return start + text.rstrip().rfind(";") if text.rstrip().endswith(";") else at + len(body)


def _raise(text, start, at, body, name, exn):
    """An uncaught exception, as HOL reports it: the soft free-type-variable
    note (on the `;`), then the hard `Exception … raised` over the declaration."""
    semi = _semicolon(text, start, at, body)
    soft = EvalError(semi, semi + 1 if text.rstrip().endswith(";") else semi, _FREE_TYPE.format(name=name), hard=False)
    raise EvalError(at, at + len(body), f"Exception {' '.join(exn.split())} raised\n", soft=[soft])


# What the daemon sends to learn why a search pattern did not parse (holsrv.lsp.hol.parse_problem).
_PARSE_CHECK = re.compile(r'val _ = PolyML\.print \(\(ignore \(Parse\.Term \[QUOTE "((?:[^"\\]|\\.)*)"\]\); ""\) '
                          r'handle e => Feedback\.exn_to_string e\)')
# The daemon's theorem-database queries (holsrv.lsp.theorydb), exactly as it sends them.
_STR = r'"((?:[^"\\]|\\.)*)"'
_STRS = r'\[((?:"(?:[^"\\]|\\.)*"(?:, )?)*)\]'
_FAILS = r' handle e => "!" \^ Feedback\.exn_to_string e\)'
_POLARITY = re.compile(r'val _ = PolyML\.print \(String\.concatWith " " \(map \(fn \(\(thy, name\), _\) => '
                       r'thy \^ "\." \^ name\) \(DB\.polarity_search (true|false) \(Parse\.Term \[QUOTE '
                       + _STR + r'\]\)\)\)' + _FAILS)
_ANCESTRY = re.compile(r'val _ = PolyML\.print \(String\.concatWith " " \(List\.concat \(map \(fn t => t :: '
                       r'\(Theory\.ancestry t handle _ => \[\]\)\) ' + _STRS + r'\)\)' + _FAILS)
_DEPENDENCIES = re.compile(
    r'val _ = PolyML\.print \(let fun num th = Dep\.depnumber_of \(Dep\.depid_of \(Tag\.dep_of \(Thm\.tag th\)\)\) '
    r'fun named \(thy, n\) = case List\.find \(fn \(_, th\) => \(num th = n handle _ => false\)\) \(DB\.thms thy\) of '
    r'SOME \(nm, _\) => thy \^ "\." \^ nm \| NONE => thy \^ "#" \^ Int\.toString n '
    r'in String\.concatWith " " \(map named \(Dep\.depidl_of \(Tag\.dep_of \(Thm\.tag '
    r'\(DB\.fetch ' + _STR + " " + _STR + r'\)\)\)\)\) end' + _FAILS)
_STORED = re.compile(r'val _ = PolyML\.print \(String\.concatWith " " \(List\.mapPartial \(fn n => case List\.find '
                     r'\(fn t => Lib\.can \(DB\.fetch t\) n\) ' + _STRS + r' of SOME t => SOME \(t \^ "\." \^ n\) '
                     r'\| NONE => NONE\) ' + _STRS + r'\)' + _FAILS)

# The daemon's search through eval, for a server without a `$/hol/search` backend (theorydb.find_code).
_FIND = re.compile(
    r'val _ = PolyML\.print \(let fun low s = String\.map Char\.toLower s fun has \(l, x\) = List\.exists '
    r'\(fn y => y = x\) l val thys = ' + _STRS + r' val names = ' + _STRS + r' val found = '
    r'(?:DB\.listDB \(\)|DB\.match \[\] \(Parse\.Term \[QUOTE ' + _STR + r'\]\)) (.*) in String\.concatWith '
    r'"\\n" \(map show \(List\.take \(kept, Int\.min \((\d+), length kept\)\)\)\) end' + _FAILS, re.S)


# The daemon's question about cheats below (holsrv.answers.inheritedcheats.query_code).
_CHEATED = re.compile(r'val _ = PolyML\.print \(String\.concatWith " " \(List\.concat \(map \(fn t => '
                      r'List\.mapPartial \(fn \(n, th\) => if Lib\.mem "cheat" \(#1 \(Tag\.dest_tag '
                      r'\(Thm\.tag th\)\)\) then SOME \(t \^ "\." \^ n\) else NONE\) \(DB\.thms t\) '
                      r'handle _ => \[\]\) ' + _STRS + r'\)\)' + _FAILS)
# As recorded (theorem-tags, inherited-cheat): one theorem's tag, and a theory's theorems with theirs.
_TAG_OF = re.compile(r"PolyML\.print \(Tag\.dest_tag \(Thm\.tag ([A-Za-z_][A-Za-z0-9_']*)Theory\."
                     r"([A-Za-z_][A-Za-z0-9_']*)\)\)")
_TAGS_OF = re.compile(r'PolyML\.print \(map \(fn \(n, th\) => \(n, Tag\.dest_tag \(Thm\.tag th\)\)\) '
                      r'\(DB\.theorems ' + _STR + r'\)\)')
# The daemon's verify question (holsrv.answers.oracles.query_code): the built theory loaded, then
# each theorem's tag (oracles, axioms) and the axioms of the theories listed.
_VERIFY = re.compile(r'val _ = PolyML\.print \(let val thy = ' + _STR + r' val _ = load ' + _STR + r' fun thm .*? '
                     r'in String\.concatWith "\\n" \(map thm \(DB\.thms thy\) @ List\.concat \(map axioms '
                     + _STRS + r'\)\) end' + _FAILS, re.S)
OWN = object()  # env key: (the open file's theory, its theorems), which carry a placeholder tag


def _tag(oracles):
    return "([" + ", ".join(f'"{o}"' for o in oracles) + "], [])"


def tags_query(body, env):
    """A recorded tag print, answered as HOL did: an ancestor's theorem loaded from disk has its
    real tag (`fh_built`), the open file's own theorems the placeholder `lsp_deferred`; None
    for other code.  The daemon's own question gets the `theory.name` words of the cheated."""
    m = _CHEATED.fullmatch(body)
    if m:
        out = []
        for theory in _strings(m.group(1)):
            out += [f"{theory}.{n}" for n, o in fh_built.tags(theory).items() if "cheat" in o]
        return '"' + " ".join(out) + '"\n'
    m = _VERIFY.fullmatch(body)
    if m:
        return _quoted(verify_answer(m.group(1), _strings(m.group(3))))
    if body == "PolyML.print (current_theory ())":  # the open file's theory, in the server's session
        return f'"{env.get(OWN, ("", []))[0]}"\n'
    m = _TAG_OF.fullmatch(body)
    if m:
        oracles = fh_built.tags(m.group(1)).get(m.group(2))
        return None if oracles is None else _tag(oracles) + "\n"
    m = _TAGS_OF.fullmatch(body)
    if m:
        theory, names = env.get(OWN, ("", []))
        if m.group(1) in ("-", theory):
            return "[" + ", ".join(f'("{n}", {_tag(["lsp_deferred"])})' for n in names) + "]\n"
        return "[" + ", ".join(f'("{n}", {_tag(o)})' for n, o in fh_built.tags(m.group(1)).items()) + "]\n"
    return None


def verify_answer(theory, listed):
    """What HOL prints for the verify question: after `load`, a theorem from disk lists its oracles
    and no axioms (theorem-tags: `uses_ax` reads `(["DISK_THM"], [])`); `DB.axioms` lists the
    theory's axioms.  A theory with no build: `load` fails (the wording is a guess)."""
    record = fh_built.record(theory)
    if not record:
        return f"!Cannot find file {theory}Theory.ui"
    lines = [f"T\t{n}\t{' '.join(o)}\t" for n, o in record.get("tags", {}).items()]
    for t in listed:
        lines += [f"A\t{t}\t{a}" for a in fh_built.record(t).get("axioms", [])]
    return "\n".join(lines)


def _quoted(printed):
    """A string as PolyML.print shows it."""
    return '"' + printed.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t") + '"\n'


def _strings(listed):
    return [re.sub(r'\\(\d{3}|.)', _unescape, x) for x in re.findall(r'"((?:[^"\\]|\\.)*)"', listed)]


def db_query(body):
    """What one of the daemon's database queries prints (a string: words, or `!` and HOL's
    words), from `fh_catalog`; None for any other code."""
    m = _POLARITY.fullmatch(body)
    if m:
        pattern = re.sub(r'\\(\d{3}|.)', _unescape, m.group(2))
        problem = term_problem(pattern)
        if problem:
            return f"!\nException raised at Parse.Term:\n{problem}\n"
        return " ".join(f"{t}.{n}" for n, t, _, stmt, _ in fh_catalog.THEOREMS
                        if polarity_match(m.group(1) == "true", pattern, stmt))
    m = _ANCESTRY.fullmatch(body)
    if m:
        out = []
        for theory in _strings(m.group(1)):
            out += [theory, *fh_catalog.ancestry(theory)] if theory in fh_catalog.PARENTS else [theory]
        return " ".join(out)
    m = _DEPENDENCIES.fullmatch(body)
    if m:
        theory, name = (re.sub(r'\\(\d{3}|.)', _unescape, g) for g in m.groups())
        stored = fh_catalog.THEOREM_BY_NAME.get(name)
        if theory not in fh_catalog.PARENTS:
            return f"!\nException raised at DB.fetch:\nno such theory: {theory}\n"
        if not any(n == name and t == theory for n, t, _, _, _ in fh_catalog.THEOREMS) or stored is None:
            return f"!\nException raised at DB.fetch:\ntheorem {theory}${name} not found\n"
        deps = fh_catalog.DEPENDENCIES.get((theory, name), [])
        return " ".join(f"{t}.{n}" if n else f"{t}#{7 + i}" for i, (t, n) in enumerate(deps))
    m = _FIND.fullmatch(body)
    if m:
        theories, names, cap = _strings(m.group(1)), _strings(m.group(2)), int(m.group(5))
        pattern = re.sub(r'\\(\d{3}|.)', _unescape, m.group(3)) if m.group(3) is not None else ""
        if pattern and term_problem(pattern):
            return f"!\nException raised at Parse.Term:\n{term_problem(pattern)}\n"
        rows = [f"{t}\t{n}\t{cls}\t{stmt}" for n, t, _, stmt, cls in fh_catalog.THEOREMS
                if (not theories or t in theories) and all(x in n.lower() for x in names)
                and (not pattern or token_match(term_tokens(ascii_free(pattern)), term_tokens(stmt)))]
        return "\n".join(rows[:cap])
    m = _STORED.fullmatch(body)
    if m:
        theories, names = _strings(m.group(1)), _strings(m.group(2))
        held = {(t, n) for n, t, _, _, _ in fh_catalog.THEOREMS}
        found = [next((f"{t}.{n}" for t in theories if (t, n) in held), None) for n in names]
        return " ".join(f for f in found if f)
    return None


def polarity(tokens):
    """(positive, negative) token runs of a statement, as DB.dest_polarity splits a term:
    a binder is looked through, an implication's antecedent swaps sides (¬ is not read)."""
    while tokens and tokens[0] in ("∀", "∃", "⊢") and "." in tokens:
        tokens = tokens[tokens.index(".") + 1:] if tokens[0] != "⊢" else tokens[1:]
    depth = 0
    for i, token in enumerate(tokens):
        depth += token in "([" if len(token) == 1 else 0
        depth -= token in ")]" if len(token) == 1 else 0
        if token == "⇒" and depth == 0:
            ant_pos, ant_neg = polarity(tokens[:i])
            con_pos, con_neg = polarity(tokens[i + 1:])
            return ant_neg + con_pos, ant_pos + con_neg
    return [tokens], []


def polarity_match(conclusion, pattern, stmt):
    """Whether `pattern` matches a run of tokens in the statement's conclusions (or hypotheses)."""
    wanted = term_tokens(ascii_free(pattern))
    positive, negative = polarity(term_tokens(stmt))
    return any(token_match(wanted, part) for part in (positive if conclusion else negative))


def ascii_free(text):
    for a, b in (("==>", "⇒"), ("<=>", "⇔"), ("<=", "≤"), (">=", "≥"), ("/\\", "∧"), ("\\/", "∨"), ("!", "∀"),
                 ("?", "∃"), ("~", "¬")):
        text = text.replace(a, b)
    return " ".join(text.split())


def token_match(pattern, stmt):
    """Whether the pattern's tokens match a run of the statement's: a lowercase
    identifier is a variable and matches any one token, the same one each time."""
    for start in range(len(stmt) - len(pattern) + 1):
        bound = {}
        for p, t in zip(pattern, stmt[start:start + len(pattern)], strict=True):
            if is_variable(p):
                if bound.setdefault(p, t) != t:
                    break
            elif p != t:
                break
        else:
            return True
    return False


_INFIX = frozenset("+ - * = ∧ ∨ ⇒ ⇔ < ≤ > ≥ ++ /\\ \\/ ==> <=>".split())


def _unescape(m):
    code = m.group(1)
    return chr(int(code)) if code.isdigit() else {"n": "\n", "t": "\t"}.get(code, code)


def term_tokens(text):
    """A term's tokens: identifiers, numbers, runs of symbol characters, single brackets."""
    return re.findall(r"[A-Za-z_][A-Za-z0-9_']*|\d+|[()\[\]]|[^\sA-Za-z0-9_()\[\]]+", text)


def is_variable(token):
    return token[:1].islower()


def term_problem(text):
    """Why the fake cannot parse `text` as a term ("" if it can): brackets or operators out of place."""
    if text.count("(") != text.count(")"):
        return "unbalanced parentheses in the term"
    tokens = term_tokens(text)
    for before, after in zip([None, *tokens], [*tokens, None], strict=True):
        if (before in _INFIX or before is None) and (after in _INFIX or after is None) and (before or after):
            return f"parse error: an operand is missing near {before or after!r}"
    return ""


def _open(body, at, env):
    names = [(at + m.start(), m.group()) for m in re.finditer(r"[A-Za-z_][A-Za-z0-9_']*", body)][1:]
    for off, name in names:
        if not _structure(name):
            raise EvalError(off, off + len(name), f"Structure ({name}) has not been declared\n")
    env.setdefault(_OPENED, []).extend(name for _, name in names)


def _structure(name):
    return name in BASIS or _loadable(name)


def _loadable(module):
    """In the heap, a standard theory, or built in the cwd (as the fake's compile decides)."""
    if module in _HEAP or (module.endswith("Theory") and module.removesuffix("Theory") in fh_catalog.STD_THEORIES):
        return True
    exts = ("Theory.uo", "Theory.dat") if module.endswith("Theory") else (".uo",)
    return fh_built.find(module.removesuffix("Theory"), exts) is not None  # here, or by INCLUDES


# ------------------------------------------------------------ expressions

_TOKEN = re.compile(r"""\s*(?:
    (?P<num>~?\d+)
  | (?P<str>"(?:[^"\\]|\\.)*")
  | (?P<quote>``.*?``|`[^`]*`|‘[^’]*’|“[^”]*”)
  | (?P<id>[A-Za-z_][A-Za-z0-9_']*(?:\.[A-Za-z_][A-Za-z0-9_']*)*)
  | (?P<punct>[()\[\],;])
  | (?P<sym>[!%&$#+\-/:<=>?@\\~^|*]+)
)""", re.S | re.X)
_KEYWORDS = frozenset("fn let case if while raise".split())


class _Eval:
    """A left-to-right reading of `app (op app)*`, over the toy values."""

    def __init__(self, src, off, env, out, decl_at, stop=None):
        self.toks = []
        for m in _TOKEN.finditer(src):
            kind = m.lastgroup
            if kind:
                self.toks.append((kind, m.group(kind), off + m.start(kind), off + m.end(kind)))
        self.i, self.env, self.out, self.decl_at = 0, env, out, decl_at
        self.soft = []
        self.stop = off + len(src) if stop is None else stop  # where the declaration's `;` is

    def value(self):
        if not self.toks:
            return ()
        if self.toks[0][1] in _KEYWORDS:
            return Opaque(self.toks[0][1])
        return self.expr()

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None, 0, 0)

    def expr(self):
        first = self.peek()[2]
        value = self.app()
        while self.peek()[0] == "sym" or self.peek()[1] in ("THEN", "THENL", "ORELSE"):
            op = self.toks[self.i][1]
            self.i += 1
            rhs_tok = self.peek()
            if rhs_tok[0] is None or rhs_tok[1] in (";", ")", "]", ","):
                # HOL recovers: the missing operand is `()`, and type-checking goes on.
                where = rhs_tok[2] if rhs_tok[0] else self.stop
                self.soft.append(EvalError(where, where, _MISSING, hard=False))
                if op in ("+", "-", "*"):
                    raise EvalError(first, where, _UNIT_TYPE_ERROR.format(lhs=show(value)), soft=self.soft)
                return Opaque(op)
            rhs = self.app()
            value = self.binop(op, value, rhs, first, self.toks[self.i - 1][3], rhs_tok[1])
        return value

    def app(self):
        head = self.atom()
        while self.peek()[0] in ("num", "str", "quote", "id") or self.peek()[1] in ("(", "["):
            if self.peek()[1] in ("THEN", "THENL", "ORELSE"):
                break
            head = self.apply(head, self.atom())
        return head

    def atom(self):
        kind, tok, a, b = self.peek()
        self.i += 1
        if kind == "num":
            return int(tok.replace("~", "-"))
        if kind == "str":
            return re.sub(r'\\(.)', lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), tok[1:-1])
        if kind == "quote":
            return Quote(tok.strip("`‘’“”"))
        if kind == "id":
            return self.lookup(tok, a, b)
        if tok in ("(", "["):
            return self.group(")" if tok == "(" else "]", tok == "[")
        raise EvalError(a, b, f"syntax error: unexpected {tok!r}\n")

    def group(self, closer, is_list):
        items = []
        while self.peek()[1] not in (closer, None):
            items.append(self.expr())
            if self.peek()[1] in (",", ";"):
                self.i += 1
        self.i += 1
        if is_list:
            return items
        return () if not items else items[0] if len(items) == 1 else tuple(items)

    def lookup(self, name, a, b):
        if name in ("true", "false"):
            return name == "true"
        if "." in name:
            struct, member = name.rsplit(".", 1)
            if not _structure(struct):
                raise EvalError(a, a + len(struct), f"Structure ({struct}) has not been declared\n")
            return _member(struct, member)
        if name in self.env:
            return self.env[name]
        for struct in reversed(self.env.get(_OPENED, [])):
            if name in _exports(struct):
                return _member(struct, name)
        if name == "print":
            return Builtin("print")
        raise EvalError(a, b, f"Value or constructor ({name}) has not been declared\n")

    def apply(self, f, arg):
        f = f.name if isinstance(f, Builtin) else None
        if f == "PolyML.print":
            self.out.append(("toplevelOut", self.decl_at, show(arg) + "\n"))
            return arg
        if f == "print":
            sys.stderr.write(str(arg))
            sys.stderr.flush()
            return ()
        if f == "EVAL" and isinstance(arg, Quote):
            return Thm(f"⊢ {_term(arg.text)} = {_reduce(arg.text)}")
        if f == "DB.find" and isinstance(arg, str):
            return [((t, n), (Thm(s), Opaque(c))) for n, t, _, s, c in fh_catalog.THEOREMS
                    if arg.lower() in n.lower()]
        return Opaque("app")

    def binop(self, op, a, b, start, end, rhs_text):
        if op in ("+", "-", "*") and (isinstance(a, bool) or isinstance(b, bool)):
            raise EvalError(start, end, _TYPE_ERROR.format(lhs=show(a), rhs=rhs_text))
        if isinstance(a, int) and isinstance(b, int):
            return {"+": a + b, "-": a - b, "*": a * b}.get(op, Opaque(op))
        if op == "^" and isinstance(a, str) and isinstance(b, str):
            return a + b
        return Opaque(op)


def _exports(struct):
    if struct.endswith("Theory"):
        thy = struct.removesuffix("Theory")
        return {n for n, t, _, _, _ in fh_catalog.THEOREMS if t == thy}
    return _EXPORTS.get(struct, frozenset())


def _member(struct, name):
    """The value of `struct.name`: a builtin's marker, a stored theorem, or opaque."""
    if struct.endswith("Theory"):
        hit = fh_catalog.THEOREM_BY_NAME.get(name)
        if hit and hit[1] == struct.removesuffix("Theory"):
            return Thm(hit[3])
    builtin = {("PolyML", "print"): "PolyML.print", ("TextIO", "print"): "print",
               ("DB", "find"): "DB.find", ("bossLib", "EVAL"): "EVAL", ("computeLib", "EVAL"): "EVAL"}
    if (struct, name) in builtin:
        return Builtin(builtin[struct, name])
    return Opaque(name)


def _term(text):
    return re.sub(r"\s*;\s*", "; ", " ".join(text.split()))


def _reduce(text):
    t = _term(text)
    m = re.fullmatch(r"LENGTH \[(.*)\]", t)
    if m:
        return str(len([x for x in m.group(1).split(";") if x.strip()]))
    if re.fullmatch(r"\d+(\s*[+*]\s*\d+)+", t):
        total, op = None, "+"
        for tok in re.findall(r"\d+|[+*]", t):
            if tok in "+*":
                op = tok
            else:
                total = int(tok) if total is None else total + int(tok) if op == "+" else total * int(tok)
        return str(total)
    return t


def show(v):
    """As `PolyML.print` shows a value."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v).replace("-", "~")
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, list):
        return "[" + ", ".join(show(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(show(x) for x in v) + ")"
    if isinstance(v, Opaque):
        return v.name if v.name in ("Thm", "Def", "Axm") else "fn"
    if isinstance(v, Builtin):
        return "fn"
    return str(v)


def _mask(text, strings=False, quotes=None):
    """`text` with comments (and, if asked, strings and term quotations) blanked, offsets kept."""
    quotes = strings if quotes is None else quotes
    out, i, n = list(text), 0, len(text)
    while i < n:
        j = i
        if text.startswith("(*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("(*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*)", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
        elif text[i] == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            if not strings:
                i = j
                continue
        else:
            for opening, closing in (("``", "``"), ("`", "`"), ("‘", "’"), ("“", "”")):
                if text.startswith(opening, i):
                    k = text.find(closing, i + len(opening))
                    j = n if k < 0 else k + len(closing)
                    break
            if j > i and not quotes:
                i = j
                continue
        if j > i:
            for k in range(i, j):
                if out[k] != "\n":
                    out[k] = " "
            i = j
        else:
            i += 1
    return "".join(out)
