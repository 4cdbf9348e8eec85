"""Trials: what `try` costs per candidate, against the calls it stands in for.

Starts a daemon as a subprocess on its own socket with the fake HOL (or,
with --hol, a real one) and a script of a few proofs, then measures:

* cold diagnostics: a new file on a new server (heap load, compile, replay):
  what a spare server for candidates in parallel costs before its first one;
* diagnostics after a real edit: one proof body changed on disk, until settled
  (what an agent does today per guess: edit, check; and again to undo);
* try: N candidates at one line, each a body-confined edit HOL re-checks on
  its fast path; the time per candidate (goals and verdict) and per call.

Prints medians and writes every sample to bench/results/trials-<time>.json.
Never asserts a time.

    python bench/trials.py [--reps 5] [--candidates 4] [--startup-ms 1500] [--hol /path/to/hol]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from pathlib import Path

from harness import FAKE_HOL, HERE, Daemon, median

from holsrv.rpc import messages as m

PROOFS = 8
LINE_IN_PROOF = 4  # `  simp[]` is 4 lines below its `Theorem` line


def script(revision: int = 0) -> str:
    """PROOFS theorems like `Theorem t3: !p q. p /\\ q ==> q /\\ p` proved in two lines."""
    parts = ["Theory bench\nAncestors arithmetic\n"]
    for i in range(PROOFS):
        note = f" (* revision {revision} *)" if i == PROOFS // 2 else ""
        parts.append(f"Theorem t{i}:\n  !p q. p /\\ q ==> q /\\ p\nProof\n  rpt strip_tac >>\n  simp[]{note}\nQED\n")
    return "\n".join(parts)


def line_of_proof(text: str, n: int) -> int:
    """The `simp[]` line of theorem t{n}."""
    lines = text.split("\n")
    return lines.index(f"Theorem t{n}:") + LINE_IN_PROOF + 1


def measure(args: argparse.Namespace, scratch: Path) -> dict:
    env = {} if args.hol else {"FAKE_HOL_STARTUP_MS": str(args.startup_ms), "FAKE_HOL_PROOF_MS": str(args.proof_ms)}
    daemon = Daemon(scratch, "trials", args.hol or str(FAKE_HOL), env).start()
    samples: dict[str, list[float]] = {"cold diagnostics": [], "diagnostics after an edit": [],
                                       "try: per candidate": [], "try: per call": []}
    try:
        for rep in range(args.reps):
            path = scratch / f"b{rep}Script.sml"
            path.write_text(script(), encoding="utf-8")
            began = time.perf_counter()
            daemon.call(m.Diagnostics(str(path), wait=300))
            samples["cold diagnostics"].append(time.perf_counter() - began)
            path.write_text(script(rep + 1), encoding="utf-8")
            began = time.perf_counter()
            result = daemon.call(m.Diagnostics(str(path), wait=300))
            samples["diagnostics after an edit"].append(time.perf_counter() - began)
            if not result.complete:
                print(f"bench: diagnostics after the edit did not settle: {result.headline}", file=sys.stderr)
            # None is the line's own tactic: that one would cost nothing (the text is unchanged).
            tactics = ["metis_tac[]", "rw[]", "fs[]", "conj_tac", "strip_tac", "DECIDE_TAC", "gvs[]", "EVAL_TAC"]
            began = time.perf_counter()
            tried = daemon.call(m.Try(str(path), line_of_proof(script(rep + 1), 1), tactics[:args.candidates]), 600)
            samples["try: per call"].append(time.perf_counter() - began)
            samples["try: per candidate"] += [c.time_s for c in tried.candidates]
            daemon.call(m.Stop(str(path)))  # one server at a time, as a cold start each repetition
    finally:
        daemon.stop()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--candidates", type=int, default=4, choices=range(1, 9))
    parser.add_argument("--startup-ms", type=int, default=1500, help="the fake HOL's heap load")
    parser.add_argument("--proof-ms", type=int, default=20, help="the fake HOL's time per proof")
    parser.add_argument("--hol", default=None, help="a real `hol` instead of the fake")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hs-trials-") as tmp:
        samples = measure(args, Path(tmp))
    print(f"{'figure':32} {'median':>9} {'n':>4}")
    for name, values in samples.items():
        print(f"{name:32} {median(values):8.3f}s {len(values):4}")
    per_candidate, edit = median(samples["try: per candidate"]), median(samples["diagnostics after an edit"])
    print(f"\none candidate / one edit-and-check: {per_candidate / edit:.2f}; an edit-check-undo cycle is two "
          f"such checks ({2 * edit:.3f}s); a spare server costs {median(samples['cold diagnostics']):.3f}s first")
    out = HERE / "results" / f"trials-{datetime.datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "samples": samples}, indent=1))
    print(f"samples: {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
