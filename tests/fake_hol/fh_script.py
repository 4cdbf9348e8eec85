"""Parse a HOL4 script text into top-level declarations, with every offset
computed from the text, and convert offsets to LSP positions.

Offsets are indices into the Python string (code points); positions on the
wire are (line, column in the negotiated unit: utf-8 bytes or utf-16 units).
"""

import bisect
import re
from dataclasses import dataclass, field

import fh_recover

IDENT_RE = re.compile(r"[A-Za-z][A-Za-z0-9_']*")
WORD_RE = re.compile(r"[A-Za-z0-9_']+")
_DECL_KEYWORDS = ("Theorem", "Triviality", "Definition", "Resume", "Datatype",
                  "Inductive", "CoInductive", "Finalise", "Overload", "Type")


def units(s, enc):
    """Length of `s` in the negotiated position unit."""
    if enc == "utf-8":
        return len(s.encode("utf-8", "surrogatepass"))
    return len(s.encode("utf-16-le", "surrogatepass")) // 2


class Lines:
    """Offset <-> LSP position conversion for one text."""

    def __init__(self, text):
        self.text = text
        self.starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def line_end(self, line):
        if line + 1 < len(self.starts):
            return self.starts[line + 1] - 1
        return len(self.text)

    def pos(self, off, enc):
        off = max(0, min(off, len(self.text)))
        line = bisect.bisect_right(self.starts, off) - 1
        prefix = self.text[self.starts[line]:off]
        return {"line": line, "character": units(prefix, enc)}

    def range(self, start, end, enc):
        return {"start": self.pos(start, enc), "end": self.pos(end, enc)}

    def offset(self, pos, enc):
        """Return (offset, problem) for a wire position; problem is None when
        the position names an existing line and column, else a short tag."""
        line, col = pos.get("line", 0), pos.get("character", 0)
        if line >= len(self.starts):
            return len(self.text), "line"
        start, end = self.starts[line], self.line_end(line)
        used = 0
        for i in range(start, end):
            if used >= col:
                return i, None
            used += units(self.text[i], enc)
        return end, (None if used == col else "column")


