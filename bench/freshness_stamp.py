"""What stamping an answer with its freshness costs the daemon, per answer, for an unchanged file.

    .venv/bin/python bench/freshness_stamp.py [--answers N]

The file is left two seconds old first: a younger one is re-read and hashed
on every call (`files.RACY_NS`), which is not what an answer usually meets.
No servers run, so the pool's staleness reasons cost their cheapest.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from pathlib import Path

from holsrv.answers import common
from holsrv.answers.cache import AnswerCache
from holsrv.config.settings import Settings
from holsrv.pool.pool import Pool
from holsrv.rpc import messages as m


async def measure(answers: int) -> float:
    scratch = Path(tempfile.mkdtemp(prefix="hs-bench-"))
    try:
        script = scratch / "demoScript.sml"
        script.write_text("Theory demo\nAncestors arithmetic list\n\n" + "Theorem t: T\nProof\n  simp[]\nQED\n" * 500)
        time.sleep(2.2)  # past the racy-clean window
        settings = Settings(socket=scratch / "s.sock")
        ctx = common.Context(Pool(settings), AnswerCache(16), settings)
        src = await common.read(ctx, str(script))
        reply = m.HoverResult(file=str(script), content_hash=src.hash, text="x", server=m.ServerNote(pid=1))
        request = m.Hover(str(script), 1, 1)
        for _ in range(100):
            await common.stamp(ctx, request, reply)
        started = time.perf_counter()
        for _ in range(answers):
            await common.stamp(ctx, request, reply)
        return (time.perf_counter() - started) / answers
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--answers", type=int, default=5000)
    args = parser.parse_args()
    per = asyncio.run(measure(args.answers))
    print(f"freshness stamp: {per * 1e6:.1f} µs per answer ({args.answers} answers, unchanged 16 KB script)")


if __name__ == "__main__":
    main()
