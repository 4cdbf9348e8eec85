"""The house's shape: product modules import one another one way only.

An import inside a function or under `TYPE_CHECKING` still ties two modules
together (the lower one cannot be read, tested or moved without the upper
one), so every import counts, wherever it stands.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("holsrv", "holctl", "holmcp")


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every product module `name` imports, anywhere in its text."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            named.add(base)
            named.update(f"{base}.{alias.name}" for alias in node.names)
    return {n for n in named if n in known and n != name and not name.startswith(n + ".")}


@functools.cache
def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, set(modules)) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            if component:
                found.append(sorted([v, *component]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_two_product_modules_import_each_other_even_indirectly():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_circle_through_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_wire_imports_nothing_of_the_daemon_but_the_error_codes():
    # The clients stand on the wire package alone (test_light_imports checks what
    # loads at run time; this checks what any path through the code could load).
    graph = import_graph()
    wire = [n for n in graph if n.startswith("holsrv.rpc")]
    allowed = set(wire) | {"holsrv.errors"}
    assert {n: sorted(graph[n] - allowed) for n in wire if graph[n] - allowed} == {}


# The daemon's house and holctl's: module -> the modules built on it, which it must not import.
BUILT_ON = {
    "holsrv.connection": ["holsrv.connections", "holsrv.daemon", "holsrv.dispatch", "holsrv.main"],
    "holsrv.connections": ["holsrv.daemon", "holsrv.dispatch", "holsrv.main"],
    "holsrv.dispatch": ["holsrv.connection", "holsrv.connections", "holsrv.daemon", "holsrv.main"],
    "holsrv.daemon": ["holsrv.main"],
    "holctl.calls": ["holctl.cli", "holctl.options", "holctl.commands.questions", "holctl.commands.fleet",
                     "holctl.commands.service", "holctl.commands.watch"],
    "holctl.options": ["holctl.cli", "holctl.commands.questions", "holctl.commands.fleet", "holctl.commands.service",
                       "holctl.commands.watch"],
    "holctl.commands.questions": ["holctl.cli", "holctl.commands.fleet", "holctl.commands.service"],
    "holctl.commands.fleet": ["holctl.cli", "holctl.commands.questions", "holctl.commands.service"],
    "holctl.commands.service": ["holctl.cli", "holctl.commands.questions", "holctl.commands.fleet"],
    **{
        f"holctl.render.{kind}": ["holctl.render", "holctl.calls", "holctl.cli"]
        for kind in ("common", "diagnostics", "goals", "lookups", "output", "status")
    },
}


@pytest.mark.parametrize("module", sorted(BUILT_ON))
def test_a_module_never_imports_one_built_on_it(module):
    assert sorted(import_graph()[module] & set(BUILT_ON[module])) == []


def test_the_per_kind_renderers_share_only_the_common_pieces():
    kinds = ("diagnostics", "goals", "lookups", "output", "status")
    for kind in kinds:
        others = {f"holctl.render.{other}" for other in kinds if other != kind}
        assert sorted(import_graph()[f"holctl.render.{kind}"] & others) == [], kind


# The pool's house, bottom first: a module may import those of lower layers only,
# and its neighbours see the pool only through `servers.Servers`.
POOL_LAYERS = [
    {"textsource", "holds"},
    {"servers", "history", "stopping", "duties", "reaping", "admission", "buildwatch", "successor"},
    {"launch", "replacement", "unblocking"},
    {"staleness"},
    {"pool"},
]


def test_the_pools_modules_import_only_from_layers_below_their_own():
    layer_of = {f"holsrv.{module}": n for n, layer in enumerate(POOL_LAYERS) for module in layer}
    graph = import_graph()
    upward = [f"{module} imports {other}" for module, n in layer_of.items()
              for other in sorted(graph[module]) if other in layer_of and layer_of[other] >= n]
    assert upward == []


# The text's house, bottom up, with the holsrv modules each may import.  The
# scanners are plain functions over a text: none of them knows the stepping
# driver, and none reaches up.
TEXT_ALLOWED = {
    "stepping": set(),
    "masking": set(),
    "editspan": set(),
    "scanner": set(),
    "cheats": {"scanner"},
    "ancestry": {"masking"},
    "positions": {"errors", "rpc.messages", "rpc"},
    "textcache": {"stepping"},
    "textinfo": {"stepping", "positions", "masking", "scanner", "cheats", "ancestry", "textcache"},
    "script": {"stepping", "positions", "scanner", "cheats", "editspan", "textinfo"},
    "inotify": {"holproject"},
}


def test_each_text_module_imports_only_the_layers_below_it():
    graph = import_graph()
    imported = {module: {n.removeprefix("holsrv.") for n in graph[f"holsrv.{module}"]} for module in TEXT_ALLOWED}
    reaching_up = {module: sorted(names - TEXT_ALLOWED[module]) for module, names in imported.items()}
    assert {module: up for module, up in reaching_up.items() if up} == {}


# The one writer of a user's file stands on the reading of one and the error codes alone, and
# only `try --apply` (`answers.applying`, which `answers.trials` calls) reaches it.
FILEWRITE_ALLOWED = {"holsrv.files", "holsrv.errors", "holsrv.stepping"}


def test_the_file_writer_imports_only_the_file_reader_and_is_imported_only_by_apply():
    graph = import_graph()
    assert sorted(graph["holsrv.filewrite"] - FILEWRITE_ALLOWED) == []
    assert sorted(n for n, imported in graph.items() if "holsrv.filewrite" in imported) == [
        "holsrv.answers.applying", "holsrv.answers.trials"]
