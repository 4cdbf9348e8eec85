"""The theories a script names as its ancestors, read from its text.

A script names them in its `Ancestors` header or, in an old-style script,
with `open …Theory` before its first theorem.  A plain function of the text
(`textinfo` keeps its answer with the text's other facts); whether those
theories were rebuilt is `ancestors`'s question.
"""

from __future__ import annotations

import re

from holsrv.text import masking

_ANCESTORS = re.compile(r"^Ancestors\b(.*?)(?=^\S|^\s*$|\Z)", re.MULTILINE | re.DOTALL)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_']*")


def ancestors(text: str) -> list[str]:
    """The theory names in the script's `Ancestors` header (attributes dropped),
    then those its `open …Theory` declarations name (old-style scripts)."""
    names = []
    match = _ANCESTORS.search(text)
    if match is not None:
        words = re.sub(r"\[[^\]]*\]", " ", match.group(1))
        names = _NAME.findall(words)
    return list(dict.fromkeys([*names, *opened_theories(text)]))


# Old-style scripts open their ancestors before `new_theory`; later `open`s
# are local to a proof and name theories loaded already.  Only this much of
# the text is read, so the scan costs the same for any script size.
_HEADER_CHARS = 64 * 1024
_HEADER_END = re.compile(r"\bnew_theory\b|^(?:Theorem|Triviality|Definition|Datatype)\b", re.MULTILINE)
_OPEN = re.compile(r"\bopen((?:\s+[A-Za-z_][A-Za-z0-9_'.]*)+)")


def opened_theories(text: str) -> list[str]:
    """Theories (`fooTheory` → `foo`) named by `open` declarations before the
    script's first theorem or `new_theory`, outside comments and strings."""
    head = text[:_HEADER_CHARS]
    code = masking.blank_comments_and_strings(head)
    end = _HEADER_END.search(code)
    code = code[: end.start()] if end else code
    names = []
    for match in _OPEN.finditer(code):
        for word in match.group(1).split():
            if word.endswith("Theory") and len(word) > len("Theory") and "." not in word:
                names.append(word[: -len("Theory")])
    return names
