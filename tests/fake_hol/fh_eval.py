"""A toy SML top level for `$/eval`: integer arithmetic, `val` bindings,
`PolyML.print`, `print` (to stderr, as the real server redirects it), an
obvious type error, and loops that run until cancelled."""

import re
import sys

_TYPE_ERROR = ("Type error in function application.\n"
               "   Function: + : int * int -> int\n"
               "   Argument: ({lhs}, {rhs}) : int * bool\n"
               "   Reason: Can't unify int (*In Basis*) with bool (*In Basis*)"
               " (Different type constructors)\n")


class EvalError(Exception):
    def __init__(self, start, end, msg):
        super().__init__(msg)
        self.start, self.end, self.msg = start, end, msg


def split_decls(code):
    """(start, end) of each top-level declaration, ending after its `;`
    (a trailing piece without `;` counts too)."""
    out, start, i, n = [], 0, 0, len(code)
    while i < n:
        c = code[i]
        if c == '"':
            i += 1
            while i < n and code[i] != '"':
                i += 2 if code[i] == "\\" else 1
        elif code.startswith("(*", i):
            j = code.find("*)", i + 2)
            i = n if j < 0 else j + 1
        elif c == ";":
            out.append((start, i + 1))
            start = i + 1
        i += 1
    if code[start:].strip():
        out.append((start, n))
    return [(a + len(code[a:b]) - len(code[a:b].lstrip()), b) for a, b in out]


def loops(text):
    return "LOOP_TAC" in text or re.search(r"\bwhile\s+true\s+do\b", text) is not None


def run(text, start, env):
    """Run one declaration; return a list of (kind, offset, body) outputs.
    Raises EvalError for a compile/type error (offsets into the code)."""
    body = text.strip().rstrip(";").strip()
    m = re.fullmatch(r"PolyML\.print\s*(.*)", body, re.S)
    if m:
        value = _expr(m.group(1), start + text.index(m.group(1)) if m.group(1) else start, env)
        return [("toplevelOut", start, _show(value) + "\n")]
    m = re.fullmatch(r"print\s*(.*)", body, re.S)
    if m:
        value = _expr(m.group(1), start + text.index(m.group(1)), env)
        sys.stderr.write(str(value))
        sys.stderr.flush()
        return []
    m = re.fullmatch(r"val\s+([A-Za-z_][A-Za-z0-9_']*)\s*=\s*(.*)", body, re.S)
    if m:
        env[m.group(1)] = _expr(m.group(2), start + text.index(m.group(2), text.index("=")), env)
        return []
    if re.match(r"(fun|open|load|structure|datatype|type|local)\b", body):
        return []
    _expr(body, start + text.index(body) if body else start, env)
    return []


def _show(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v + '"'
    return str(v).replace("-", "~")


_TOKEN = re.compile(r'\s*(?:(\d+)|("(?:[^"\\]|\\.)*")|([A-Za-z_][A-Za-z0-9_\'.]*)|(.))', re.S)


def _expr(src, off, env):
    """Evaluate `a op b op c` left to right over ints/strings/bools."""
    toks = [(m.start(), m.group(0).strip()) for m in _TOKEN.finditer(src) if m.group(0).strip()]
    toks = [(i, t) for i, t in toks if t not in ("(", ")")]
    if not toks:
        return ()
    value = _atom(toks[0], off, env)
    k = 1
    while k + 1 < len(toks):
        op, rhs = toks[k][1], _atom(toks[k + 1], off, env)
        value = _binop(op, value, rhs, src, off, toks[k + 1][1])
        k += 2
    return value


def _atom(tok, off, env):
    i, t = tok
    if t.isdigit():
        return int(t)
    if t.startswith('"'):
        return re.sub(r"\\n", "\n", t[1:-1])
    if t in ("true", "false"):
        return t == "true"
    if t in env:
        return env[t]
    raise EvalError(off + i, off + i + len(t), f"Value or constructor ({t}) has not been declared\n")


def _binop(op, a, b, src, off, rhs_text):
    if op in "+-*" and (isinstance(a, bool) or isinstance(b, bool)):
        raise EvalError(off, off + len(src.rstrip()), _TYPE_ERROR.format(lhs=_show(a), rhs=rhs_text))
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "^":
        return str(a) + str(b)
    return a
