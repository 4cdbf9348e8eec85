#!/usr/bin/env python3
"""A wire tap for a real `hol lsp`: the benchmark's stand-in for the fake's FAKE_HOL_LOG.

Run as `HOL_BIN` with WIRETAP_HOL naming the real `hol` and WIRETAP_LOG a
file: it runs WIRETAP_HOL with its own arguments, passes the LSP traffic
through both ways unchanged, and appends every message to WIRETAP_LOG as the
fake does (`{"t": seconds since start, "dir": "C->S" | "S->C", "msg": …}`), so
the benchmark reads HOL's own verdict times off the wire the same way for both.
Standard library only; it lives in the server's process group, so stopping
the server stops the tap with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from typing import BinaryIO


def _messages(source: BinaryIO):
    """(raw bytes, decoded body) of each Content-Length frame on `source`, until it ends."""
    while True:
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            byte = source.read(1)
            if not byte:
                return
            header += byte
        length = next(int(line.split(b":", 1)[1]) for line in header.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        body = source.read(length)
        yield header + body, json.loads(body)


def _pump(source: BinaryIO, sink: BinaryIO, direction: str, log: BinaryIO, lock: threading.Lock,
          started: float) -> None:
    try:
        for raw, msg in _messages(source):
            # Logged before it is passed on, as the fake logs what it writes: a reader of the log
            # who has had the message's effect finds the message there.
            line = json.dumps({"t": round(time.monotonic() - started, 6), "dir": direction, "msg": msg},
                              ensure_ascii=False)
            with lock:
                log.write(line.encode() + b"\n")
                log.flush()
            sink.write(raw)
            sink.flush()
    except (BrokenPipeError, ValueError, OSError):
        pass
    finally:
        try:
            sink.close()
        except OSError:
            pass


def main() -> int:
    started = time.monotonic()
    child = subprocess.Popen([os.environ["WIRETAP_HOL"], *sys.argv[1:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None
    lock = threading.Lock()
    with open(os.environ["WIRETAP_LOG"], "ab") as log:
        inbound = threading.Thread(target=_pump, args=(sys.stdin.buffer, child.stdin, "C->S", log, lock, started),
                                   daemon=True)
        inbound.start()
        _pump(child.stdout, sys.stdout.buffer, "S->C", log, lock, started)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
