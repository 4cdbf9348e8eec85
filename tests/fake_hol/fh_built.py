"""The fake's built theories: where a theory's build is found, and what its
theorems rest on, as the fake `Holmake` records it and the fake server reads it.

HOL records in every theorem's tag the oracles it rests on: a theorem proved
by `cheat`, or from one that was, carries `cheat` (transcripts `theorem-tags`,
`inherited-cheat`: `midTheory.dbl_even` → `(["DISK_THM", "cheat"], [])`).
The fake `Holmake` writes `<name>Theory.dat` as one JSON object,
`{"theory", "ancestors", "tags": {theorem: [oracles…]}}`; a `.dat` of any
other content (a test's placeholder) is a build with no theorems known.

A theory is looked for where the real tools look: the working directory, its
`.hol/objs`, and the directories its Holmakefile's `INCLUDES` names, and
theirs (the recorded `base` ← `mid` ← `top` development in three directories).
"""

import json
import os
import re
import time

_INCLUDES = re.compile(r"^\s*INCLUDES\s*[+:]?=(.*)$", re.MULTILINE)
_THEOREM = re.compile(r"^(?:Theorem|Triviality)\s+([A-Za-z_][A-Za-z0-9_']*)", re.MULTILINE)
_PROOF = re.compile(r"^Proof\b(.*?)^QED\b", re.MULTILINE | re.DOTALL)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_']*(?:\.[A-Za-z_][A-Za-z0-9_']*)?")
_AXIOM = re.compile(r'\bnew_axiom\s*\(\s*"([^"\\]+)"')
_ANCESTORS = re.compile(r"^Ancestors\b(.*?)(?=^\S|^\s*$|\Z)", re.MULTILINE | re.DOTALL)
MAX_DIRS = 64


def includes(directory):
    """The existing directories `directory`'s Holmakefile INCLUDES names."""
    try:
        with open(os.path.join(directory, "Holmakefile"), encoding="utf-8") as f:
            text = f.read().replace("\\\n", " ")
    except OSError:
        return []
    found = []
    for m in _INCLUDES.finditer(text):
        for word in m.group(1).split():
            path = os.path.realpath(os.path.join(directory, word))
            if "$" not in word and os.path.isdir(path):
                found.append(path)
    return found


def search_dirs(directory="."):
    """`directory` and what its INCLUDES reach, transitively (at most MAX_DIRS)."""
    seen, todo = [], [os.path.realpath(directory)]
    while todo and len(seen) < MAX_DIRS:
        d = todo.pop(0)
        if d not in seen:
            seen.append(d)
            todo += includes(d)
    return seen


def find(stem, exts, directory="."):
    """The first build file `stem + ext` in the search directories (each with its `.hol/objs`), or None."""
    for d in search_dirs(directory):
        for place in (d, os.path.join(d, ".hol", "objs")):
            for e in exts:
                path = os.path.join(place, stem + e)
                if os.path.exists(path):
                    return path
    return None


def record(theory, directory="."):
    """What the fake Holmake recorded of `theory`'s build (`{}` if not built or not recorded)."""
    path = find(theory, ("Theory.dat",), directory)
    if path is None:
        return {}
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def tags(theory, directory="."):
    """`{theorem: [oracles]}` of a built theory (the `DISK_THM` a loaded one carries included)."""
    return dict(record(theory, directory).get("tags", {}))


def own_theorems(text):
    """The theorem names a script declares, in order."""
    return [m.group(1) for m in _THEOREM.finditer(text)]


def header_ancestors(text):
    m = _ANCESTORS.search(text)
    if not m:
        return []
    return re.findall(r"[A-Za-z_][A-Za-z0-9_']*", re.sub(r"\[[^\]]*\]", " ", m.group(1)))


def ancestry(theory_names, directory="."):
    """The theories named and, through their records, all theirs, nearest first."""
    seen, todo = [], list(theory_names)
    while todo and len(seen) < 256:
        t = todo.pop(0)
        if t not in seen:
            seen.append(t)
            todo += record(t, directory).get("ancestors", [])
    return seen


def stale_parent(theory, directory="."):
    """(a theory in `theory`'s ancestry, its parent) where the parent was rebuilt after the theory
    was built (its record names another build of it); None when every build agrees."""
    for t in ancestry([theory], directory):
        for parent, stamp in record(t, directory).get("against", {}).items():
            if record(parent, directory).get("stamp") != stamp:
                return t, parent
    return None


def build(name, text, directory="."):
    """The record of building script `text` (theory `name`): each theorem's oracles, with
    `cheat` for a proof that says `cheat` or names a theorem that rests on one, an
    ancestor's (qualified `xTheory.thm`, or bare) or an earlier one of its own."""
    parents = header_ancestors(text)
    below = {}  # (theory, theorem) -> oracles, over every ancestor
    for t in ancestry(parents, directory):
        for thm, oracles in tags(t, directory).items():
            below[(t, thm)] = oracles
    own = {}
    starts = [(m.start(), m.group(1)) for m in _THEOREM.finditer(text)] + [(len(text), None)]
    for (at, thm), (nxt, _) in zip(starts, starts[1:], strict=False):
        proof = _PROOF.search(text, at, nxt)
        body = proof.group(1) if proof else ""
        cheated = bool(re.search(r"\bcheat\b", body))
        for word in _NAME.findall(body):
            if "." in word:
                thy, _, n = word.partition(".")
                cheated |= "cheat" in below.get((thy.removesuffix("Theory"), n), [])
            elif word in own:
                cheated |= "cheat" in own[word]
            else:
                cheated |= any("cheat" in o for (t, n), o in below.items() if n == word)
        own[thm] = ["DISK_THM", "cheat"] if cheated else ["DISK_THM"]
    against = {p: record(p, directory).get("stamp") for p in parents if record(p, directory).get("stamp")}
    axioms = _AXIOM.findall(text)  # `new_axiom ("my_ax", …)`: in DB.axioms, not in a loaded theorem's tag
    return {"theory": name, "ancestors": parents, "tags": own, "axioms": axioms, "stamp": time.time_ns(),
            "against": against}
