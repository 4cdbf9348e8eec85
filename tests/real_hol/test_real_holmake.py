"""Differential test against a real HOL4: holsrv's diagnostics verdict against Holmake.

Every script of CORPUS gets its own directory. The daemon is asked for the
script's diagnostics first, then plain `Holmake` builds the directory's
default target there. holsrv should answer OK exactly when Holmake builds the
theory (exit 0) and the script has no cheat: Holmake builds a cheated theory
with a warning, holsrv never calls it OK.

What Holmake does with each script is not written down here; it comes from
running Holmake, so the test also records what a real HOL4 does with, say, a
`suspend` that no `Resume` finishes. Every row is collected before the one
assertion, whose message is the whole table (also written to
holsrv-vs-holmake.md in the test's tmp dir, ready to paste into a note), so
one run shows every disagreement.

Runs only where a real HOL4 is found (HOL_BIN, $HOLDIR/bin/hol, or `hol` on
PATH; the `real_hol` fixture of test_real_hol.py) with a Holmake beside it,
and is skipped otherwise. Each script starts its own HOL server, so a run
takes minutes; every call and every Holmake has a deadline.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import test_real_hol

from holsrv import errors
from holsrv.rpc import messages as m

# The same real HOL4, the same skip when there is none, and the same waits as test_real_hol.py.
real_hol = test_real_hol.real_hol
WAIT_S = test_real_hol.WAIT_S
CALL_TIMEOUT_S = test_real_hol.CALL_TIMEOUT_S

# A cold Holmake of one small theory takes seconds; this only stops a hang.
HOLMAKE_TIMEOUT_S = 300.0
# Lines of Holmake's output (or, when it says little, of its build log) in the table.
TAIL_LINES = 8
TABLE_NAME = "holsrv-vs-holmake.md"


@dataclass(frozen=True)
class Case:
    """One theory script: `name` is the theory, the file is `<name>Script.sml`."""

    name: str
    exercises: str
    body: str  # everything after the Theory / Ancestors header
    ancestors: str = "arithmetic"
    # The script uses cheat / CHEAT_TAC: Holmake may build it, holsrv must not say OK.
    cheats: bool = False

    @property
    def text(self) -> str:
        return f"Theory {self.name}\nAncestors {self.ancestors}\n\n{self.body}"


CORPUS = [
    Case("dtClean", "two good proofs", """\
Theorem add_zero:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem add_comm_again:
  !m n:num. m + n = n + m
Proof
  ACCEPT_TAC ADD_COMM
QED
"""),
    Case("dtFailing", "a false goal that DECIDE_TAC cannot prove", """\
Theorem add_zero:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem bad:
  1 + 1 = 3
Proof
  DECIDE_TAC
QED
"""),
    Case("dtCheat", "a proof that is only `cheat`", """\
Theorem add_zero:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem trusted:
  !n:num. n <= n + 1
Proof
  cheat
QED
""", cheats=True),
    Case("dtCheatTac", "a proof ending in CHEAT_TAC", """\
Theorem times_one:
  !n:num. n * 1 = n
Proof
  rw[] >> CHEAT_TAC
QED
""", cheats=True),
    Case("dtNoBracket", "a tactic list missing its `]`", """\
Theorem rev_len:
  !l:'a list. LENGTH (REVERSE l) = LENGTH l
