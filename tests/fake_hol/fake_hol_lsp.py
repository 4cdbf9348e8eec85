#!/usr/bin/env python3
"""A protocol-faithful fake of HOL4's `hol lsp --lsp-check-proofs`, for tests.

Usage:  fake_hol_lsp.py [--maxheap N] lsp [--lsp-check-proofs] [--dbg] [-q]

Speaks LSP on stdin/stdout, logs on stderr.  Everything it says is derived
from the script text: declarations are parsed, "compiled" one per
FAKE_HOL_DECL_MS, and proofs are "replayed" by a worker pool whose verdict
comes from marker words in the tactic text:

    (plain tactics)     proved after FAKE_HOL_PROOF_MS
    cheat               proved (as the real pool reports it)
    FAIL_TAC "msg"      failed, detail "\\nException raised at Tactical.FAIL_TAC: msg\\n"
    NO_TAC              failed, same with msg NO_TAC
    LOOP_TAC            stays `checking` until an edit, checkProofs off, or exit
                        (an edit stops it after FAKE_HOL_STOP_MS); so does REPEAT ALL_TAC
    SLOW_TAC n          takes n ms more, then carries on
    suspend "p"         suspended (labels joined by ", "), plus one extra compile pass
    DIVERGE_TAC         diverged, detail "1 extra hypothesis", warning on the name
    not_a_tactic        compile error at the token, theorem binds, no pool entry
                        (also any identifier starting NO_SUCH / no_such)
    CRASH_TAC           the process dies (status 134) when the pool runs it
    GROW_TAC            allocates memory while the proof is checking

Fault and resource modes (environment):

    FAKE_HOL_STARTUP_MS      delay before answering initialize
    FAKE_HOL_START_GATE=path answer initialize only once path exists (up to 60 s)
    FAKE_HOL_COMPILE_GATE=path  elaborate each declaration only once path exists (ditto)
    FAKE_HOL_CRASH_AFTER=N   die (status 134, "Fatal: fake crash") after N messages
    FAKE_HOL_CRASH_ON=M      die when method M arrives
    FAKE_HOL_HANG_ON=M       stop answering anything once method M arrives
    FAKE_HOL_BROKEN_FRAME_ON=M  write a malformed frame instead of M's answer
    FAKE_HOL_IGNORE_SIGTERM=1   ignore SIGTERM, `exit` and end of input
    FAKE_HOL_FOOTPRINT_MB=N  allocate and touch N MB at start, held for life
    FAKE_HOL_GROW_MB_PER_S=N grow N MB/s of resident memory (GROW_TAC's rate too);
                             with --maxheap M: Poly/ML's out-of-store exit (1)
    FAKE_HOL_PIDFILE=path    append the pid at start
    FAKE_HOL_LOG=path        append every message in and out as JSON lines
    FAKE_HOL_OLD=1           be the July 2026 `hol lsp`: no --lsp-check-proofs, no serverInfo
    FAKE_HOL_HOLDIR=path     the HOL tree it reports (serverInfo.holdir, the default heap)
    FAKE_HOL_VERSION=v       serverInfo's version, builtFrom and sources (default fake)
    FAKE_HOL_DECL_MS, FAKE_HOL_PROOF_MS, FAKE_HOL_RELOCATE_MS, FAKE_HOL_WALK_MS,
    FAKE_HOL_DEBOUNCE_MS, FAKE_HOL_STOP_MS, FAKE_HOL_WORKERS   timings and pool size

See README.md next to this file for the full tables.
"""

import json
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fh_server import Server  # noqa: E402
from fh_wire import FramingError, Writer, hard_exit, read_message, stderr  # noqa: E402

USAGE = """Usage: hol [Poly/ML options] lsp [--lsp-check-proofs] [--dbg] [-q]

Poly/ML options:
  --maxheap N     maximum heap size (MB; suffixes K, M, G)
  --minheap N     initial heap size
  --gcthreads N   number of GC threads
"""

