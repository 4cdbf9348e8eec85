"""HOL's parse recovery, as far as the fake models it.

HOL's script parser does not stop at a syntax error: it records a message
with a byte span and carries on as if the missing piece were there, so the
declaration still elaborates (and a proof still goes to the pool).  This
module reproduces, for a `Proof … QED` body (or a `Termination … End`
tactic) and for the quotation of a `Definition`, which messages come out,
where they land, and where the declaration really ends.  The facts it
follows are listed in README.md ("Parse recovery").

Every function returns None when the text does something the fake does
not model; the caller then keeps its plain line-based reading and reports
nothing.  Offsets are indices into the Python string.
"""

from dataclasses import dataclass, field

# Words that are keywords of the HOL script syntax when they start at
# column 0 (`Datatype` only when a colon follows).
HOL_KEYWORDS = {"Type", "Overload", "Definition", "Theorem", "Triviality", "Quote",
                "Inductive", "CoInductive", "Proof", "QED", "Termination", "End",
                "Theory", "Ancestors", "Libs", "Resume", "Finalise"}
# SML words that start a declaration: at column 0 they end a tactic.
_DECL_WORDS = {"val", "fun", "open", "datatype", "type", "structure", "signature",
               "functor", "local", "exception", "infix", "infixr", "nonfix",
               "abstype", "eqtype"}
# SML keywords after which an expression must follow.
_NEEDS_EXP = {"if", "then", "else", "case", "of", "fn", "=>", "raise", "while",
              "do", "andalso", "orelse", "handle", "|"}
# SML keywords whose recovery the fake does not model.
_UNMODELLED = {"let", "in", "end", "local", "struct", "sig", "with", "withtype",
               "as", ":", ":>", "#", "sharing", "where", "include", "rec", "and"}
# Infix identifiers known to HOL's parser before any `infix` declaration.
INFIXES = {"before", "++", "&&", "|->", "THEN", "THEN1", "THENL", "THEN_LT", "THENC",
           "ORELSE", "ORELSE_LT", "ORELSEC", "THEN_TCL", "ORELSE_TCL", "?>", "|>",
           "|>>", "||>", "||->", ">>", ">-", ">|", "\\\\", ">>>", ">>-", "??", ">~",
           ">>~", ">>~-", "##", "?", "$", ":=", "o", "-->", "=", "<>", ">", ">=", "<",
           "<=", "::", "@", "+", "-", "^", "*", "/", "div", "mod", "via", "by",
           "suffices_by", "using"}

_ID_SYM = set("!%&$#+-/:<=>?@\\~^|*")
_QUOTE_CLOSE = {"``": "``", "`": "`", "\u2018": "\u2019", "\u201c": "\u201d"}
_HOL_STRINGS = {'"': '"', "\u00ab": "\u00bb", "\u2039": "\u203a"}


class Unmodelled(Exception):
    """The text needs recovery the fake does not reproduce."""


@dataclass
class Token:
    start: int
    end: int
    kind: str          # ident | sym | quote | atom | eof
    word: str = ""


@dataclass
class Tactic:
    """Outcome of parsing one tactic the way HOL does."""
    diags: list = field(default_factory=list)   # (start, end, message)
    stop: Token | None = None                   # token that ended the tactic
    closed: bool = False                        # stop is the expected keyword
    end: int = 0                                # where the declaration ends
    empty: bool = False                         # an expression was missing (HOL puts `raise Fail "empty"`)


@dataclass
class Quote:
    """Outcome of reading one quotation."""
    how: str           # close | strong | eof
    at: int            # start of the token that ended it (len(text) at EOF)
    after: int         # offset just past that token
    word: str
    mismatch: str      # "" or " (first mismatch [c] at N)"


def col0(text, i):
    return i == 0 or text[i - 1] == "\n"


def byte_offset(text, i):
    return len(text[:i].encode("utf-8", "surrogatepass"))


# ---------------------------------------------------------------- quotations

def read_quote(text, qstart, closers):
    """Read a quotation body from `qstart` as HOL's quotation reader does:
    it ends at one of `closers`, at a column-0 `End`/`Termination`/`Proof`
    (even inside a comment), or at end of input.  Closing quote marks that
    are not `closers` are skipped and remembered as mismatches."""
    n, i, depth, first = len(text), qstart, 0, None
    while i < n:
        c = text[i]
        if c == "(" and text.startswith("(*", i):
            depth, i = depth + 1, i + 2
        elif c == "*" and depth and text.startswith("*)", i):
            depth, i = depth - 1, i + 2
        elif col0(text, i) and any(text.startswith(w, i) for w in ("End", "Termination", "Proof")):
            word = next(w for w in ("End", "Termination", "Proof") if text.startswith(w, i))
            return Quote("close" if word in closers else "strong", i, i + len(word), word,
                         _mismatch(first))
        elif c in "`\u2019\u201d":
            mark = "``" if text.startswith("``", i) else c
            if mark in closers:
                return Quote("close", i, i + len(mark), mark, "")
            if first is None:
                first = (byte_offset(text, i), mark)
            i += len(mark)
        elif c in _HOL_STRINGS and not depth:
            i = _skip_hol_string(text, i + 1, _HOL_STRINGS[c])
        elif c == "^" and not depth and i + 1 < n and text[i + 1] == "(":
            raise Unmodelled("antiquotation")
        else:
            i += 1
    return Quote("eof", n, n, "", _mismatch(first))


