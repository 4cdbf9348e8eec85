"""restart-daemon against a cold start: what keeping the warm servers across a daemon restart saves.

Starts a real daemon as a subprocess on a temporary socket with the fake HOL
made to load its "heap" slowly (`--startup-ms`), warms N files (the cold
start: each file's first diagnostics), then for each repetition restarts
the daemon in place (`RestartDaemon`, then `Status` until it answers as
restarted) and asks every file's diagnostics again.  Prints medians; never
asserts a time.  Each daemon is stopped, and killed by its pid if it must.

    python bench/handover.py [--servers 1 3] [--reps 3] [--startup-ms 1500]
"""

from __future__ import annotations

import argparse
import os
import select
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from holsrv.errors import HolsrvError
from holsrv.rpc import client as rpc_client
from holsrv.rpc import messages as m

HERE = Path(__file__).resolve().parent
FAKE_HOL = HERE.parent / "tests" / "fake_hol" / "fake_hol_lsp.py"
SCRIPT = (HERE.parent / "tests" / "conftest.py").read_text().split('GOOD_SCRIPT = """\\\n', 1)[1].split('"""', 1)[0]
SCRIPT = SCRIPT.replace("\\\\", "\\")


def call(sock: Path, request: m.Request, timeout: float = 120.0):
    with rpc_client.connect(sock, name="bench", autostart=False) as client:
        return client.call(request, timeout)


def run(servers: int, reps: int, startup_ms: int, scratch: Path) -> dict[str, list[float]]:
    sock = scratch / f"h{servers}.sock"
    env = dict(os.environ, HOL_BIN=str(FAKE_HOL), FAKE_HOL_STARTUP_MS=str(startup_ms),
               HOLSRV_MAX_SERVERS=str(servers + 1), HOLSRV_MAX_HEAP_MB="1024")
    read_fd, write_fd = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-m", "holsrv", "--socket", str(sock), "--ready-fd", str(write_fd),
         "--log-file", str(scratch / f"daemon{servers}.log")],
        pass_fds=(write_fd,), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    os.close(write_fd)
    times: dict[str, list[float]] = {"cold start (all files)": [], "restart-daemon": [],
                                     "first answer after (all files)": []}
    try:
        if not select.select([read_fd], [], [], 30)[0]:
            raise RuntimeError("the daemon did not get ready")
        os.close(read_fd)
        files = []
        for number in range(servers):
            path = scratch / f"s{servers}" / f"f{number}Script.sml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(SCRIPT)
            files.append(path)
        began = time.perf_counter()
        for path in files:
            assert call(sock, m.Diagnostics(str(path), wait=60)).verdict == "OK"
        times["cold start (all files)"].append(time.perf_counter() - began)
        time.sleep(2.1)  # past files.RACY_NS: an unchanged file is then one stat
        for _ in range(reps):
            before = call(sock, m.Status()).restarts
            began = time.perf_counter()
            call(sock, m.RestartDaemon())
            while True:
                try:
                    if call(sock, m.Status(), 30).restarts > before:
                        break
                except (HolsrvError, OSError):
                    pass
                time.sleep(0.01)  # the daemon says nothing when it is back: ask again
            times["restart-daemon"].append(time.perf_counter() - began)
            began = time.perf_counter()
            for path in files:
                reply = call(sock, m.Diagnostics(str(path), wait=60))
                assert reply.verdict == "OK" and reply.server.start == "warm", reply.server
            times["first answer after (all files)"].append(time.perf_counter() - began)
    finally:
        try:
            call(sock, m.Shutdown(), 30)
            proc.wait(60)
        except (HolsrvError, OSError, subprocess.TimeoutExpired):
            proc.kill()
            proc.wait(30)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--startup-ms", type=int, default=1500)
    args = parser.parse_args()
    print(f"fake HOL, heap load {args.startup_ms} ms; medians of {args.reps} restarts")
    print("| servers | measure | median s | samples |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="hb-") as scratch:
        for servers in args.servers:
            for name, samples in run(servers, args.reps, args.startup_ms, Path(scratch)).items():
                shown = ", ".join(f"{s:.3f}" for s in samples)
                print(f"| {servers} | {name} | {statistics.median(samples):.3f} | {shown} |")


if __name__ == "__main__":
    main()
