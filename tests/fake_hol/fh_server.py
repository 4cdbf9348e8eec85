"""Message dispatch of the fake `hol lsp`: handshake, text synchronisation,
configuration and the request handlers."""

import os
import threading
import time

import fh_features
from fh_compile import Compiler, Doc
from fh_script import Lines
from fh_wire import hard_exit, stderr


class Settings:
    """Timings and limits, from FAKE_HOL_* environment variables."""

    def __init__(self, env, check_proofs):
        def ms(name, default):
            return float(env.get(name, default))
        self.decl_ms = ms("FAKE_HOL_DECL_MS", 5)
        self.proof_ms = ms("FAKE_HOL_PROOF_MS", 20)
        self.relocate_ms = ms("FAKE_HOL_RELOCATE_MS", 200)
        self.walk_ms = ms("FAKE_HOL_WALK_MS", 300)
        # A walker with no time limit (walk-of-a-loop.jsonl): a walk of a
        # looping tactic never ends and holds the server (`Server.hold`),
        # growing past --maxheap at this rate (kept under a safety cap).
        self.walker_unlimited = env.get("FAKE_HOL_WALKER") == "unlimited"
        self.walk_grow_mb = ms("FAKE_HOL_WALK_GROW_MB_PER_S", 100)
        self.debounce_ms = ms("FAKE_HOL_DEBOUNCE_MS", 300)
        # How long a looping check takes to stop once an edit reaches it
        # (1.95 s in candidate-loops.jsonl).
        self.stop_ms = ms("FAKE_HOL_STOP_MS", 1900)
        self.startup_ms = ms("FAKE_HOL_STARTUP_MS", 0)
        # Answer initialize only once this file exists (at most a minute):
        # a test holds a server's start for as long as it needs to look.
        self.start_gate = env.get("FAKE_HOL_START_GATE", "")
        # Likewise, elaborate each declaration only once this file exists.
        self.compile_gate = env.get("FAKE_HOL_COMPILE_GATE", "")
        default_workers = min(os.cpu_count() or 1, 8)
        self.workers = int(env.get("FAKE_HOL_WORKERS", default_workers))
        # Judge an edit tactic-only from where it starts alone, as the server
        # the daemon's two-proof workaround was written for does.
        self.fast_path_from_start = env.get("FAKE_HOL_FAST_PATH_FROM_START") == "1"
        # Backends this server lacks (FAKE_HOL_LACKS=search,hover:unknown,…): service -> how it answers.
        self.lacks = fh_features.lacking(env.get("FAKE_HOL_LACKS", ""))


