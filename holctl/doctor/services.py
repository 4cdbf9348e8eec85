"""Which of HOL's services work on the configured HOL, by a live probe of a scratch script.

The handshake's server is given a two-theorem script in doctor's empty
directory: one proof that holds, one that fails.  Compile and verdicts work
when the pool reports both rightly; then, each under its own deadline, a goal
state inside the good proof, hover on its `simp`, definition on its name,
theorem search and workspace symbols for boolTheory's `TRUTH`, completion
of `si` (`holsrv.lsp.services`).  A service that answers -32600 or nothing where the
answer is known is lacking: the daemon then answers another way or says so.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from holctl.doctor.report import Check, Status

NAME = "holsrvprobeScript.sml"
SCRIPT = """\
Theory holsrvprobe
Ancestors arithmetic

Theorem probe_good:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem probe_bad:
  1 + 1 = 3
Proof
  simp[]
QED
"""
# 0-based LSP places in SCRIPT (ASCII, so any encoding): after `gen_tac`, on `simp`, after its `si`,
# on `probe_good`.
GOAL_AT = {"line": 6, "character": 9}
HOVER_AT = {"line": 6, "character": 14}
COMPLETE_AT = {"line": 6, "character": 15}
NAME_AT = {"line": 3, "character": 10}
VERDICTS = {"probe_good": "proved", "probe_bad": "failed"}


class Verdicts:
    """The pool's word on the probe's two proofs, from the server's notifications."""

    def __init__(self) -> None:
        self.seen: dict[str, str] = {}
        self.compiled = False
        self.changed = asyncio.Event()

    def notified(self, method: str, params: Any) -> None:
        from holsrv.lsp.proofstates import proof_state

        if method == "$/compileCompleted":
            self.compiled = True
        elif method == "$/proofStates":
            for raw in getattr(params, "states", None) or []:
                state = proof_state(raw)
                self.seen[state.name] = state.status
        else:
            return
        self.changed.set()

    def done(self) -> bool:
        return self.compiled and all(self.seen.get(name) in ("proved", "failed", "diverged") for name in VERDICTS)


async def probe(server, cwd: str, verdicts: Verdicts, timeout_s: float) -> dict:
    """What each service does on `server` (started, handshaken, in `cwd`): Service -> Finding."""
    from holsrv.lsp import hol, replies, services
    from holsrv.lsp.services import Finding, Service, Support

    path = Path(cwd) / NAME
    path.write_text(SCRIPT, encoding="utf-8")
    uri = replies.uri_of(path)

    async def request(method: str, params: dict, timeout: float | None) -> Any:
        return await server.request(method, params, timeout or services.PROBE_S)

    calls = hol.HolCalls(uri, request, server.notify)
    await server.notify("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": "holscript", "version": 1, "text": SCRIPT}})
    found: dict = {Service.COMPILE: await _compiled(verdicts, timeout_s)}
    found[Service.GOALS] = await _goals(calls)
    found[Service.HOVER] = await services.probe_at(
        Service.HOVER, "textDocument/hover", lambda: calls.hover(HOVER_AT, services.PROBE_S),
        "`simp` in a proof it compiled")
    found[Service.DEFINITION] = await services.probe_at(
        Service.DEFINITION, "textDocument/definition", lambda: calls.definition(NAME_AT, services.PROBE_S),
        "a theorem's own name")
    found[Service.SEARCH] = await services.probe_search(lambda q, n, t: calls.search(q, n, t))
    found[Service.SYMBOLS] = await services.probe_symbols(lambda q, t: calls.workspace_symbol(q, t))

    async def completed() -> list:
        return (await calls.completion(COMPLETE_AT, services.PROBE_S))[0]
    found[Service.COMPLETION] = await services.probe_at(
        Service.COMPLETION, "textDocument/completion", completed, "`si` before `simp`")
    if found[Service.COMPILE].support is not Support.WORKS:
        # Lookups read what the compile reached: with none, their silence says nothing of them.
        for service, finding in found.items():
            lookup = service in (Service.GOALS, Service.HOVER, Service.DEFINITION, Service.COMPLETION)
            if lookup and finding.support is Support.LACKS:
                found[service] = Finding(Support.UNKNOWN, "not told: the compile did not finish")
    return found


async def _compiled(verdicts: Verdicts, timeout_s: float):
    from holsrv.lsp.services import Finding, Support

    try:
        async with asyncio.timeout(timeout_s):
            while not verdicts.done():
                verdicts.changed.clear()
                await verdicts.changed.wait()
    except TimeoutError:
        said = ", ".join(f"{n} {s}" for n, s in verdicts.seen.items()) or "no verdict"
        return Finding(Support.UNKNOWN if verdicts.compiled else Support.LACKS,
                       f"no compile and verdicts within {timeout_s:g}s ({said})")
    if {n: verdicts.seen[n] for n in VERDICTS} != VERDICTS:
        return Finding(Support.LACKS, "wrong verdicts: " + ", ".join(f"{n} {verdicts.seen[n]}" for n in VERDICTS))
    return Finding(Support.WORKS, "a good proof proved, a bad one failed")


async def _goals(calls):
    from holsrv.errors import HolsrvError, LspError
    from holsrv.lsp import hol, services
    from holsrv.lsp.services import Finding, Service, Support

    method = "$/hol/goalState"
    try:
        # Asked once the compile completed (`_compiled`), so HOL has no reason to say "pending".
        state = await calls.goal_state(GOAL_AT, timeout=services.PROBE_S)
    except LspError as err:
        if hol.is_unknown_method(err, method):
            return services.unknown_method(Service.GOALS, method)
        return Finding(Support.UNKNOWN, f"`{method}` failed: {err}")
    except HolsrvError as err:
        return Finding(Support.UNKNOWN, f"`{method}` got no answer: {err}")
    if hol.is_pending(state):
        return Finding(Support.UNKNOWN, f"`{method}` said pending after the compile completed")
    if state is None:
        return Finding(Support.LACKS, f"`{method}` answers nothing inside a proof: no goal-state walker")
    return Finding(Support.WORKS, f"`{method}` showed the goal after gen_tac")


def check(found: dict) -> Check:
    """The `services` line: each service's state; the evidence for what does not work."""
    from holsrv.lsp.services import Support

    states = {service.value: finding.support.value for service, finding in found.items()}
    listed = ", ".join(f"{name} {state}" for name, state in states.items())
    notes = [f"{service.value}: {finding.why}" for service, finding in found.items()
             if finding.support is not Support.WORKS]
    if not notes:
        return Check("services", Status.OK, False, f"on a scratch script: {listed}.", services=states)
    return Check("services", Status.WARN, False, f"on a scratch script: {listed}. " + "; ".join(notes) + ".",
                 "nothing to do for the daemon's sake: it searches through eval where search is lacking and says "
                 "in its answers what this HOL cannot do; a newer HOL4 build has every service",
                 services=states)


def not_probed(why: str) -> Check:
    return Check("services", Status.SKIP, False, f"not probed: {why}.")
