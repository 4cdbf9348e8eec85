"""One file open in an editor and asked about by an agent: with `holctl lsp`, and with the editor's own `hol lsp`.

    python bench/editor_sharing.py [--startup-ms 1500] [--hol /path/to/hol]

Shared: the editor speaks to `holctl lsp`, and the agent's `diagnostics`
is answered by the same (warm) server.  Not shared (how editors work
today): the editor starts its own `hol lsp` and the agent's call starts
the daemon's.  Prints the servers running, their memory, the editor's
first diagnostics and the agent's first answer after the editor opened
the file.  Every process is started here and stopped by its pid.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from harness import FAKE_HOL, Daemon, rss_mb

from holctl.lsp import stdio
from holsrv.rpc import messages as m

SCRIPT = """\
Theory demo
Ancestors arithmetic

Theorem add0:
  !n:num. n + 0 = n
Proof
  gen_tac >> simp[]
QED

Theorem conj_comm:
  !p q. p /\\ q ==> q /\\ p
Proof
  rpt strip_tac >> simp[]
QED
"""
DEADLINE_S = 300.0


class Editor:
    """A minimal LSP client on a language-server process, as an editor drives one."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self._ids = 0

    async def send(self, method: str, params: object, request: bool = False) -> None:
        message: dict = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self._ids += 1
            message["id"] = self._ids
        assert self.proc.stdin is not None
        self.proc.stdin.write(stdio.frame(message))
        await self.proc.stdin.drain()

    async def until(self, method: str) -> dict:
        """Read until a message of `method` (answering the server's requests with null)."""
        assert self.proc.stdout is not None
        async with asyncio.timeout(DEADLINE_S):
            while True:
                message = await stdio.read_message(self.proc.stdout)
                assert message is not None, "the language server closed its output"
                if "method" in message and "id" in message:
                    await self._answer(message["id"])
                if message.get("method") == method or (method == "" and "result" in message):
                    return message

    async def _answer(self, request_id) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(stdio.frame({"jsonrpc": "2.0", "id": request_id, "result": None}))
        await self.proc.stdin.drain()

    async def open(self, path: Path) -> float:
        """initialize, initialized, didOpen; seconds from initialize to the first compile's end."""
        began = time.perf_counter()
        await self.send("initialize", {"capabilities": {"general": {"positionEncodings": ["utf-8"]}}}, True)
        await self.until("")
        await self.send("initialized", {})
        await self.send("textDocument/didOpen", {"textDocument": {
            "uri": path.as_uri(), "languageId": "holscript", "version": 1, "text": path.read_text()}})
        await self.until("$/compileCompleted")
        return time.perf_counter() - began

    async def close(self) -> None:
        await self.send("shutdown", None, True)
        await self.send("exit", None)
        try:
            async with asyncio.timeout(10):
                await self.proc.wait()
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


async def start(argv: list[str], cwd: Path, env: dict[str, str]) -> Editor:
    proc = await asyncio.create_subprocess_exec(*argv, cwd=cwd, env=env, stdin=asyncio.subprocess.PIPE,
                                                stdout=asyncio.subprocess.PIPE, limit=stdio.MAX_BODY_BYTES)
    return Editor(proc)


def servers(daemon: Daemon) -> tuple[int, float]:
    """How many HOL servers the daemon runs, and their resident memory (MB)."""
    status = daemon.call(m.Status())
    live = [s for s in status.sessions if s.pid is not None and s.state not in ("stopped", "dead")]
    return len(live), sum(rss_mb(s.pid) for s in live if s.pid)


async def shared(scratch: Path, hol: str, env: dict[str, str], path: Path) -> dict[str, float]:
    daemon = Daemon(scratch, "shared", hol, env).start()
    try:
        editor = await start([sys.executable, "-m", "holctl", "--socket", str(daemon.socket), "--no-start", "lsp"],
                             path.parent, daemon.env)
        editor_s = await editor.open(path)
        began = time.perf_counter()
        await asyncio.to_thread(daemon.call, m.Diagnostics(str(path)))
        agent_s = time.perf_counter() - began
        count, memory = servers(daemon)
        bridge = rss_mb(editor.proc.pid)
        await editor.close()
        return {"servers": count, "memory_mb": memory, "bridge_mb": bridge, "editor_s": editor_s, "agent_s": agent_s}
    finally:
        daemon.stop()


async def separate(scratch: Path, hol: str, env: dict[str, str], path: Path) -> dict[str, float]:
    daemon = Daemon(scratch, "separate", hol, env).start()
    try:
        editor = await start([hol, "lsp", "--lsp-check-proofs"], path.parent, daemon.env)
        editor_s = await editor.open(path)
        began = time.perf_counter()
        await asyncio.to_thread(daemon.call, m.Diagnostics(str(path)))
        agent_s = time.perf_counter() - began
        count, memory = servers(daemon)
        own = rss_mb(editor.proc.pid)
        await editor.close()
        return {"servers": count + 1, "memory_mb": memory + own, "bridge_mb": 0.0, "editor_s": editor_s,
                "agent_s": agent_s}
    finally:
        daemon.stop()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--startup-ms", type=int, default=1500, help="the fake HOL's heap load")
    parser.add_argument("--hol", default=str(FAKE_HOL), help="the HOL to use (default: the fake)")
    args = parser.parse_args()
    env = {"FAKE_HOL_STARTUP_MS": str(args.startup_ms)}
    with tempfile.TemporaryDirectory(prefix="hs-ed-") as tmp:
        scratch = Path(tmp)
        rows = {}
        for name, run in (("shared (holctl lsp)", shared), ("not shared (editor's own hol lsp)", separate)):
            path = scratch / name.split()[0].replace("(", "") / "demoScript.sml"
            path.parent.mkdir()
            path.write_text(SCRIPT)
            os.utime(path, (time.time() - 5, time.time() - 5))
            rows[name] = await run(scratch, args.hol, env, path)
    print("| setup | HOL servers | their memory (MB) | holctl lsp (MB) | editor: initialize → compiled (s) "
          "| agent's first diagnostics (s) |")
    print("|---|---|---|---|---|---|")
    for name, r in rows.items():
        print(f"| {name} | {r['servers']:.0f} | {r['memory_mb']:.0f} | {r['bridge_mb']:.0f} | {r['editor_s']:.2f} "
              f"| {r['agent_s']:.2f} |")


if __name__ == "__main__":
    asyncio.run(main())
