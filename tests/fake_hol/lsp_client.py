"""A small synchronous LSP client for driving the fake server in tests.

Every wait is bounded; messages are read on a thread into a queue so that
a test can assert on the exact sequence the server sent."""

import json
import os
import queue
import subprocess
import sys
import threading
import time

FAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_hol_lsp.py")
FAST_ENV = {"FAKE_HOL_DECL_MS": "1", "FAKE_HOL_PROOF_MS": "5", "FAKE_HOL_RELOCATE_MS": "50",
            "FAKE_HOL_WALK_MS": "150", "FAKE_HOL_DEBOUNCE_MS": "60"}
WAIT_S = 10.0


class Client:
    def __init__(self, args=("lsp", "--lsp-check-proofs"), cwd=None, env=None):
        full_env = {**os.environ, **FAST_ENV, **(env or {})}
        self.proc = subprocess.Popen([sys.executable, FAKE, *args], cwd=cwd, env=full_env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.inbox = queue.Queue()
        self.seen = []
        self.stderr_lines = []
        self.next_id = 1
        self.threads = [threading.Thread(target=self._read, daemon=True),
                        threading.Thread(target=self._drain_stderr, daemon=True)]
        for t in self.threads:
            t.start()

    # ---------------------------------------------------------------- io

    def _read(self):
        out = self.proc.stdout
        while True:
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                c = out.read(1)
                if not c:
                    self.inbox.put(None)
                    return
                header += c
            try:
                length = int(header.split(b":")[1].strip())
            except ValueError:
                # A malformed frame (FAKE_HOL_BROKEN_FRAME_ON): report it and stop.
                self.inbox.put({"broken_frame": header.decode("ascii", "replace")})
                self.inbox.put(None)
                return
            self.inbox.put(json.loads(out.read(length)))

    def _drain_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line.decode("utf-8", "replace").rstrip("\n"))

    def write_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg):
        body = json.dumps({"jsonrpc": "2.0", **msg}).encode()
        self.write_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method, params=None):
        self.send({"method": method, "params": params})

    def request(self, method, params=None, mid=None):
        if mid is None:
            mid, self.next_id = self.next_id, self.next_id + 1
        self.send({"id": mid, "method": method, "params": params})
        return mid

    # ---------------------------------------------------------------- waits

    def next(self, timeout=WAIT_S):
        msg = self.inbox.get(timeout=timeout)
        if msg is not None:
            self.seen.append(msg)
        return msg

    def until(self, pred, timeout=WAIT_S):
        """Messages up to and including the first that satisfies pred."""
        got, deadline = [], time.monotonic() + timeout
        while True:
            msg = self.next(max(0.01, deadline - time.monotonic()))
            if msg is None:
                raise EOFError(f"server closed stdout; got {got}")
            got.append(msg)
            if pred(msg):
                return got

    def until_method(self, method, timeout=WAIT_S, **params):
        return self.until(lambda m: m.get("method") == method and
                          all(m["params"].get(k) == v for k, v in params.items()), timeout)

    def response(self, mid, timeout=WAIT_S):
        return self.until(lambda m: m.get("id") == mid and "method" not in m, timeout)[-1]

    def call(self, method, params=None, timeout=WAIT_S):
        return self.response(self.request(method, params), timeout)

    def quiet_for(self, seconds):
        """Messages arriving within `seconds` (used to assert silence)."""
        got, deadline = [], time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            try:
                msg = self.next(left)
            except queue.Empty:
                break
            if msg is None:
                break
            got.append(msg)
        return got

    # ---------------------------------------------------------------- session

    def initialize(self, encodings=("utf-8",), hierarchical=True):
        caps = {"textDocument": {"documentSymbol": {"hierarchicalDocumentSymbolSupport": hierarchical}}}
        if encodings is not None:
            caps["general"] = {"positionEncodings": list(encodings)}
        result = self.call("initialize", {"processId": None, "capabilities": caps})
        self.notify("initialized", {})
        self.until_method("window/logMessage")
        return result

    def open(self, uri, text, version=1):
        self.notify("textDocument/didOpen", {"textDocument": {
            "uri": uri, "languageId": "holscript", "version": version, "text": text}})

    def change(self, uri, text, version):
        self.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version},
                                               "contentChanges": [{"text": text}]})

    def close(self, timeout=5.0):
        """End of input, bounded wait (then SIGKILL), and let the reader
        threads see end of output before their pipes are closed."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout)
        for t in self.threads:
            t.join(timeout)
        self.proc.stdout.close()
        self.proc.stderr.close()

    def wait_exit(self, timeout=5.0):
        return self.proc.wait(timeout)


def methods(msgs):
    return [m.get("method", "<response>") for m in msgs]


def proof_states(msgs):
    """[(name, status)] per $/proofStates message, in order."""
    return [[(s["name"], s["status"]) for s in m["params"]["states"]]
            for m in msgs if m.get("method") == "$/proofStates"]
