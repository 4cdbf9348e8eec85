"""verify: is FILE really proved, as stated?  One answer, VERIFIED or NOT VERIFIED.

Four checks, each passed, failed or not checked (and why), with evidence:

1. statements: equal to a reference's (`statementcheck`: git HEAD by default);
2. proofs: every named theorem (default all of the file's) proved by HOL with
   no cheat, its own or an ancestor's, from the diagnostics verdict;
3. oracles: HOL's record of what each theorem of the built theory rests on
   (`oracles`), read after the build;
4. build: Holmake builds the file's theory, not CHEATED (`holmake`).

VERIFIED only when all four passed: a check that could not run (no git, no
build, a HOL that could not answer) is said, and the answer is NOT VERIFIED,
so that moving a file out of git or breaking the build cannot make it pass.
Read-only apart from the build's products.
"""

from __future__ import annotations

import re

from holsrv.answers import diagnostics, holmake, oracles, statementcheck
from holsrv.answers.common import Context, Report, opened, read
from holsrv.answers.states import CheckStatus
from holsrv.disk import ancestors
from holsrv.errors import HolsrvError
from holsrv.lsp import theorydb
from holsrv.lsp.proofstates import ProofStatus
from holsrv.rpc import messages as m

_THEORY = re.compile(r"^Theory\s+([A-Za-z_][A-Za-z0-9_']*)", re.MULTILINE)


def theory_of(text: str, stem: str) -> str:
    """The theory a script makes: its `Theory NAME` header, else its name less `Script`."""
    found = _THEORY.search(text)
    return found.group(1) if found else stem.removesuffix("Script")


async def verify(ctx: Context, req: m.Verify, client: str, report: Report | None = None) -> m.VerifyResult:
    started = ctx.clock()
    script = await read(ctx, req.file)  # a bad file fails here, before anything runs
    ref = await statementcheck.reference(script.path, req.against, req.pinned, ctx.settings.request_timeout_s)
    statements, changes = await statementcheck.check(script.text, ref)
    diag = await diagnostics.answer(ctx, m.Diagnostics(file=req.file, wait=req.wait), client, report)
    proofs, named = _proofs(diag, req.theorems)
    theory = theory_of(script.text, script.path.stem)
    if report is not None:
        await report(m.Progress(f"verify: building {theory}Theory with Holmake"))
    built = await holmake.holmake(ctx, m.Holmake(file=req.file, target=f"{theory}Theory.uo"), client, report)
    build = _build(built, theory)
    tags = await _oracles(ctx, req, client, theory, script.text, script.path.parent, build)
    checks = [statements, proofs, tags, build]
    verified = all(c.status == CheckStatus.PASSED for c in checks)
    unchecked = [f"{c.name}: {c.summary}" for c in checks if c.status == CheckStatus.UNCHECKED]
    moved = await _moved(ctx, req.file, script.hash, diag)
    headline = _headline(verified and not moved, checks, script.path.name)
    if moved:  # each check must be about one text: the one whose hash the answer names
        verified = False
        unchecked.append(moved)
        headline += f" {moved}"
    return m.VerifyResult(
        file=str(script.path), content_hash=script.hash, verified=verified, headline=headline, checks=checks,
        reference=ref.said, statements=changes, theorems=named, unchecked=unchecked,
        elapsed_s=round(ctx.clock() - started, 2))


async def _moved(ctx: Context, file: str, content: str, diag: m.DiagnosticsResult) -> str:
    """Why the checks were not all about the text `content` ("" when they were)."""
    if diag.content_hash != content:
        return (f"The proofs were checked on another text (content {diag.content_hash[:12]}: the file changed, "
                "or an editor holds unsaved changes), not the one verified; save and call verify again.")
    try:
        now = await read(ctx, file)
    except HolsrvError as err:
        return f"The file could not be read again after the checks ({err.code}); call verify again."
    if now.hash != content:
        return (f"The file changed during this call (content {content[:12]} → {now.hash[:12]}), so the checks "
                "are not all about one text; call verify again once it is saved.")
    return ""


def _headline(verified: bool, checks: list[m.VerifyCheck], name: str) -> str:
    if verified:
        return f"VERIFIED: {name}: statements, proofs, oracles and axioms, and the build all check."
    failed = [c.name for c in checks if c.status == CheckStatus.FAILED]
    unchecked = [c.name for c in checks if c.status == CheckStatus.UNCHECKED]
    parts = ([f"failed: {', '.join(failed)}"] if failed else []) + (
        [f"not checked: {', '.join(unchecked)}"] if unchecked else [])
    return f"NOT VERIFIED: {name}" + (f": {'; '.join(parts)}." if parts else ".")