_POLY_WITH_VALUE = ("--maxheap", "--minheap", "--gcthreads", "--stackspace", "--gcpercent")
_HOL_FLAGS = ("--lsp-check-proofs", "--dbg", "-q", "--quiet", "--bare", "--min", "--poly")
_HOL_WITH_VALUE = ("--holstate", "-b", "--thmsrc")


class Options:
    def __init__(self):
        self.check_proofs = False
        self.dbg = False
        self.quiet = False
        self.maxheap_mb = None
        self.ignore_sigterm = False
        self.startup_warnings = []
        self.grower = None


def parse_size_mb(text):
    m = re.fullmatch(r"(\d+)([KkMmGg]?)", text)
    if not m:
        raise ValueError(text)
    n, unit = int(m.group(1)), m.group(2).upper()
    return n / 1024 if unit == "K" else n * 1024 if unit == "G" else n


def parse_args(argv, env=None):
    """Options, or exit the way the real launcher does.

    With FAKE_HOL_OLD=1 it is the July 2026 `hol lsp` (docs/protocol.md#the-july-2026-server), which
    has no proof checking: `--lsp-check-proofs` is an unknown option there."""
    env = os.environ if env is None else env
    flags = _HOL_FLAGS if env.get("FAKE_HOL_OLD") != "1" else tuple(f for f in _HOL_FLAGS if f != "--lsp-check-proofs")
    opts, seen_lsp, i = Options(), False, 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if arg in ("--help", "-h"):
            sys.stdout.write(USAGE)
            hard_exit(0)
        elif name in _POLY_WITH_VALUE or name in _HOL_WITH_VALUE:
            if not eq:
                i += 1
                value = argv[i] if i < len(argv) else ""
            if name == "--maxheap":
                opts.maxheap_mb = _size_or_die(value)
        elif arg == "lsp" and not seen_lsp:
            seen_lsp = True
        elif arg in flags or name == "--mt":
            opts.check_proofs |= arg == "--lsp-check-proofs"
            opts.dbg |= arg == "--dbg"
            opts.quiet |= arg in ("-q", "--quiet")
        elif arg.startswith("-") and not os.path.exists(arg):
            stderr(f"Unrecognized option: {arg}")
            hard_exit(1)
        i += 1
    if not seen_lsp:
        stderr("fake hol: only the `lsp` subcommand is supported")
        hard_exit(2)
    return opts


def _size_or_die(value):
    try:
        return parse_size_mb(value)
    except ValueError:
        stderr(f"Unrecognized option value: --maxheap {value}")
        hard_exit(1)


