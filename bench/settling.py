"""The benchmark's settling rows: an edit's answer against HOL's own verdict on the wire, and
the goal state asked ahead at a failure against one nobody asked for.

`edit_to_answer` runs on the fake HOL, whose verdict and relocation reach its wire log
(`FAKE_HOL_LOG`; the relocation delay is `--relocate-ms`); `rich_list` on a real HOL, whose
wire is read through `wiretap.py`.  Each rep's baseline is read off the same run's wire.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

from harness import HERE, Row, edit_proof, median

from holsrv.rpc import messages as m

WAIT = 300.0
PREFETCH_WAIT_S = 30.0
# The script of the fake rows: `edited` is edited each rep, to fail and to pass by turns;
# `broken` always fails at its step, past the one failure a pass asks ahead for.
SCRIPT = """\
Theory settle
Ancestors arithmetic

Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem edited:
  !p q. p /\\ q ==> q /\\ p
Proof
  rpt strip_tac >>
  simp[] (* revision 0 *)
QED

Theorem broken:
  !p q. p /\\ q ==> q
Proof
  rpt strip_tac >>
  FAIL_TAC "broken"
QED
"""
PASSING, FAILING = "  simp[] (* revision {} *)", '  FAIL_TAC "edited {}"'


def edit_to_answer(suite: Any) -> None:
    """Edit → answer on the fake, failing and passing edits by turns; then, after each failing
    edit, the goal state asked ahead at its failure against a cold one at `broken`'s."""
    section = f"settling on the fake HOL's own signals (relocation after {suite.args.relocate_ms} ms)"
    wire = suite.scratch / "settle-wire.jsonl"
    daemon = suite.daemon("settle", FAKE_HOL_LOG=str(wire), FAKE_HOL_RELOCATE_MS=str(suite.args.relocate_ms),
                          HOLSRV_PREFETCH_PER_PASS="1")
    path = suite.script("settle", SCRIPT)
    suite.settle(daemon, path)
    answers: dict[bool, list[float]] = {True: [], False: []}
    verdicts: dict[bool, list[float]] = {True: [], False: []}
    ahead, cold = [], []
    text = SCRIPT
    for rep in range(1, 2 * suite.reps + 1):
        failing = rep % 2 == 1
        text = re.sub(r"  (simp\[\] \(\* revision \d+ \*\)|FAIL_TAC \"edited \d+\")",
                      (FAILING if failing else PASSING).format(rep), text)
        path.write_text(text, encoding="utf-8")
        began = time.perf_counter()
        result = daemon.call(m.Diagnostics(str(path), wait=WAIT))
        answers[failing].append(time.perf_counter() - began)
        verdicts[failing].append(hol_settled(wire, path, text, "edited"))
        if not result.complete:
            print(f"  note: {path.name}: {result.verdict}: {result.headline}")
        if failing:
            _goal_states(daemon, wire, path, text, result, ahead, cold)
    for failing, label in ((True, "a proof edited to fail"), (False, "a proof edited to pass")):
        floor = median(verdicts[failing]) + 0.1
        suite.add(Row(section, f"edit → answer, {label} (direct call)", median(answers[failing]), "s", floor,
                      "HOL's verdict on the wire + 100 ms", "≤ 1×", median(answers[failing]) <= floor,
                      samples=answers[failing]))
    suite.add(Row(section, "goalState at the failing step, asked ahead (first call)", median(ahead), "s",
                  median(cold), "the same at a failure not asked ahead", "", None, samples=ahead))
    daemon.stop()


def _goal_states(daemon: Any, wire: Path, path: Path, text: str, result: m.DiagnosticsResult,
                 ahead: list[float], cold: list[float]) -> None:
    """Time goalState at `edited`'s failure (asked ahead) and `broken`'s (not: past the bound)."""
    failures = {_owner(text, d.range.line): d.range for d in result.diagnostics
                if d.message.startswith("proof failed") and not d.note}
    if set(failures) != {"edited", "broken"}:
        print(f"  note: failures located: {sorted(failures)}")
        return
    line = failures["edited"].line
    deadline = time.monotonic() + PREFETCH_WAIT_S
    while _goal_requests_since_edit(wire, path, line) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)  # the benchmark waits for the daemon's background walks, as an agent thinks
    for at, samples in ((line, ahead), (failures["broken"].line, cold)):
        began = time.perf_counter()
        reply = daemon.call(m.GoalState(str(path), at, wait=WAIT))
        samples.append(time.perf_counter() - began)
        if reply.cached != (samples is ahead):
            print(f"  note: goalState at line {at}: cached={reply.cached}")


