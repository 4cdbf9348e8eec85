"""The daemon's modules, and holctl's, import one way: a module never imports what is built on it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported(module: str) -> set[str]:
    """Every first-party module `module` imports, anywhere in its text (a function's lazy imports too)."""
    path = ROOT / Path(*module.split("."))
    source = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    found = set()
    for node in ast.walk(ast.parse(source.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            # `from holsrv import connection` names a module, not a function
            found |= {f"{node.module}.{alias.name}" for alias in node.names
                      if (ROOT / Path(*node.module.split(".")) / f"{alias.name}.py").is_file()}
    return {name for name in found if name.split(".")[0] in ("holsrv", "holctl", "holmcp")}


# module: the modules built on it, which it must not import
BUILT_ON = {
    "holsrv.connection": ["holsrv.connections", "holsrv.daemon", "holsrv.dispatch", "holsrv.main"],
    "holsrv.connections": ["holsrv.daemon", "holsrv.dispatch", "holsrv.main"],
    "holsrv.dispatch": ["holsrv.connection", "holsrv.connections", "holsrv.daemon", "holsrv.main"],
    "holsrv.daemon": ["holsrv.main"],
    "holctl.calls": ["holctl.cli", "holctl.options", "holctl.commands.questions", "holctl.commands.fleet",
                     "holctl.commands.service"],
    "holctl.options": ["holctl.cli", "holctl.commands.questions", "holctl.commands.fleet", "holctl.commands.service"],
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
    assert sorted(imported(module) & set(BUILT_ON[module])) == []


def test_the_per_kind_renderers_share_only_the_common_pieces():
    kinds = ("diagnostics", "goals", "lookups", "output", "status")
    for kind in kinds:
        others = {f"holctl.render.{other}" for other in kinds if other != kind}
        assert sorted(imported(f"holctl.render.{kind}") & others) == [], kind