def _mismatch(first):
    return "" if first is None else f" (first mismatch [{first[1]}] at {first[0]})"


def _skip_hol_string(text, i, close):
    n = len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
        elif text[i] == close:
            return i + 1
        else:
            i += 1
    raise Unmodelled("unclosed string literal")


def quote_message(q, closers):
    """The message HOL records for a quotation that did not end properly."""
    if q.how == "eof":
        return "unclosed quotation" + q.mismatch
    return "expected [" + ", ".join(closers) + "]" + q.mismatch


# ---------------------------------------------------------------- SML tokens

def _token(text, i):
    n = len(text)
    while True:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            return Token(n, n, "eof")
        if text.startswith("(*", i):
            i = _skip_comment(text, i)
            continue
        break
    c = text[i]
    if c == '"' or text.startswith('#"', i):
        j = _skip_sml_string(text, i + (2 if c == "#" else 1))
        return Token(i, j, "atom")
    if text.startswith("``", i):
        return Token(i, i + 2, "quote", "``")
    if c in "`\u2018\u201c":
        return Token(i, i + 1, "quote", c)
    if c in "()[]{},;":
        return Token(i, i + 1, "sym", c)
    if c == "_":
        return Token(i, i + 1, "atom", c)
    if c.isascii() and (c.isalpha() or c in _ID_SYM or c == "."):
        j = _ident_end(text, i)
        return Token(i, j, "ident", text[i:j])
    if c.isdigit() or c == "'":
        j = i + 1
        while j < n and text[j].isascii() and (text[j].isalnum() or text[j] in "_'."):
            j += 1
        return Token(i, j, "atom", text[i:j])
    raise Unmodelled(f"character {c!r}")


def _ident_end(text, i):
    n = len(text)
    if text[i] == ".":
        j = i
        while j < n and text[j] == ".":
            j += 1
        return j
    if text[i] in _ID_SYM:
        j = i
        while j < n and text[j] in _ID_SYM:
            j += 1
    else:
        j = i
        while j < n and text[j].isascii() and (text[j].isalnum() or text[j] in "_'"):
            j += 1
    while j + 1 < n and text[j] == "." and (text[j + 1] in _ID_SYM or (text[j + 1].isascii() and text[j + 1].isalpha())):
        j += 1
        if text[j] in _ID_SYM:
            while j < n and text[j] in _ID_SYM:
                j += 1
        else:
            while j < n and text[j].isascii() and (text[j].isalnum() or text[j] in "_'"):
                j += 1
    return j


def _skip_comment(text, i):
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
    raise Unmodelled("unclosed comment")


def _skip_sml_string(text, i):
    n = len(text)
    while i < n:
        if text[i] == "\\":
            i += 2
        elif text[i] == '"':
            return i + 1
        else:
            i += 1
    raise Unmodelled("unclosed string literal")


def ends_tactic(text, tk):
    """Does this token end a tactic expression (as a stop, not an error)?"""
    if tk.kind == "eof":
        return True
    if tk.kind != "ident" or not col0(text, tk.start):
        return False
    if tk.word == "Datatype":
        return text[tk.end:].lstrip(" \t").startswith(":")
    return tk.word in HOL_KEYWORDS or tk.word in _DECL_WORDS


# ---------------------------------------------------------------- tactics

def parse_tactic(text, start, closer, alt, after_proof=False):
    """Parse the tactic that starts at `start` and should be followed by the
    column-0 keyword `closer` (`QED`, or `End` after `Termination`).  HOL
    closes every bracket still open at the token that ends the tactic and
    then expects `closer`; `alt` (`End` resp. `QED`) in its place is
    complained about but consumed.  Right after `Proof` a `[…]` is the
    keyword's attributes.  Returns a Tactic, or None."""
    try:
        return _parse_tactic(text, start, closer, alt, after_proof)
    except Unmodelled:
        return None