def _owner(text: str, line: int) -> str:
    """The theorem whose block holds `line` (1-based) of `text`."""
    names = [(n, match.group(1)) for n, match in
             ((n, re.match(r"Theorem (\w+):", row)) for n, row in enumerate(text.split("\n"), 1)) if match]
    return max(((n, name) for n, name in names if n <= line), default=(0, ""))[1]


def _records(wire: Path) -> list[dict]:
    with open(wire, encoding="utf-8") as log:
        return [json.loads(line) for line in log if line.strip()]


def _goal_requests_since_edit(wire: Path, path: Path, line: int) -> int:
    uri, count = path.resolve().as_uri(), 0
    for record in _records(wire):
        msg = record["msg"]
        params = msg.get("params") or {}
        if record["dir"] == "C->S" and msg.get("method") == "textDocument/didChange":
            if (params.get("textDocument") or {}).get("uri") == uri:
                count = 0
        elif record["dir"] == "C->S" and msg.get("method") == "$/hol/goalState":
            count += params.get("position", {}).get("line") == line - 1
    return count


def hol_settled(wire: Path, path: Path, text: str, theorem: str) -> float:
    """Seconds from the last full text HOL got for `path` to its final word on `theorem`: the
    pass's `$/compileCompleted`, the verdict and, for a failure, the move of its diagnostic off
    the theorem's name (docs/protocol.md#proof-diagnostics), whichever came last; NaN if the wire lacks one."""
    uri = path.resolve().as_uri()
    rows = text.split("\n")
    name_line = next(n for n, row in enumerate(rows) if re.match(rf"Theorem {theorem}\b", row))
    # The theorem's own lines: another proof's failure below it is not its move.
    end_line = next((n for n in range(name_line + 1, len(rows)) if re.match(r"(Theorem|Triviality) ", rows[n])),
                    len(rows))
    sent = completed = verdict = moved = None
    failed = False
    for record in _records(wire):
        msg, t = record["msg"], record["t"]
        params = msg.get("params") or {}
        method = msg.get("method")
        if record["dir"] == "C->S" and method == "textDocument/didChange" and \
                (params.get("textDocument") or {}).get("uri") == uri:
            sent, completed, verdict, moved, failed = t, None, None, None, False
        elif sent is None or record["dir"] != "S->C" or params.get("uri") not in (uri, None):
            continue
        elif method == "$/compileCompleted" and completed is None:
            completed = t
        elif method == "$/proofStates":
            for state in params.get("states", []):
                if state.get("name") == theorem and state.get("status") in ("proved", "failed"):
                    verdict, failed = t, state["status"] == "failed"
        elif method == "textDocument/publishDiagnostics" and failed and moved is None and any(
                d.get("message", "").startswith("proof failed")
                and name_line < d.get("range", {}).get("start", {}).get("line", name_line) < end_line
                for d in params.get("diagnostics", [])):
            moved = t
    ends = [completed, verdict] + ([moved] if failed else [])
    return float("nan") if sent is None or None in ends else max(e for e in ends if e is not None) - sent


def rich_list(suite: Any, hol: str) -> None:
    """Edit → answer on HOL's own rich_listScript.sml (a copy), against HOL's verdict on the wire."""
    section = f"settling on a real HOL ({hol})"
    source = Path(hol).resolve().parent.parent / "src" / "list" / "src" / "rich_listScript.sml"
    if not source.exists():
        print(f"  skipped: no {source}")
        return
    path = suite.scratch / "rich_list" / "rich_listScript.sml"
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, path)
    wire = suite.scratch / "rich-list-wire.jsonl"
    daemon = suite.daemon("richlist", str(HERE / "wiretap.py"), WIRETAP_HOL=hol, WIRETAP_LOG=str(wire))
    result = daemon.call(m.Diagnostics(str(path), wait=3600.0))
    if not result.complete:
        print(f"  skipped: the first check did not settle: {result.headline}")
        daemon.stop()
        return
    text = path.read_text(encoding="utf-8")
    theorems = re.findall(r"^Theorem (\w+)\s*:", text, flags=re.M)
    answers, verdicts = [], []
    for rep in range(suite.reps):
        theorem = theorems[(len(theorems) // 3 + 7 * rep) % len(theorems)]  # away from the file's ends
        text = edit_proof(text, theorem, rep)
        path.write_text(text, encoding="utf-8")
        began = time.perf_counter()
        daemon.call(m.Diagnostics(str(path), wait=WAIT))
        answers.append(time.perf_counter() - began)
        verdicts.append(hol_settled(wire, path, text, theorem))
    floor = median(verdicts) + 0.1
    suite.add(Row(section, "rich_list: edit → answer (direct call)", median(answers), "s", floor,
                  "HOL's verdict on the wire + 100 ms", "≤ 1×", median(answers) <= floor, samples=answers))
    daemon.stop()
