"""The HOL the servers would run: which `hol` and why, a real handshake with
its proof-checking server, and the Holmake beside it."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import msgspec

from holctl.doctor import services
from holctl.doctor.report import Check, Status
from holsrv.config import holbuild
from holsrv.config.settings import Settings
from holsrv.errors import HolNotFound, HolsrvError

HOL_FIX = ("set HOL_BIN to the `hol` of a HOL4 build (or HOLDIR to the directory it was built in, or "
           "hol_bin in the config file); see the README's \"Getting HOL4\"")
OLD_HOL_FIX = ("build a recent HOL4 from its sources (README \"Getting HOL4\") and point HOL_BIN or HOLDIR at it: "
               "holsrv runs `hol lsp --lsp-check-proofs`")
# What the handshake's stop may take on top of its deadline: shutdown/exit, then each signal step.
STOP_STEP_S = 3.0


class Hol(msgspec.Struct):
    """What the handshake learnt: serverInfo's fields (empty when not sent)."""

    command: str
    version: str = ""
    holdir: str = ""


def which_hol(settings: Settings, environ: Mapping[str, str]) -> tuple[Check, str | None]:
    """The `hol` a daemon started now would run, and why that one."""
    try:
        hol = settings.hol_command(dict(environ))
    except HolNotFound as err:
        return Check("hol", Status.FAIL, True, str(err).split(". Set ")[0] + ".", HOL_FIX), None
    given = settings.hol_bin
    source = settings.sources.get("hol_bin", "the settings")
    if given and hol == given:
        why = f"hol_bin from {source}"
    elif environ.get("HOLDIR") and Path(hol) == Path(environ["HOLDIR"]) / "bin" / "hol":
        why = f"$HOLDIR/bin/hol, HOLDIR={environ['HOLDIR']}"
    elif any(Path(hol).parent == Path(p) for p in settings.extra_path):
        why = "found in extra_path (HOL_LSP_EXTRA_PATH)"
    else:
        why = "the first `hol` on PATH" + ("" if given else ": no HOL_BIN, HOLDIR or hol_bin set")
    real = os.path.realpath(hol)
    shown = hol if real == hol else f"{hol} (-> {real})"
    if given and hol != given:
        return Check("hol", Status.WARN, True, f"{shown}: {why}, because hol_bin {given} (from {source}) is not an "
                     "executable file.", "fix or unset it, so the servers run the HOL you meant"), hol
    return Check("hol", Status.OK, True, f"{shown}: {why}."), hol


def holdir_of(hol: str | None) -> str:
    """The HOL tree a `hol` belongs to, when the handshake did not say: `bin/..` if it has a sigobj."""
    if hol is None:
        return ""
    tree = Path(os.path.realpath(hol)).parent.parent
    return str(tree) if (tree / "sigobj").is_dir() else ""


def handshake(settings: Settings, hol: str | None, timeout_s: float) -> tuple[Check, Check, Hol | None]:
    """Start `hol lsp --lsp-check-proofs` in an empty directory, initialize, read serverInfo, probe
    its services on a scratch script (`services`), stop it: the proof_server and services checks."""
    if hol is None:
        return (Check("proof_server", Status.SKIP, True, "not tried: no `hol` to start."),
                services.not_probed("no `hol` to start"), None)
    heap = ["--maxheap", str(settings.max_heap_mb)] if settings.max_heap_mb > 0 else []
    argv = [hol, *heap, "lsp", "--lsp-check-proofs"]
    try:
        info, capabilities, found_services = _shake(settings, argv, timeout_s)
    except HolsrvError as err:
        return _failed(err, timeout_s), services.not_probed("the proof server did not start"), None
    probed = services.check(found_services) if found_services else services.not_probed("the probe got no answer")
    shaken, found = _described(argv, info, capabilities, hol)
    return shaken, probed, found


def _described(argv: list[str], info: dict, capabilities: dict, hol: str) -> tuple[Check, Hol]:
    found = Hol(hol, str(info.get("version", "")), str(info.get("holdir", "")))
    offered = [name for key, name in _FEATURES if capabilities.get(key)]
    if not info:
        return Check("proof_server", Status.WARN, True,
                     f"`{' '.join(argv[1:])}` answered, but without serverInfo: an older server, which may lack "
                     f"goal states and search (offers {', '.join(offered) or 'nothing'}).", OLD_HOL_FIX), found
    built = info.get("builtFrom") or found.version
    message = (f"`{' '.join(argv[1:])}` answered: {info.get('name', 'HOL4')} {found.version or '?'}"
               f"{'' if built == found.version else f' (built from {built})'}, HOL tree {found.holdir or '?'}, "
               f"positions {capabilities.get('positionEncoding', 'in bytes')}, offers {', '.join(offered)}.")
    if not holbuild.said(found.version):
        named = holbuild.describe(hol, found.holdir)
        message += f" It does not name its build (version {found.version or 'not given'}): {named}."
    return Check("proof_server", Status.OK, True, message), found


