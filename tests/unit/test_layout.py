"""The house's shape: product modules import one another one way only.

holsrv is a stack of layers (`LAYERS`, bottom first: a folder of `holsrv/` or
one module of `holsrv/` itself), and a module imports only modules of its own
layer or of the layers below it.  One ordered list instead of module lists: a
new module is checked by the folder it is put in.

An import inside a function or under `TYPE_CHECKING` still ties two modules
together (the lower one cannot be read, tested or moved without the upper
one), so every import counts, wherever it stands.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
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


# The layers of holsrv, bottom to top (docs/design.md shows them with what each owns).
LAYERS = [
    'facilities',
    'errors',
    'rpc',
    'text',
    'lsp',
    'config',
    'process',
    'disk',
    'verdict',
    'server',
    'pool',
    'answers',
    'serve',
    'jobs',
    'metrics',
    'dispatch',
    'daemon',
    'main',
    '__main__',
]

# An import that climbs a layer, with the reason it must: none.
EXCEPTIONS: dict[tuple[str, str], str] = {}


def layer(module: str) -> int:
    """The place of `module`'s layer in LAYERS; the package itself (its `__version__`) is below them all."""
    parts = module.split(".")
    return -1 if parts == ["holsrv"] else LAYERS.index(parts[1])


def test_every_folder_and_module_of_holsrv_is_in_a_layer():
    outside = sorted({n.split(".")[1] for n in import_graph() if n.startswith("holsrv.")} - set(LAYERS))
    assert outside == []


def test_a_layer_imports_only_the_layers_below_it():
    graph = import_graph()
    upward = [f"{module} imports {other}" for module in sorted(graph) if module.startswith("holsrv.")
              for other in sorted(graph[module])
              if other.startswith("holsrv") and layer(other) > layer(module) and (module, other) not in EXCEPTIONS]
    assert upward == []


def test_an_import_in_a_function_or_under_type_checking_counts(tmp_path):
    path = tmp_path / "late.py"
    path.write_text("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from holsrv.pool import pool\n\n\n"
                    "def late():\n    from holsrv.answers import cache\n\n    return cache\n", encoding="utf-8")
    known = {"holsrv.pool", "holsrv.pool.pool", "holsrv.answers", "holsrv.answers.cache"}
    assert _imports("holsrv.text.late", path, known) == known


def test_the_layers_are_ordered_bottom_first():
    assert layer("holsrv.text.textinfo") < layer("holsrv.pool.pool") < layer("holsrv.daemon")
    assert layer("holsrv") < layer("holsrv.errors") < layer("holsrv.rpc.messages")


# holctl's house: module -> the modules built on it, which it must not import.
BUILT_ON = {
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


# The one writer of a user's file stands on the reading of one and the error codes alone, and
# only `try --apply` (`answers.trials.applying`, which `answers.trials.trials` calls) reaches it.
FILEWRITE_ALLOWED = {"holsrv.disk", "holsrv.disk.files", "holsrv.errors", "holsrv.text", "holsrv.text.stepping"}


def test_the_file_writer_imports_only_the_file_reader_and_is_imported_only_by_apply():
    graph = import_graph()
    assert sorted(graph["holsrv.disk.filewrite"] - FILEWRITE_ALLOWED) == []
    assert sorted(n for n, imported in graph.items() if "holsrv.disk.filewrite" in imported) == [
        "holsrv.answers.trials.applying", "holsrv.answers.trials.trials"]


def test_the_design_docs_layer_table_lists_each_folders_modules():
    # docs/design.md's table of layers is where a newcomer finds a module by its noun: it lists each
    # folder's modules (and subfolders) exactly, so a module added, merged or renamed shows there.
    import re

    table = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `(\w+)/` \|.*\| (`[^|]*)\|$", table, re.M))
    folders = sorted(p.name for p in (ROOT / "holsrv").iterdir() if (p / "__init__.py").exists())
    assert sorted(rows) == folders
    for folder, listed in rows.items():
        place = ROOT / "holsrv" / folder
        actual = {p.stem for p in place.glob("*.py") if p.stem != "__init__"}
        actual |= {f"{p.name}/" for p in place.iterdir() if (p / "__init__.py").exists()}
        assert set(re.findall(r"`([\w/]+)`", listed)) == actual, folder
