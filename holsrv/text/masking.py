"""A script's code: its comments, string literals and term quotations masked.

The daemon reads a script's structure from its code alone: `cheat` in a
comment, a string or a HOL term is not a tactic, and `Theorem` in a comment
starts nothing.  Masking replaces each such region by spaces, keeping its
newlines, so an offset in the code is the same offset in the text.

Plain functions over a text, at the bottom of the text layers: they import
nothing of the daemon.  `blank_regions` masks a bounded stretch from an
offset, so a caller on the event loop (`textinfo`) can mask a 4 MB text a
slice at a time.
"""

from __future__ import annotations

import re

# What to blank, as alternatives in the order a character-by-character
# reading tries them at one position: a comment, a string literal to its
# closing quote or the end of its line (a backslash escapes the next
# character, a newline too: SML's `\ … \` gaps), and the HOL term quotations
# ``…``, `…`, ‘…’ and “…” (`cheat` in a term is a variable, not a tactic).
# An unclosed one runs to the end of the text.  Comments nest: the pattern
# takes one whole when it nests at most `_NEST_IN_PATTERN` deep and is
# closed; anything else is left to a depth count.
_NEST_IN_PATTERN = 3


def _patterns(possessive: bool) -> tuple[str, str]:
    """The region pattern, and the same with a bare `(*` among the comment forms.

    Possessive: each piece has one way to match, so a failure never
    backtracks.  Without (for a Python whose `re` mishandles nested
    possessive repeats, as 3.11.2's does), each character is taken one way,
    which keeps a failing match linear too, only slower.
    """
    more, each = ("*+", "++") if possessive else ("*", "")
    text = rf"(?:[^(*]{each}|\((?!\*)|\*(?!\)))" + more  # up to the next `(*` or `*)`

    def comment(depth: int) -> str:
        inner = f"(?:{comment(depth - 1)}{text}){more}" if depth > 1 else ""
        return rf"\(\*{text}{inner}\*\)"

    others = (
        rf'"[^"\\\n]{more}(?:\\[\s\S]?[^"\\\n]{more}){more}"?'
        r'|``[\s\S]*?(?:``|\Z)'
        rf'|`[^`]{more}`?'
        rf'|‘[^’]{more}’?'
        rf'|“[^”]{more}”?'
    )
    nested = comment(_NEST_IN_PATTERN)
    return f"{nested}|{others}", rf"{nested}|\(\*|{others}"


def _compiled() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The possessive patterns where this Python's `re` gets them right, else the plain ones."""
    fast = [re.compile(p) for p in _patterns(possessive=True)]
    safe = [re.compile(p) for p in _patterns(possessive=False)]
    samples = ("(*(**)*)", "a (* b (* c *) d *) e", '"x\\"y" (* "*)" *) z', "(*(*(**)*)*) `q` ‘r’ “s”")
    if all(f.sub("-", t) == s.sub("-", t) for f, s in zip(fast, safe, strict=True) for t in samples):
        return fast[0], fast[1]
    return safe[0], safe[1]


_REGION, _REGION_OR_OPENER = _compiled()
# _REGION_OR_OPENER has a bare `(*` last among the comment forms: a comment
# the pattern cannot take whole, whose end a depth count finds.
_NESTING = re.compile(r"\(\*|\*\)")


def blank_comments_and_strings(text: str) -> str:
    """`text` with comments, string literals and term quotations replaced by
    spaces (newlines kept), so offsets in it are offsets in `text`.

    Linear: one compiled regex takes each region whole, and Python only
    counts the depth of comments nested deeper than the regex goes.
    """
    blanked = _REGION.sub(_blanked, text)
    # Outside strings and quotations every `(*` opens a comment, so one left
    # over is a comment the pattern could not take whole (nested deeper, or
    # unclosed): read the text again, counting depth.
    if "(*" not in blanked:
        return blanked
    pieces, at = [], 0
    while at < len(text):
        piece, at = blank_regions(text, at, len(text))
        pieces.append(piece)
    return "".join(pieces)


def _blanked(region: re.Match) -> str:
    text = region.group()
    return _blank(text) if "\n" in text else " " * len(text)


def blank_regions(text: str, start: int, count: int) -> tuple[str, int]:
    """`text[start:end]` masked, and `end`: just past the `count`th region to
    mask from `start` (each region whole, however long), or the end of the
    text when fewer remain.  Masking from `end` goes on as if never cut: no
    region is open there."""
    pieces: list[str] = []
    append, copied, taken = pieces.append, start, 0
    while taken < count:
        region = _REGION_OR_OPENER.search(text, copied)
        if region is None:
            break
        at, end = region.span()
        if end - at == 2 and text[at] == "(":
            # A comment the pattern could not take whole: what it matched
            # after the `(*` may be comment text, so search on from its end.
            end = _comment_end(text, end)
        append(text[copied:at])
        append(_blank(text[at:end]) if text.count("\n", at, end) else " " * (end - at))
        copied, taken = end, taken + 1
    else:
        return "".join(pieces), copied
    append(text[copied:])
    return "".join(pieces), len(text)


def _blank(region: str) -> str:
    return "\n".join(" " * len(line) for line in region.split("\n"))


def _comment_end(text: str, inside: int) -> int:
    """Just past the `*)` closing the comment whose `(*` ends at `inside`."""
    depth = 1
    for token in _NESTING.finditer(text, inside):
        depth += 1 if token.group() == "(*" else -1
        if depth == 0:
            return token.end()
    return len(text)  # an unclosed comment runs to the end, as in SML