_FEATURES = [("hoverProvider", "hover"), ("definitionProvider", "definition"),
             ("documentSymbolProvider", "symbols"), ("workspaceSymbolProvider", "workspace symbols"),
             ("completionProvider", "completion")]


def _failed(err: HolsrvError, timeout_s: float) -> Check:
    from holsrv.lsp import quirks

    if quirks.lacks_proof_checking(err.detail):
        return Check("proof_server", Status.FAIL, True,
                     "this `hol lsp` has no proof checking (`--lsp-check-proofs` is an unknown option to it): "
                     "an older HOL4.", OLD_HOL_FIX)
    said = [line for line in err.detail.splitlines() if line.strip()][-3:]
    tail = f" Its last words: {' | '.join(said)}" if said else ""
    return Check("proof_server", Status.FAIL, True, f"{err}.{tail}",
                 f"if the heap is slow to load, give it longer (--hol-timeout, now {timeout_s:g}s); otherwise run "
                 "`hol lsp --lsp-check-proofs` by hand in an empty directory and see what it says")


def _shake(settings: Settings, argv: list[str], timeout_s: float) -> tuple[dict, dict, dict]:
    """The daemon's own start and stop of a HOL server, bounded, and the probe of its services
    (`services.probe`: {} when it failed); asyncio only in here."""
    import asyncio
    import logging

    from holsrv.server.holserver import HolServer

    bounded = dataclasses.replace(settings, start_timeout_s=timeout_s, stop_timeout_s=STOP_STEP_S)

    async def shake() -> tuple[dict, dict, dict]:
        verdicts = services.Verdicts()
        server = HolServer("holctl doctor", bounded, verdicts.notified, lambda: None, lambda: "")
        try:
            await server.start(argv, cwd)
            assert server.lsp is not None
            shaken = dict(server.lsp.server_info), dict(server.lsp.capabilities)
            try:
                found = await services.probe(server, cwd, verdicts, timeout_s)
            except HolsrvError:
                found = {}  # the server died or stopped answering: the handshake's line still stands
            return (*shaken, found)
        finally:
            await server.stop()  # shutdown/exit, then stdin, SIGTERM, SIGKILL: each step bounded

    # The daemon's modules log a dead server's stderr; doctor says it once, itself.
    logger = logging.getLogger("holsrv")
    propagate, logger.propagate = logger.propagate, False
    quiet = logging.NullHandler()
    logger.addHandler(quiet)
    # An empty directory: no Holmakefile, so HOL loads its default heap and nothing of the user's.
    try:
        with tempfile.TemporaryDirectory(prefix="holctl-doctor-") as cwd:
            return asyncio.run(shake())
    finally:
        logger.removeHandler(quiet)
        logger.propagate = propagate


def holmake(settings: Settings, hol: str | None, environ: Mapping[str, str]) -> Check:
    """The Holmake `holctl holmake` would run, and whether it is the one beside `hol`."""
    try:
        found = settings.holmake_command(dict(environ))
    except HolNotFound as err:
        fix = ("it comes with HOL4: once `hol` is found, so is the Holmake beside it" if hol is None else
               "set HOLSRV_HOLMAKE_BIN to HOL's bin/Holmake (it is built beside bin/hol)")
        return Check("holmake", Status.FAIL, True, str(err).split(" Set ")[0], fix)
    if settings.holmake_bin:
        return Check("holmake", Status.OK, True,
                     f"{found}: holmake_bin from {settings.sources.get('holmake_bin', 'the settings')}.")
    beside = hol is not None and Path(found).parent in (Path(hol).parent, Path(os.path.realpath(hol)).parent)
    if beside:
        return Check("holmake", Status.OK, True, f"{found}: beside the `hol`.")
    return Check("holmake", Status.WARN, True,
                 f"{found} is not beside the `hol` ({hol or 'none found'}): it may be another HOL's, whose "
                 "theories the servers cannot load.",
                 "set HOLSRV_HOLMAKE_BIN to the Holmake of the same HOL build")