Proof
  rw[LENGTH_REVERSE
QED
""", ancestors="list"),
    Case("dtNoParen", "a tactic missing its `)`", """\
Theorem add_zero:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem zero_add:
  !n:num. 0 + n = n
Proof
  (gen_tac >> simp[]
QED
"""),
    Case("dtNoQed", "a proof missing its QED before the next Theorem", """\
Theorem add_zero:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]

Theorem add_comm_again:
  !m n:num. m + n = n + m
Proof
  ACCEPT_TAC ADD_COMM
QED
"""),
    Case("dtNoEnd", "a Definition missing its End", """\
Definition double_def:
  double (n:num) = n + n

Theorem double_zero:
  double 0 = 0
Proof
  simp[double_def]
QED
"""),
    Case("dtBadAncestor", "an Ancestors entry naming no theory", """\
Theorem add_zero:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED
""", ancestors="arithmetic dtNoSuchTheory"),
    Case("dtGoalsLeft", "a proof that leaves a goal open (strip_tac only)", """\
Theorem lt_suc:
  !n:num. n < n + 1
Proof
  strip_tac
QED
"""),
    Case("dtTermination", "a Definition with a correct Termination proof", """\
Definition sum_to_def:
  sum_to (n:num) = if n = 0 then 0 else n + sum_to (n - 1)
Termination
  WF_REL_TAC `measure I` >> simp[]
End

Theorem sum_to_zero:
  sum_to 0 = 0
Proof
  simp[Once sum_to_def]
QED
"""),
    Case("dtSuspended", 'a `suspend "swap"` with no Resume block', """\
Theorem swap:
  !p q. p /\\ q ==> q /\\ p
Proof
  rpt strip_tac >> suspend "swap"
QED
"""),
    Case("dtResumed", "a suspended subgoal that a Resume block proves", """\
Theorem pick:
  !p q. p /\\ q ==> p
Proof
  rpt strip_tac >> suspend "pick"
QED

Resume pick[pick]:
  RESUME_TAC >> FIRST_ASSUM ACCEPT_TAC
QED

Finalise pick
"""),
    Case("dtTriviality", "a Triviality used by a later Theorem", """\
Triviality zero_add_local:
  !n:num. 0 + n = n
Proof
  simp[]
QED

Theorem uses_it:
  !n:num. (0 + n) + 0 = n
Proof
  simp[zero_add_local]
QED
"""),
]


@dataclass
class HolmakeRun:
    status: int | None  # None: timed out and killed
    seconds: float
    tail: list[str]


@dataclass
class Row:
    case: Case
    verdict: str  # holsrv's verdict, or "error" when the call itself failed
    headline: str
    holmake: HolmakeRun

    @property
    def said(self) -> str:
        """The headline, which normally starts with the verdict already."""
        return self.headline if self.headline.startswith(self.verdict) else f"{self.verdict}: {self.headline}"

    @property
    def holmake_builds(self) -> bool:
        return self.holmake.status == 0

    @property
    def should_be_ok(self) -> bool:
        return self.holmake_builds and not self.case.cheats

    @property
    def agrees(self) -> bool:
        # A Holmake that timed out decides nothing: the row is reported, not agreed.
        return self.holmake.status is not None and (self.verdict == "OK") == self.should_be_ok


def find_holmake(hol: str) -> str | None:
    """Holmake beside `hol` (as named, then with links resolved), else $HOLDIR/bin/Holmake."""
    candidates = [Path(hol).parent / "Holmake", Path(hol).resolve().parent / "Holmake"]
    if os.environ.get("HOLDIR"):
        candidates.append(Path(os.environ["HOLDIR"]) / "bin" / "Holmake")
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


@pytest.fixture
def holmake(real_hol) -> str:
    found = find_holmake(real_hol)
    if found is None:
        pytest.skip(f"no Holmake beside {real_hol} nor in $HOLDIR/bin: the differential test needs both")
    return found


def test_holsrv_says_ok_exactly_when_holmake_builds_without_cheats(daemon_factory, real_hol, holmake, tmp_path):
    daemon = daemon_factory(
        hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120, stop_timeout_s=10, max_servers=2
    )
    rows = []
    for case in CORPUS:
        directory = tmp_path / case.name
        directory.mkdir()
        path = directory / f"{case.name}Script.sml"
        path.write_text(case.text, encoding="utf-8")
        # holsrv first, so its HOL server sees the directory before Holmake builds anything in it.
        verdict, headline = _holsrv_verdict(daemon, path)
        rows.append(Row(case, verdict, headline, _run_holmake(holmake, directory)))

    table = render(rows, real_hol, holmake)
    table_file = tmp_path / TABLE_NAME
    table_file.write_text(table, encoding="utf-8")
    print(f"\n{table}\n(written to {table_file})")
    disagreements = [row.case.name for row in rows if not row.agrees]
    assert not disagreements, f"holsrv and Holmake disagree on {', '.join(disagreements)}:\n\n{table}"


def _holsrv_verdict(daemon, path: Path) -> tuple[str, str]:
    """holsrv's (verdict, headline) for `path`; a failed call is a row too, not the end of the run.

    An answer that is not in yet (INCOMPLETE, or the server still loading)
    gets one more wait: nothing is cancelled in between.
    """
    request = m.Diagnostics(str(path), wait=WAIT_S)
    try:
        result = test_real_hol.diagnostics_with_one_more_wait(daemon, request)
    except errors.ServerDied as err:
        said = f"{err}\n{err.detail}".lower()
        if "unrecognized option" in said or "unrecognised option" in said:
            pytest.skip("this HOL4's `hol lsp` rejects --lsp-check-proofs; holsrv needs a newer HOL4")
        return "error", f"{err.code}: {err}"
    except errors.HolsrvError as err:
        return "error", f"{err.code}: {err}"
    return result.verdict, result.headline


def _run_holmake(holmake: str, directory: Path) -> HolmakeRun:
    """Plain `Holmake` (the default target) in `directory`, output captured, killed at the deadline.

    It runs in a process group of its own, so a timeout kills the HOL
    processes it started too, and nothing else.
    """
    started = time.monotonic()
    proc = subprocess.Popen(
        [holmake],
        cwd=directory,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=HOLMAKE_TIMEOUT_S)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        status = None
        output += f"\n(killed after {HOLMAKE_TIMEOUT_S:.0f} s)"
    (directory / "holmake.out").write_text(output, encoding="utf-8")
    return HolmakeRun(status, time.monotonic() - started, _tail(output, directory))


def _tail(output: str, directory: Path) -> list[str]:
    """The last lines Holmake printed; when that is a line or two, its build logs' last lines too."""
    lines = [line.rstrip() for line in output.splitlines() if line.strip()]
    tail = lines[-TAIL_LINES:]
    if len(lines) <= 2:
        for log in sorted((directory / ".hol" / "logs").glob("*")):
            if log.is_file():
                logged = [line.rstrip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
                tail += [f"[{log.name}] {line}" for line in logged[-TAIL_LINES:]]
    return tail


def render(rows: list[Row], hol: str, holmake: str) -> str:
    """A Markdown summary table, then each script's holsrv headline and Holmake's last lines."""
    out = [
        "## holsrv diagnostics vs Holmake",
        "",
        f"hol: `{hol}`; Holmake: `{holmake}`. Expected: holsrv says OK exactly when Holmake exits 0 "
        "and the script has no cheat.",
        "",
        "| script | exercises | cheat | holsrv verdict | Holmake | should be OK | agree |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        out.append(
            f"| {row.case.name} | {row.case.exercises} | {_yes(row.case.cheats)} | {row.verdict} "
            f"| {_status(row.holmake)} | {_yes(row.should_be_ok)} | {_yes(row.agrees)} |"
        )
    for row in rows:
        out += [
            "",
            f"### {row.case.name}{'' if row.agrees else ' — DISAGREE'}",
            f"holsrv: {row.said}",
            f"Holmake: {_status(row.holmake)} in {row.holmake.seconds:.1f} s; last lines:",
            *(f"    {line}" for line in row.holmake.tail or ["(no output)"]),
        ]
    return "\n".join(out) + "\n"


def _status(run: HolmakeRun) -> str:
    return "timed out" if run.status is None else f"exit {run.status}"


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


# -- a development: a cheat one theory below ---------------------------------

DEV_BASE = "Theory base\n\nDefinition dbl_def:\n  dbl n = 2 * n\nEnd\n"
DEV_MID = ("Theory mid\nAncestors base\n\nTheorem dbl_even:\n  !n. ?k. dbl n = 2 * k\nProof\n  cheat\nQED\n")
DEV_TOP = ("Theory top\nAncestors mid\n\nTheorem dbl_3_even:\n  ?k. dbl 3 = 2 * k\nProof\n"
           "  metis_tac[midTheory.dbl_even]\nQED\n\nTheorem dbl_2:\n  dbl 2 = 4\nProof\n"
           "  simp[baseTheory.dbl_def]\nQED\n")


def test_a_proof_using_a_cheated_lemma_of_an_ancestor_theory_is_not_ok_as_holmake_says_cheated(
    daemon_factory, real_hol, holmake, tmp_path
):
    """Recorded as `inherited-cheat`: HOL's pool says `proved`, Holmake says CHEATED; holsrv agrees with Holmake."""
    for name, text, below in (("base", DEV_BASE, None), ("mid", DEV_MID, "base"), ("top", DEV_TOP, "mid")):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{name}Script.sml").write_text(text, encoding="utf-8")
        if below:
            (tmp_path / name / "Holmakefile").write_text(f"INCLUDES = ../{below}\n", encoding="utf-8")
    runs = {name: _run_holmake(holmake, tmp_path / name) for name in ("base", "mid", "top")}
    assert all(run.status == 0 for run in runs.values()), runs
    top_output = (tmp_path / "top" / "holmake.out").read_text()
    assert "CHEATED" in top_output, top_output  # what the recording shows the real Holmake says

    daemon = daemon_factory(hol_bin=real_hol, quiet_s=1.0, start_timeout_s=180, request_timeout_s=120,
                            stop_timeout_s=10, max_servers=2)
    request = m.Diagnostics(str(tmp_path / "top" / "topScript.sml"), wait=WAIT_S)
    result = test_real_hol.diagnostics_with_one_more_wait(daemon, request)
    assert result.verdict == "CHEATS", result.headline
    assert "midTheory.dbl_even" in result.headline
    assert [(c.theorem, c.rests_on) for c in result.inherited_cheats] == [("dbl_3_even", ["midTheory.dbl_even"])]