def mask(text):
    """Blank out nested comments and string-literal contents (newlines kept),
    so that keyword and marker search ignores them, as HOL's lexer does."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        if text.startswith("(*", i):
            j = _comment_end(text, i)
            _blank(out, i, j)
            i = j
        elif text[i] == '"':
            j = _string_end(text, i)
            _blank(out, i + 1, j - 1)
            i = j
        else:
            i += 1
    return "".join(out)


def _comment_end(text, i):
    depth, n = 0, len(text)
    while i < n:
        if text.startswith("(*", i):
            depth, i = depth + 1, i + 2
        elif text.startswith("*)", i):
            depth, i = depth - 1, i + 2
            if depth == 0:
                return i
        else:
            i += 1
    return n


def _string_end(text, i):
    j, n = i + 1, len(text)
    while j < n and text[j] != '"':
        j += 2 if text[j] == "\\" else 1
    return min(j + 1, n)


def _blank(out, a, b):
    for k in range(a, max(a, b)):
        if out[k] != "\n":
            out[k] = " "


def string_literal(text, i):
    """Decode the SML string literal starting at text[i] == '"'."""
    j = _string_end(text, i)
    raw = text[i + 1:j - 1]
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), raw)


@dataclass
class Decl:
    kind: str                 # theory | theorem | definition | resume | sml | block | bad
    start: int
    end: int
    name: str | None = None
    name_start: int = 0
    name_end: int = 0
    keyword: str = ""
    attrs: list = field(default_factory=list)
    stmt: tuple | None = None       # (start, end) of the statement
    proof_kw: int | None = None     # offset of the `Proof` keyword
    body: tuple | None = None       # (start, end): after `Proof` up to `QED`
    qed: int | None = None          # offset of `QED` (None when missing)
    pool_name: str | None = None
    deps: list = field(default_factory=list)   # header: (module, start, end)
    bare: bool = False
    const: str | None = None        # definition: the constant it defines
    parse_diags: list = field(default_factory=list)   # (start, end, message) from parse recovery
    empty_tactic: bool = False      # recovery put an empty expression into the tactic
    local: int | None = None        # index of the column-0 `local` whose `… end` holds it

    def in_local(self):
        """Inside `local … in … end`: HOL proves it while compiling, the pool never sees it."""
        return self.local is not None

    def is_proof(self):
        return self.kind in ("theorem", "resume") and self.pool_name is not None


class Script:
    """The parse of one text: declarations in order plus helpers."""

    def __init__(self, text):
        self.text = text
        self.masked = mask(text)
        self.lines = Lines(text)
        self.decls = _parse(text, self.masked, self.lines)
        _assign_pool_names(self.decls)
        _mark_locals(self.decls)

    def header(self):
        return self.decls[0] if self.decls and self.decls[0].kind == "theory" else None

    def declared(self):
        names = []
        for d in self.decls:
            n = d.pool_name if d.kind in ("theorem", "resume") else d.name
            if n and d.kind != "bad":
                names.append(n)
        return names

    def decl_at(self, off):
        """Index of the declaration containing `off`, else the last one
        starting before it (0 when none)."""
        best = 0
        for i, d in enumerate(self.decls):
            if d.start <= off:
                best = i
        return best

    def dep_modules(self):
        h = self.header()
        return [m for m, _, _ in h.deps] if h else []


def _line_iter(lines, masked):
    for ln, start in enumerate(lines.starts):
        yield ln, start, masked[start:lines.line_end(ln)]


def _col0_word(line_text):
    m = re.match(r"[A-Za-z_][A-Za-z0-9_']*", line_text)
    return m.group(0) if m else ""


def _parse(text, masked, lines):
    rows = list(_line_iter(lines, masked))
    decls, ln = [], 0
    while ln < len(rows):
        _, start, body = rows[ln]
        if not body.strip() or body[0].isspace():
            ln += 1
            continue
        word = _col0_word(body)
        if word == "Theory":
            d, ln = _parse_header(text, rows, ln)
        elif word in ("Theorem", "Triviality", "Resume"):
            d, ln = _parse_theorem(text, masked, rows, ln, word)
        elif word in ("Definition", "Datatype", "Inductive", "CoInductive"):
            d, ln = _parse_block(text, masked, rows, ln, word)
        else:
            d, ln = _parse_sml(text, masked, rows, ln, word)
        decls.extend(d if isinstance(d, list) else [d])
    return decls


def _line_from(rows, off):
    """Index of the first line starting at or after `off`."""
    return bisect.bisect_left(rows, off, key=lambda r: r[1])


def _next_decl_line(rows, ln):
    """First line after `ln` starting (column 0) a new declaration."""
    ln += 1
    while ln < len(rows):
        body = rows[ln][2]
        if body and not body[0].isspace() and _col0_word(body) not in ("Proof", "QED", "End", "Termination"):
            return ln
        ln += 1
    return ln


def _last_nonspace_end(masked, a, b):
    b = min(b, len(masked))
    while b > a and masked[b - 1].isspace():
        b -= 1
    return b


def _parse_header(text, rows, ln):
    _, start, body = rows[ln]
    m = re.match(r"Theory\s+([A-Za-z][A-Za-z0-9_']*)(\s*\[\s*bare\s*\])?", body)
    d = Decl("theory", start, start + len(body), keyword="Theory")
    if m:
        d.name, d.name_start, d.name_end = m.group(1), start + m.start(1), start + m.end(1)
        d.bare = bool(m.group(2))
    mode, last = None, ln
    for k in range(ln, len(rows)):
        _, s, b = rows[k]
        if k > ln and (not b.strip() or (not b[0].isspace() and _col0_word(b) not in ("Ancestors", "Libs"))):
            break
        last = k
        seg_off = 0 if k > ln else (m.end() if m else len(b))
        mode = _scan_header_line(d, s, b[seg_off:], seg_off, mode)
    d.end = _last_nonspace_end(text, start, rows[last][1] + len(rows[last][2]))
    return d, last + 1


def _scan_header_line(d, line_start, segment, seg_off, mode):
    for m in re.finditer(r"\[[^\]]*\]|[A-Za-z][A-Za-z0-9_']*", segment):
        word = m.group(0)
        if word.startswith("["):
            continue
        if word in ("Ancestors", "Libs"):
            mode = word
            continue
        a = line_start + seg_off + m.start()
        if mode == "Ancestors":
            d.deps.append((word + "Theory", a, a + len(word)))
        elif mode == "Libs":
            d.deps.append((word, a, a + len(word)))
    return mode


def _parse_theorem(text, masked, rows, ln, word):
    _, start, body = rows[ln]
    stop = _next_decl_line(rows, ln)
    region_end = rows[stop][1] if stop < len(rows) else len(text)
    m = re.match(word + r"[ \t]+([^\s\[:]+)(\[[^\]]*\])?\s*:?", body)
    d = Decl("theorem" if word != "Resume" else "resume", start, region_end, keyword=word)
    if not m:
        d.kind = "bad"
        d.end = _last_nonspace_end(masked, start, region_end)
        return d, stop
    d.name, d.name_start, d.name_end = m.group(1), start + m.start(1), start + m.end(1)
    if m.group(2):
        d.attrs = [a.strip() for a in m.group(2)[1:-1].split(",") if a.strip()]
        if word == "Resume":
            d.name += m.group(2)
            d.name_end = start + m.end(2)
    if word != "Resume" and not IDENT_RE.fullmatch(d.name):
        d.kind = "bad"
    proof_ln = next((k for k in range(ln + 1, stop) if _col0_word(rows[k][2]) == "Proof"), None)
    qed_ln = next((k for k in range(ln + 1, stop) if _col0_word(rows[k][2]) == "QED"), None)
    after_colon = start + m.end()
    if word == "Resume":
        proof_off, body_start = after_colon, after_colon
        stmt_end = after_colon
    elif proof_ln is None:
        proof_off, body_start, stmt_end = None, None, None
    else:
        proof_off = rows[proof_ln][1]
        body_start, stmt_end = proof_off + len("Proof"), proof_off
    d.stmt = (after_colon, stmt_end if stmt_end is not None else region_end)
    d.proof_kw = proof_off
    d.qed = rows[qed_ln][1] if qed_ln is not None else None
    last_end = d.qed + 3 if d.qed is not None else _last_nonspace_end(masked, start, region_end)
    if body_start is not None:
        d.body = (body_start, d.qed if d.qed is not None else last_end)
    d.end = last_end
    nxt = qed_ln + 1 if qed_ln is not None else stop
    tac = None if body_start is None else \
        fh_recover.parse_tactic(text, body_start, "QED", "End", after_proof=word != "Resume")
    if tac is not None:
        # Where HOL's parser ends this declaration, and what it recovered from.
        at = tac.stop.start
        d.qed = at if tac.closed else None
        d.body = (body_start, at if tac.closed else _last_nonspace_end(masked, body_start, at))
        d.end = tac.end if tac.end > at else d.body[1]
        d.parse_diags, d.empty_tactic = tac.diags, tac.empty
        nxt = _line_from(rows, tac.end)
    return d, nxt


def _parse_block(text, masked, rows, ln, word):
    _, start, body = rows[ln]
    m = re.match(word + r"[ \t]+([^\s\[:]+)(\[[^\]]*\])?", body)
    d = Decl("definition" if word == "Definition" else "block", start, start + len(body), keyword=word)
    if m:
        d.name, d.name_start, d.name_end = m.group(1), start + m.start(1), start + m.end(1)
        if m.group(2):
            d.attrs = [a.strip() for a in m.group(2)[1:-1].split(",") if a.strip()]
    ends, k, seen_term = [], ln + 1, False
    while k < len(rows):
        w = _col0_word(rows[k][2])
        if w == "End":
            ends.append(k)
            nxt = k + 1
            while nxt < len(rows) and not rows[nxt][2].strip():
                nxt += 1
            if word == "Definition" and not seen_term and nxt < len(rows) and _col0_word(rows[nxt][2]) == "Termination":
                seen_term, k = True, nxt + 1
                continue
            break
        if rows[k][2] and not rows[k][2][0].isspace() and w not in ("Termination",) and w in _DECL_KEYWORDS + ("Theory",):
            break
        k += 1
    extra = []
    if ends:
        d.end = rows[ends[-1]][1] + 3
        nxt_ln = ends[-1] + 1
    else:
        nxt_ln = _next_decl_line(rows, ln)
        d.end = _last_nonspace_end(masked, start, rows[nxt_ln][1] if nxt_ln < len(rows) else len(text))
        colon = re.match(r"\s*:", masked[start + m.end():]) if m and word == "Definition" else None
        blk = fh_recover.parse_definition(text, start + m.end() + colon.end() - 1) if colon else None
        if blk is not None:
            # No `End` before the next declaration: HOL's quotation runs on.
            d.end = _last_nonspace_end(masked, start, blk.end)
            d.parse_diags = blk.diags
            cont = blk.end
            if blk.tail:
                extra.append(Decl("sml", blk.tail[0], blk.tail[1], keyword="tactic"))
                a, b = blk.stray_qed
                extra.append(Decl("sml", a, b, keyword="QED", parse_diags=[(a, b, "bad declaration")]))
                cont = b
            nxt_ln = _line_from(rows, cont)
    cm = re.search(r"[A-Za-z][A-Za-z0-9_']*", masked[start + len(body):d.end])
    d.const = cm.group(0) if cm else None
    return ([d] + extra if extra else d), nxt_ln


def _parse_sml(text, masked, rows, ln, word):
    _, start, body = rows[ln]
    stop = _next_decl_line(rows, ln)
    region_end = rows[stop][1] if stop < len(rows) else len(text)
    d = Decl("sml", start, _last_nonspace_end(masked, start, region_end), keyword=word)
    m = re.match(r"(?:val|fun)\s+(?:rec\s+)?([A-Za-z][A-Za-z0-9_']*)", body)
    if m:
        d.name, d.name_start, d.name_end = m.group(1), start + m.start(1), start + m.end(1)
    return d, stop


def _mark_locals(decls):
    """Each declaration between a column-0 `local` and the column-0 `end` closing it."""
    opened = None
    for i, d in enumerate(decls):
        if d.kind == "sml" and d.keyword == "local":
            opened = i
        elif d.kind == "sml" and d.keyword == "end":
            opened = None
        elif opened is not None:
            d.local = opened


def _assign_pool_names(decls):
    seen = {}
    for d in decls:
        if d.kind == "theorem":
            seen[d.name] = seen.get(d.name, 0) + 1
            d.pool_name = d.name if seen[d.name] == 1 else f"{d.name}#{seen[d.name]}"
        elif d.kind == "resume":
            d.pool_name = d.name