class Server:
    def __init__(self, writer, options, env):
        self.writer = writer
        self.opts = options
        self.settings = Settings(env, options.check_proofs)
        self.lock = threading.RLock()
        self.enc = "utf-16"
        self.hierarchical = False
        self.phase = "pre"            # pre -> await_initialized -> running -> shutdown
        self.docs = {}
        self.bound = None
        self.shown_binding = False
        self.shown_desync = False
        self.check_proofs = options.check_proofs
        self.elab_on = 1
        self.hover_width = 100
        self.dbg = options.dbg
        self.active = {}              # request id -> cancel Event
        self.holdir = env.get("FAKE_HOL_HOLDIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "HOL")
        # What serverInfo names the build: a recorded server not built from a git checkout says "unknown".
        self.version = env.get("FAKE_HOL_VERSION") or "fake"
        self.old = env.get("FAKE_HOL_OLD") == "1"
        self.grower = options.grower
        self.compiler = Compiler(self)
        self.features = fh_features.Features(self)
        self.walk_lock = threading.Lock()
        # Set once a walk of a looping tactic holds the compile state for good
        # (walk-of-a-loop.jsonl): no compile starts and no request is answered
        # again; `shutdown` still is, and the pool still lets go of checks.
        self.held = threading.Event()

    # ------------------------------------------------------------ output

    def send(self, msg):
        self.writer.send(msg)

    def notify(self, method, params):
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def log(self, text):
        self.notify("window/logMessage", {"type": 4, "message": text})

    def show(self, text):
        self.notify("window/showMessage", {"type": 2, "message": text})

    def reply(self, mid, result):
        self.send({"jsonrpc": "2.0", "id": mid, "result": result})

    def error(self, mid, code, message):
        self.send({"jsonrpc": "2.0", "id": mid, "error": {"code": code, "message": message}})

    def crash(self, why):
        stderr(f"Fatal: fake crash ({why})")
        hard_exit(134)

    # ------------------------------------------------------------ dispatch

    def handle(self, msg):
        """Process one incoming message on the main loop."""
        method, mid = msg.get("method"), msg.get("id")
        if method is None:
            return                      # a response to our workDoneProgress/create
        if self.phase == "shutdown":
            if method == "exit":
                self.exit_now(0)
            return
        if self.phase == "pre":
            return self._before_initialize(method, mid, msg)
        if self.phase == "await_initialized":
            if method != "initialized":
                stderr(f"protocol error: expected initialized, got {method}")
                hard_exit(1)
            return self._initialized()
        if mid is None:
            return self._notification(method, msg.get("params"))
        self._request(method, mid, msg.get("params"))

    def _before_initialize(self, method, mid, msg):
        if method == "initialize" and mid is not None:
            return self._initialize(mid, msg.get("params") or {})
        if method == "exit":
            hard_exit(1)
        if mid is not None:
            self.error(mid, -32002, "expected initialize request")

    def _initialize(self, mid, params):
        caps = params.get("capabilities") or {}
        offered = (caps.get("general") or {}).get("positionEncodings") or []
        self.enc = "utf-8" if "utf-8" in offered else "utf-16"
        sym = ((caps.get("textDocument") or {}).get("documentSymbol") or {})
        self.hierarchical = bool(sym.get("hierarchicalDocumentSymbolSupport"))
        if self.settings.startup_ms:
            threading.Event().wait(self.settings.startup_ms / 1000)
        self._wait_for_gate()
        if self.old:
            # The July 2026 server (docs/protocol.md#the-july-2026-server): full sync, references
            # advertised, no positionEncoding (bytes always), no serverInfo.
            self.enc = "utf-8"
            self.reply(mid, {"capabilities": {"textDocumentSync": 1, "hoverProvider": True,
                                              "definitionProvider": True, "referencesProvider": True}})
            self.phase = "await_initialized"
            return
        self.reply(mid, {
            "capabilities": {"textDocumentSync": 2, "positionEncoding": self.enc,
                             "hoverProvider": True, "definitionProvider": True,
                             "documentSymbolProvider": True, "workspaceSymbolProvider": True,
                             "completionProvider": {"triggerCharacters": ["."]}},
            "serverInfo": {"name": "HOL4", "version": self.version, "builtFrom": self.version,
                           "sources": self.version, "holdir": self.holdir}})
        self.phase = "await_initialized"

    def _wait_for_gate(self):
        gate = self.settings.start_gate
        pause = threading.Event()
        for _ in range(3000):  # 60 s
            if not gate or os.path.exists(gate):
                return
            pause.wait(0.02)

    def _initialized(self):
        self.phase = "running"
        self.log("started")
        for warning in self.opts.startup_warnings:
            self.log(warning)
            self.show(warning)

    def exit_now(self, status):
        if self.opts.ignore_sigterm:
            return                      # the client has to escalate to SIGKILL
        hard_exit(status)

    # ------------------------------------------------------------ notifications

    def _notification(self, method, params):
        params = params or {}
        handler = {
            "exit": lambda p: self.exit_now(0),
            "textDocument/didOpen": self._did_open,
            "textDocument/didChange": self._did_change,
            "textDocument/didSave": self._did_save,
            "textDocument/didClose": self._did_close,
            "$/cancelRequest": self._cancel,
            "$/hol/retryCompile": self._retry,
        }.get(method)
        if handler is None:
            if self.dbg:
                stderr(f"DIAG: ignoring notification {method}")
            return
        try:
            with self.lock:
                handler(params)
        except (KeyError, TypeError, AttributeError, ValueError) as exc:
            self.log(f"ignored exception {exc!r}")

    def _did_open(self, p):
        td = p["textDocument"]
        uri, text, version = td["uri"], td["text"], td.get("version", 0)
        doc = self.docs.get(uri)
        if doc is not None:
            doc.text, doc.version = text, version
            return self._schedule(doc, "open", 0)
        doc = self.docs[uri] = Doc(self, uri, text, version)
        if not self._bind(uri):
            doc.refused = True
            return
        self.compiler.start_thread(doc)
        if self.elab_on == 1:
            self._schedule(doc, "open", 0)

    def _bind(self, uri):
        if self.bound is None or self.bound == uri:
            if uri.endswith("Script.sml"):
                self.bound = uri
            return True
        self.log(f"not compiling {uri}: this server is bound to another script")
        if uri.endswith("Script.sml") and not self.shown_binding:
            self.shown_binding = True
            self.show(f"This HOL server is bound to {self.bound}; one server can serve only one "
                      f"script, so {uri} will not be compiled. Open it in its own server.")
        return False

    def _schedule(self, doc, kind, delay_ms):
        if doc.refused:
            return self.log(f"not compiling {doc.uri}: this server is bound to another script")
        self.compiler.request(doc, kind, delay_ms / 1000)

    def _did_change(self, p):
        td = p["textDocument"]
        doc = self.docs.get(td["uri"])
        if doc is None:
            return
        version = td.get("version", doc.version)
        problems = []
        for change in p.get("contentChanges", []):
            if "range" not in change:
                doc.text = change["text"]
            else:
                doc.text, issues = _apply_ranged(doc.text, change, self.enc)
                problems += issues
        doc.version = version
        # A walk's failure is published until a clean walk or an edit (docs/protocol.md#goal-state-walks).
        doc.walk_diags.clear()
        if problems:
            self._desync(doc, version, "; ".join(problems))
        if doc.running:
            doc.cancel_pass.set()
        if self.elab_on == 1 and not doc.refused:
            self._schedule(doc, "edit", self.settings.debounce_ms)

    def _desync(self, doc, version, what):
        detail = f"copy of the document is out of step with the client at version {version}: {what}"
        self.log(f"{doc.uri}: {detail}")
        self.notify("$/hol/desync", {"uri": doc.uri, "version": version, "message": what})
        if not self.shown_desync:
            self.shown_desync = True
            self.show(f"HOL LSP: {detail} -- resynchronising")

    def _did_save(self, p):
        doc = self.docs.get(p["textDocument"]["uri"])
        if doc is not None and self.elab_on == 2:
            self._schedule(doc, "save", 0)

    def _did_close(self, p):
        doc = self.docs.pop(p["textDocument"]["uri"], None)
        if doc is not None:
            doc.closed = True
            doc.cancel_pass.set()
            doc.cond.notify_all()

    def _cancel(self, p):
        event = self.active.get(p.get("id"))
        if event is not None:
            event.set()

    def _retry(self, p):
        uri = (p.get("textDocument") or {}).get("uri") or p.get("uri")
        doc = self.docs.get(uri)
        if doc is not None:
            self._schedule(doc, "retry", 0)

    # ------------------------------------------------------------ requests

    def _request(self, method, mid, params):
        if method == "shutdown":
            self.reply(mid, None)
            self.phase = "shutdown"
            return
        if method == "$/setConfig":
            return self._set_config(mid, params or {})
        handler = self.features.handler(method)
        if handler is None:
            return self.error(mid, -32600, f"unknown method: {method}")
        cancel = threading.Event()
        self.active[mid] = cancel
        threading.Thread(target=self._answer, args=(handler, mid, params, cancel), daemon=True).start()

    def hold(self):
        """A walk that never ends: hold the server from now on, growing as the recorded one did
        (0.7 GB to 5.3 GB in 25 s past a 3 GB --maxheap).  Never returns."""
        self.held.set()
        chunks, grown, cap = [], 0.0, 2048.0  # a safety cap for the machine running the tests
        step = self.settings.walk_grow_mb / 10
        since = time.monotonic()
        while True:
            threading.Event().wait(0.1)
            if step > 0 and grown + step <= cap:
                chunk = bytearray(int(step * 2**20))
                chunk[::4096] = b"\x01" * len(range(0, len(chunk), 4096))
                chunks.append(chunk)
                grown += step
            if time.monotonic() - since >= 30:
                since = time.monotonic()
                self.log("compile state still held after 30s; retrying")

    def wait_while_held(self):
        """What every other worker does once a walk holds the server: wait for good."""
        while self.held.is_set():
            threading.Event().wait(1.0)

    def _answer(self, handler, mid, params, cancel):
        if self.held.is_set():
            return self.wait_while_held()  # walk-of-a-loop.jsonl: no request is answered
        try:
            result = handler(params or {}, cancel, mid)
        except fh_features.Interrupted:
            self.error(mid, -32603, "Interrupt <no location>")
        except (KeyError, TypeError, AttributeError, ValueError):
            self.error(mid, -32602, "json decode failed")
        else:
            if result is not fh_features.NO_REPLY:
                self.reply(mid, result)
        finally:
            self.active.pop(mid, None)

    def _set_config(self, mid, p):
        with self.lock:
            if "elabOn" in p:
                if not isinstance(p["elabOn"], int) or isinstance(p["elabOn"], bool):
                    return self.error(mid, -32602, "json decode failed")
                self.elab_on = p["elabOn"]
            if "hoverWidth" in p:
                if not isinstance(p["hoverWidth"], int) or isinstance(p["hoverWidth"], bool):
                    return self.error(mid, -32602, "json decode failed")
                self._hover_width(p["hoverWidth"])
            if "checkProofs" in p:
                if not isinstance(p["checkProofs"], bool):
                    return self.error(mid, -32602, "json decode failed")
                self._check_proofs(p["checkProofs"])
            self.reply(mid, None)

    def _hover_width(self, width):
        if 20 <= width <= 500:
            self.hover_width = width
            self.log(f"hoverWidth = {width}")
        else:
            self.log(f"ignoring hoverWidth {width}")

    def _check_proofs(self, on):
        self.log(f"checkProofs = {'true' if on else 'false'}")
        was, self.check_proofs = self.check_proofs, on
        if on and not was:
            for doc in self.docs.values():
                if not doc.running and not doc.refused and doc.blocked is None:
                    self.compiler.request(doc, "checkon")
        elif not on:
            self.compiler.checking_off()


def _apply_ranged(text, change, enc):
    """Apply one ranged change, clamped; return (new text, problems)."""
    lines = Lines(text)
    rng = change["range"]
    problems = []
    a, pa = lines.offset(rng["start"], enc)
    b, pb = lines.offset(rng["end"], enc)
    for which, pos, prob in (("start", rng["start"], pa), ("end", rng["end"], pb)):
        if prob == "column":
            problems.append(f"its {which} names column {pos['character']} of line {pos['line']}, "
                            "past the end of the line we hold")
        elif prob == "line":
            problems.append("it names a line the server's copy does not have")
    if b < a:
        problems.append("the range ends before it starts")
        b = a
    claimed = rng["end"]["line"] - rng["start"]["line"]
    held = text[a:b].count("\n")
    if not problems and held != claimed:
        problems.append(f"the text it spans holds {held} newline(s), not the {claimed} the range claims")
    return text[:a] + change.get("text", "") + text[b:], problems
