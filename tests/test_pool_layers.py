"""The pool's house: its neighbours see it only through `servers.Servers`, and every
import among them points down, even one inside a function or under TYPE_CHECKING."""

from __future__ import annotations

import ast
from pathlib import Path

HOLSRV = Path(__file__).resolve().parent.parent / "holsrv"

# Bottom first: a module may import those of lower layers only.
LAYERS = [
    {"servers", "history", "stopping", "duties", "reaping", "admission", "buildwatch", "successor"},
    {"launch", "replacement", "unblocking"},
    {"staleness"},
    {"pool"},
]


def imported(module: str) -> set[str]:
    """Every `holsrv.X` that `module` imports, wherever the import statement is."""
    tree = ast.parse((HOLSRV / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "holsrv":
            found |= {f"holsrv.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("holsrv."):
            found.add(node.module)
    return {name.split(".")[1] for name in found if name.startswith("holsrv.")}


def test_the_pools_modules_import_only_from_layers_below_their_own_even_lazily():
    layer_of = {module: n for n, layer in enumerate(LAYERS) for module in layer}
    upward = [
        f"holsrv.{module} imports holsrv.{other}"
        for module, n in layer_of.items()
        for other in imported(module)
        if other in layer_of and layer_of[other] >= n
    ]
    assert upward == []


def test_nothing_below_the_pool_imports_the_pool():
    below = [module for layer in LAYERS[:-1] for module in layer]
    assert [m for m in below if "pool" in imported(m)] == []