def heap_warnings(holdir):
    """The real server falls back to the default heap when the cwd's
    Holmakefile names one that cannot be loaded, and says so."""
    try:
        with open("Holmakefile", encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return []
    m = re.search(r"^\s*HOLHEAP\s*=\s*(\S+)\s*$", text, re.M)
    if not m or os.path.exists(m.group(1)):
        return []
    heap = os.path.abspath(m.group(1))
    return [f"could not load heap {heap} named by HOLHEAP in {os.getcwd()}/Holmakefile; "
            f"falling back to {holdir}/bin/hol.state. Run Holmake in {os.getcwd()} to build it."]


class Grower:
    """Allocates real (touched) memory; dies like Poly/ML past --maxheap."""

    def __init__(self, rate_mb, maxheap_mb):
        self.rate = rate_mb
        self.maxheap = maxheap_mb
        self.held = []
        self.total = 0.0
        self.lock = threading.Lock()

    def start_background(self):
        threading.Thread(target=self.grow_while, args=(threading.Event(), False), daemon=True).start()

    def grow_while(self, stop, release=True):
        mine = []
        rate = self.rate or 50
        while not stop.wait(0.1):
            mine.append(self._chunk(rate / 10))
        with self.lock:
            if release:
                for chunk in mine:
                    self.total -= len(chunk) / 2**20
            else:
                self.held += mine  # kept, as Poly/ML keeps a grown heap

    def _chunk(self, mb):
        with self.lock:
            if self.maxheap is not None and self.total + mb > self.maxheap:
                stderr("Run out of store - interrupting threads")
                stderr("Failed to recover - exiting")
                hard_exit(1)
            if self.maxheap is None and self.total + mb > 4096:
                return b""              # a safety cap when nobody set --maxheap
            size = int(mb * 2**20)
            chunk = bytearray(size)
            chunk[::4096] = b"\x01" * len(range(0, size, 4096))
            self.total += mb
            return chunk


class Faults:
    """FAKE_HOL_* fault injection on incoming messages."""

    def __init__(self, env, writer):
        self.crash_after = int(env["FAKE_HOL_CRASH_AFTER"]) if env.get("FAKE_HOL_CRASH_AFTER") else None
        self.crash_on = env.get("FAKE_HOL_CRASH_ON")
        self.hang_on = env.get("FAKE_HOL_HANG_ON")
        self.broken_on = env.get("FAKE_HOL_BROKEN_FRAME_ON")
        self.writer = writer
        self.count = 0

    def check(self, msg):
        """Return True when the message must not be processed."""
        self.count += 1
        method = msg.get("method")
        if (self.crash_after is not None and self.count >= self.crash_after) or \
                (self.crash_on and method == self.crash_on):
            stderr("Fatal: fake crash")
            hard_exit(134)
        if self.hang_on and method == self.hang_on:
            self.writer.muted = True
            stderr(f"fake hang on {method}")
            threading.Event().wait()
        if self.broken_on and method == self.broken_on:
            if "id" in msg:
                self.writer.broken_ids.add(msg["id"])
            else:
                self.writer.broken_frame()
                return True
        return False


def startup(opts, env):
    if env.get("FAKE_HOL_PIDFILE"):
        with open(env["FAKE_HOL_PIDFILE"], "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
    if env.get("FAKE_HOL_IGNORE_SIGTERM") == "1":
        opts.ignore_sigterm = True
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    rate = float(env.get("FAKE_HOL_GROW_MB_PER_S") or 0)
    opts.grower = Grower(rate, opts.maxheap_mb)
    if env.get("FAKE_HOL_FOOTPRINT_MB"):  # a loaded heap of a chosen size, held for life
        opts.grower.held.append(opts.grower._chunk(float(env["FAKE_HOL_FOOTPRINT_MB"])))
    if rate > 0:
        opts.grower.start_background()


def main(argv=None, env=None):
    env = dict(os.environ if env is None else env)
    opts = parse_args(sys.argv[1:] if argv is None else argv, env)
    startup(opts, env)
    writer = Writer(sys.stdout.buffer, env.get("FAKE_HOL_LOG"))
    server = Server(writer, opts, env)
    opts.startup_warnings = heap_warnings(server.holdir)
    if not opts.quiet:
        stderr(f"[LSP-init] heap {server.holdir}/bin/hol.state")
        stderr(f"[LSP-init] fake hol lsp, pid {os.getpid()}, check proofs: {opts.check_proofs}")
    faults = Faults(env, writer)
    serve(server, faults, writer, opts)


def serve(server, faults, writer, opts):
    stdin = sys.stdin.buffer
    while True:
        try:
            body = read_message(stdin)
        except FramingError as exc:
            stderr(f"LSP reader: {exc}")
            hard_exit(1)
        if body is None:
            end_of_input(opts)
        try:
            msg = json.loads(body.decode("utf-8", "replace"))
        except ValueError:
            stderr("LSP reader: body is not JSON; ignored")
            continue
        writer.log("C->S", msg)
        if not isinstance(msg, dict) or faults.check(msg):
            continue
        server.handle(msg)


def end_of_input(opts):
    if opts.ignore_sigterm:
        while True:
            time.sleep(3600)
    hard_exit(0)


if __name__ == "__main__":
    main()
