"""The text modules import one way: plain scanners, below a text's facts, below what asks them."""

from __future__ import annotations

import ast
from pathlib import Path

import holsrv

# Each text module, bottom up, with the holsrv modules it may import.  The
# scanners are plain functions over a text: none of them knows the
# stepping driver, and none reaches up, not even lazily in a function or
# under TYPE_CHECKING (that is still a circle, only hidden).
ALLOWED = {
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
    "buildwatch": {"holproject"},
}


def imported(module: str) -> set[str]:
    """Every holsrv module `module` imports, wherever in it the import stands."""
    tree = ast.parse((Path(holsrv.__file__).parent / f"{module}.py").read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    ours = {name.removeprefix("holsrv.") for name in found if name.startswith("holsrv.")}
    # `from holsrv.x import Name` adds "x.Name": keep the modules only.
    return {name for name in ours if (Path(holsrv.__file__).parent / f"{name.replace('.', '/')}.py").exists()
            or (Path(holsrv.__file__).parent / name.replace(".", "/")).is_dir()}


def test_each_text_module_imports_only_the_layers_below_it_even_lazily():
    reaching_up = {module: sorted(imported(module) - allowed) for module, allowed in ALLOWED.items()}
    assert {module: up for module, up in reaching_up.items() if up} == {}