def _proofs(diag: m.DiagnosticsResult, wanted: list[str]) -> tuple[m.VerifyCheck, list[str]]:
    """The proofs check, from the diagnostics answer: each named theorem proved, no cheat, its own or inherited."""
    by_name: dict[str, m.Proof] = {}
    for each in diag.proofs:
        by_name[each.name.split("#", 1)[0]] = each  # a rebound name: its last proof stands
    names = list(dict.fromkeys(wanted)) if wanted else list(by_name)
    if not diag.complete and diag.verdict not in ("ERRORS", "BLOCKED"):
        return m.VerifyCheck("proofs", CheckStatus.UNCHECKED, f"HOL's check did not settle: {diag.headline}", []), names
    cheats = {c.theorem.split("#", 1)[0] for c in diag.cheats}
    inherited = {c.theorem: c for c in diag.inherited_cheats}
    evidence, bad = [], []
    for name in names:
        proof = by_name.get(name)
        if proof is None:
            bad.append(name)
            evidence.append(f"{name}: no such theorem in the file")
        elif name in cheats or proof.status == ProofStatus.CHEATED:
            bad.append(name)
            evidence.append(f"{name} (line {proof.line}): cheat")
        elif name in inherited:
            bad.append(name)
            evidence.append(f"{name} (line {proof.line}): rests on cheated {', '.join(inherited[name].rests_on)}")
        elif proof.status != ProofStatus.PROVED:
            bad.append(name)
            detail = f": {proof.detail.strip().splitlines()[0]}" if proof.detail.strip() else ""
            evidence.append(f"{name} (line {proof.line}): {proof.status}{detail}")
        else:
            evidence.append(f"{name} (line {proof.line}): proved")
    if diag.verdict in ("ERRORS", "BLOCKED") and not wanted:
        bad.append(diag.verdict)
        evidence.insert(0, diag.headline)
    if not names:
        return m.VerifyCheck("proofs", CheckStatus.FAILED, "The file has no theorems to verify.", evidence), names
    if bad:
        listed = ", ".join(b for b in bad[:10]) + (" …" if len(bad) > 10 else "")
        return m.VerifyCheck("proofs", CheckStatus.FAILED, f"Not proved by HOL without cheat: {listed}.",
                             evidence), names
    return m.VerifyCheck("proofs", CheckStatus.PASSED, f"All {len(names)} theorems proved by HOL, no cheat.",
                         evidence), names


def _build(built: m.HolmakeResult, theory: str) -> m.VerifyCheck:
    tail = [line for line in built.log_tail.splitlines()[-12:] if line.strip()]
    if built.ok and theory in built.cheated:
        return m.VerifyCheck("build", CheckStatus.FAILED, f"Holmake built {theory}Theory but reported it CHEATED.",
                             [f"{theory}Theory: CHEATED (Holmake's word for a theory built with a cheated proof)"])
    if built.ok:
        return m.VerifyCheck("build", CheckStatus.PASSED, f"Holmake built {theory}Theory ({built.elapsed_s:.1f}s).",
                             [" ".join(built.command)])
    if built.exit_code is None and not built.timed_out:
        return m.VerifyCheck("build", CheckStatus.UNCHECKED, f"Holmake could not run: {built.message}", tail)
    return m.VerifyCheck("build", CheckStatus.FAILED, built.message, tail)


async def _oracles(ctx: Context, req: m.Verify, client: str, theory: str, text: str, directory,
                   build: m.VerifyCheck) -> m.VerifyCheck:
    if build.status == CheckStatus.UNCHECKED or (build.status == CheckStatus.FAILED and "CHEATED" not in build.summary):
        return m.VerifyCheck("oracles", CheckStatus.UNCHECKED, "Not read: HOL's record of a theory needs its build, "
                             "which did not succeed.")
    development = ancestors.development(text, directory).built()
    code = oracles.query_code(theory, development)
    try:
        async with opened(ctx, req.file, client, req.wait) as (_, lease):
            try:
                printed = await theorydb.printed(lease.session.hol, code, ctx.settings.request_timeout_s)
            finally:
                # The built theory is now loaded in the server that compiles the script making it: no
                # recording shows the next compile unharmed, so a fresh server takes over in the background.
                ctx.pool.replacer.refresh(lease.session, "verify loaded the built theory into it")
    except theorydb.DbError as err:
        return m.VerifyCheck("oracles", CheckStatus.UNCHECKED, f"HOL could not load {theory}Theory to read its record: "
                             f"{str(err)[:300]}")
    except HolsrvError as err:
        return m.VerifyCheck("oracles", CheckStatus.UNCHECKED, "HOL did not answer the question of what the "
                             f"theorems rest on ({err.code}: {str(err)[:300]}).")
    check = oracles.judge(oracles.parse(printed), theory, ctx.settings.verify_oracles, ctx.settings.verify_axioms)
    if req.theorems and check.status == CheckStatus.PASSED:
        check.summary += f" (all of {theory}Theory's theorems, not only those named)"
    return check