def _parse_tactic(text, start, closer, alt, after_proof=False):
    out, need = Tactic(), True
    stack = [["", False, []]]     # [opener, saw a separator, unfinished constructs]
    i = _skip_attrs(text, start) if after_proof else start
    while True:
        tk = _token(text, i)
        if ends_tactic(text, tk):
            break
        i, need = _step(text, tk, stack, need, out)
    if tk.kind == "ident" and tk.word in ("Proof", "Termination"):
        raise Unmodelled("a second Proof/Termination")
    if any(frame[2] for frame in stack):
        raise Unmodelled("if/case/fn/while left unfinished")
    out.empty = need
    if need:
        # A required expression meets the stop: an identifier-like stop is
        # tried as an identifier first (and refused, being a keyword).
        if tk.kind == "ident":
            out.diags.append((tk.start, tk.end, "expected identifier"))
        else:
            out.diags.append((tk.start, tk.start, "expected an expression"))
    for kind, has_sep, _ in reversed(stack[1:]):
        if kind == "(" and not has_sep:
            out.diags.append((tk.start, tk.start, "expected closing parenthesis"))
        else:
            out.diags.append((tk.start, tk.end, "expected close delimiter"))
    out.stop = tk
    if tk.word == closer:
        out.closed, out.end = True, tk.end
    else:
        out.diags.append((tk.start, tk.end, f"expected '{closer}'"))
        out.end = tk.end if tk.word == alt else tk.start
    return out


def _skip_attrs(text, i):
    """`Proof[attr, …]`: attributes right after the keyword are not tactic."""
    tk = _token(text, i)
    if tk.kind != "sym" or tk.word != "[":
        return i
    close = text.find("]", tk.end)
    if close < 0:
        raise Unmodelled("unclosed Proof attributes")
    return close + 1


def _step(text, tk, stack, need, out):
    """Consume one token; returns (next offset, whether an expression is
    required next)."""
    frame = stack[-1]
    if tk.kind == "quote":
        closer = _QUOTE_CLOSE[tk.word]
        q = read_quote(text, tk.end, [closer])
        if q.how != "close":
            out.diags.append((tk.start, q.at, quote_message(q, [closer])))
        return q.after, False
    if tk.kind == "sym":
        c = tk.word
        if c == "{":
            raise Unmodelled("record")
        if c in "([":
            stack.append([c, False, []])
            return tk.end, True
        if c in ")]":
            if len(stack) == 1 or frame[0] != ("(" if c == ")" else "[") or frame[2]:
                raise Unmodelled("unbalanced closer")
            stack.pop()
            return tk.end, False
        if c == "," and len(stack) > 1 and not frame[2]:
            frame[1] = True
            return tk.end, True
        if c == ";" and frame[0] == "(" and not frame[2]:
            frame[1] = True
            return tk.end, True
        raise Unmodelled(f"separator {c!r} outside a tuple or list")
    if tk.kind == "ident":
        w = tk.word
        if w in INFIXES:
            return tk.end, not need
        if w in _NEEDS_EXP:
            if w in _PARTNER:
                frame[2].append(_PARTNER[w])
            elif w in frame[2]:
                frame[2].remove(w)
            return tk.end, True
        if w in _UNMODELLED or w in _DECL_WORDS:
            raise Unmodelled(f"keyword {w}")
    return tk.end, False


_PARTNER = {"if": "then", "case": "of", "fn": "=>", "while": "do"}


# ---------------------------------------------------------------- definitions

@dataclass
class Block:
    """Outcome of parsing a `Definition name: … End` the way HOL does."""
    diags: list = field(default_factory=list)   # (start, end, message)
    end: int = 0                                # where the definition ends
    tail: tuple | None = None                   # (start, end) of text left over as SML
    stray_qed: tuple | None = None              # (start, end) of a QED now outside any proof


def parse_definition(text, colon):
    """The definition's quotation runs from just after its colon to a
    column-0 `End` or `Termination` (then a tactic and `End`); anything
    else is recovered from.  Returns a Block, or None."""
    try:
        return _parse_definition(text, colon)
    except Unmodelled:
        return None


def _parse_definition(text, colon):
    closers = ["End", "Termination"]
    q = read_quote(text, colon + 1, closers)
    out = Block()
    if q.how == "close" and q.word == "End":
        out.end = q.after
        return out
    if q.how == "close":
        tac = _parse_tactic(text, q.after, "End", "QED")
        out.diags, out.end = tac.diags, tac.end
        return out
    out.diags.append((colon + 1, q.at, quote_message(q, closers)))
    out.end = q.at
    if q.how == "strong":
        if q.word != "Proof":
            raise Unmodelled(f"quotation ended by {q.word}")
        # HOL accepts a QED right after the Proof silently; otherwise the
        # tactic text is read as top-level SML and the QED that follows is
        # a bad declaration.
        nxt = _token(text, q.after)
        if nxt.kind == "ident" and nxt.word == "QED" and col0(text, nxt.start):
            out.end = nxt.end
            return out
        tac = _parse_tactic(text, q.after, "QED", "End", after_proof=True)
        if tac.closed and not tac.diags:
            out.tail = (nxt.start, _trim(text, q.after, tac.stop.start))
            out.stray_qed = (tac.stop.start, tac.stop.end)
        else:
            raise Unmodelled("more recovery after the definition")
    return out


def _trim(text, a, b):
    while b > a and text[b - 1].isspace():
        b -= 1
    return b
