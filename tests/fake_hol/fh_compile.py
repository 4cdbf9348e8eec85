"""Compile passes and the proof pool of the fake `hol lsp`.

One compile thread per open document runs attempts (debounced edits,
retries, extra passes); a fixed set of pool workers replays proofs using
the marker words in their tactic text.  All shared state is guarded by the
server's single lock; sleeps happen outside it.
"""

import os
import queue
import re
import threading
import time
from dataclasses import dataclass, field

import fh_built
import fh_catalog
import fh_goals
from fh_script import Script
from fh_wire import stderr

_THEOREM_FAIL = "Exception raised at Tactical.FAIL_TAC: "
# What the pool says about a tactic in which parse recovery left an empty
# expression: HOL compiles that as `raise Fail "empty"` (the wording of the
# detail is the fake's guess, in the shape of docs/protocol.md#proof-states-and-the-census).
EMPTY_DETAIL = '\nException- Fail "empty" raised\n'


@dataclass
class Entry:
    """One proof known to the pool (keyed by name within its document)."""
    name: str
    pos: dict
    status: str = "checking"
    detail: str | None = None
    job: "Job | None" = None

    def wire(self):
        out = {"pos": self.pos, "name": self.name, "status": self.status}
        if self.detail is not None and self.status in ("failed", "suspended", "diverged"):
            out["detail"] = self.detail
        return out


@dataclass
class Job:
    doc: "Doc"
    entry: Entry
    plan: fh_goals.Plan
    fail_range: dict | None
    cancel: threading.Event = field(default_factory=threading.Event)
    looping: bool = False         # in a LOOP_TAC / GROW_TAC / REPEAT ALL_TAC step


class Doc:
    """Server-side state of one open document."""

    def __init__(self, server, uri, text, version):
        self.uri, self.text, self.version = uri, text, version
        self.refused = False
        self.closed = False
        self.cond = threading.Condition(server.lock)
        self.pending = None           # {"kind", "due", "name"?}
        self.cancel_pass = threading.Event()
        self.running = False
        self.preloaded = False
        self.complete = False
        self.base = None              # Script of the last pass started
        self.done_upto = 0            # declarations of `base` elaborated
        self.frontier = 0             # offset up to which hover/definition answer
        self.blocked = None           # dependency list while blocked
        self.compile_diags = []
        self.proof_diags = {}
        self.walk_diags = {}
        self.last_published = None
        self.pool = {}
        self.rerun = set()
        self.kept_tail = False        # this pass keeps the untouched pool entries after an edit in `local … end`
        self._script = None

    def script(self):
        if self._script is None or self._script.text != self.text:
            self._script = Script(self.text)
        return self._script

    def basename(self):
        return self.uri.rsplit("/", 1)[-1]


class Compiler:
    """Compile attempts, diagnostics publication and the proof pool."""

    def __init__(self, server):
        self.s = server
        self.jobs = queue.Queue()
        self.busy = 0                 # jobs queued or running
        self.progress_ids = 100000
        self.tokens = 0
        self.relocations = []         # (doc, name, diag, range, due)
        self.workers_started = 0
        threading.Thread(target=self._relocator, daemon=True).start()

    # ------------------------------------------------------------ scheduling

    def request(self, doc, kind, delay_s=0.0, **extra):
        """Ask the document's compile thread for an attempt (lock held)."""
        doc.pending = {"kind": kind, "due": time.monotonic() + delay_s, **extra}
        if doc.running and kind == "edit":
            doc.cancel_pass.set()
        doc.cond.notify_all()

    def start_thread(self, doc):
        threading.Thread(target=self._loop, args=(doc,), daemon=True).start()

    def _loop(self, doc):
        while True:
            with self.s.lock:
                while not doc.closed and (doc.pending is None or time.monotonic() < doc.pending["due"]):
                    wait = None if doc.pending is None else doc.pending["due"] - time.monotonic()
                    doc.cond.wait(wait)
                if doc.closed:
                    return
                req, doc.pending = doc.pending, None
            try:
                self.attempt(doc, req)
            except Exception as exc:  # keep the fake alive, like the real compile thread
                stderr(f"compile thread died: {exc!r}")
                with self.s.lock:
                    doc.running = False

    # ------------------------------------------------------------ attempts

    def attempt(self, doc, req):
        self._let_go(doc, req)
        with self.s.lock:
            if doc.closed:
                return
            script, version = doc.script(), doc.version
            if not self._preload(doc, script, version, req):
                return
            if self._nothing_to_do(doc, script, req):
                return
            resume, fast = self._plan(doc, script, req)
            self._drop(doc, script, resume, fast)
            held = self.s.held.is_set()
            if not held:
                doc.running, doc.complete = True, False
                doc.cancel_pass.clear()
                prev_base, doc.base = doc.base, script
                doc.done_upto = min(doc.done_upto, resume) if prev_base else 0
                doc.frontier = script.decls[resume].start if script.decls and resume < len(script.decls) else 0
                token = self._begin(doc)
        if held:
            # A walk holds the compile state (walk-of-a-loop.jsonl): the pool
            # let go of the dropped checks, but this pass never starts.
            return self.s.wait_while_held()
        self._debug_scope(doc, version, script, resume, fast, prev_base)
        self._elaborate(doc, script, version, resume, fast, token, prev_base)

    def _let_go(self, doc, req):
        """A looping check that this attempt drops takes a while to stop: the
        recorded server sent its `cheated`, and began the pass, about 1.95 s
        after the edit instead of 0.31 s (candidate-loops.jsonl)."""
        with self.s.lock:
            if doc.closed or req["kind"] != "edit" or doc.blocked is not None:
                return
            script = doc.script()
            resume, fast = self._plan(doc, script, req)
            names = self._dropped_names(doc, script, resume, fast)
            looping = any(e.job is not None and e.job.looping for n, e in doc.pool.items() if n in names)
        if looping:
            time.sleep(self.s.settings.stop_ms / 1000)

    def _preload(self, doc, script, version, req):
        deps = script.dep_modules()
        if doc.blocked is not None and deps == doc.blocked and req["kind"] != "retry":
            self.s.notify("$/compileBlocked", self._block_params(doc, script))
            return False
        missing = self._missing(script)
        doc.preloaded = True
        if not missing:
            if doc.blocked is not None:
                doc.blocked, doc.base, doc.complete = None, None, False
            return True
        doc.blocked = deps
        doc.running = False
        for m, _, _ in missing:
            if not self._available(m):
                stderr(f"Cannot find file {m}.ui")
            stderr(f'error in load {m} : Fail "{self._why(m)}"')
        lines = script.lines
        doc.compile_diags = [
            {"range": lines.range(a, b, self.s.enc), "severity": 1,
             "message": f"cannot load {m}: {self._why(m)}\n\n"
                        "not compiling this file until its Ancestors / Libs change"}
            for m, a, b in missing]
        self.publish(doc, version)
        params = self._block_params(doc, script, missing)
        self.s.notify("$/compileBlocked", params)
        # The recorded real server repeats this on every genuine re-check
        # (retry, header change), not on mere re-sends after body edits.
        self.s.show(f"HOL: not compiling {doc.basename()}: {params['message']}"
                    " (edit the Ancestors / Libs header to try again)")
        return False

    def _block_params(self, doc, script, missing=None):
        if missing is None:
            missing = self._missing(script) or [(m, 0, 0) for m in doc.blocked]
        message = "; ".join(f"cannot load {m}: {self._why(m)}" for m, _, _ in missing)
        return {"uri": doc.uri, "modules": list(doc.blocked or script.dep_modules()), "message": message}

    def _missing(self, script):
        return [(m, a, b) for m, a, b in (script.header().deps if script.header() else [])
                if not self._available(m) or self._stale(m)]

    def _stale(self, module):
        """(theory, parent): a theory below `module` built against another build of its parent, which
        HOL refuses to load (`link_parents`, as the issue's session saw); None when all agree."""
        return fh_built.stale_parent(module.removesuffix("Theory")) if module.endswith("Theory") else None

    def _why(self, module):
        """Why `module` cannot be loaded.  The link_parents wording is a guess: no recording has it."""
        stale = self._stale(module) if self._available(module) else None
        if stale:
            return f"link_parents: {stale[0]}Theory was built against another build of {stale[1]}Theory"
        return f"Cannot find file {module}.ui"

    def _available(self, module):
        known = fh_catalog.STD_THEORIES if module.endswith("Theory") else fh_catalog.STD_LIBS
        if module.removesuffix("Theory") in known or module in known:
            return True
        exts = ("Theory.uo", "Theory.dat") if module.endswith("Theory") else (".uo",)
        return fh_built.find(module.removesuffix("Theory"), exts) is not None  # here, or by INCLUDES

    def _nothing_to_do(self, doc, script, req):
        """An attempt on an up-to-date file: HOL's shortcut drops every
        pool entry (announced `cheated`) and sends nothing else."""
        if req["kind"] not in ("retry", "save") or not doc.complete or doc.base is None:
            return False
        if doc.base.text != script.text:
            return False
        dropped = [e for e in sorted(doc.pool.values(), key=_pos_key)]
        self._cheat(doc, dropped)
        return True

    def _plan(self, doc, script, req):
        """(resume index, fast-path index or None) for this attempt."""
        doc.kept_tail = False
        header = 1 if script.header() else 0
        if req["kind"] == "checkon":
            return min(header, len(script.decls)), None
        if req["kind"] == "extra":
            idx = next((i for i, d in enumerate(script.decls) if d.pool_name == req["name"]), header)
            return idx, None
        old = doc.base
        if old is None:
            return 0, None
        p = _common_prefix(old.text, script.text)
        if p == len(old.text) == len(script.text):
            return min(doc.done_upto, len(script.decls)), None
        fast = self._fast_path(doc, old, script, p)
        if fast is not None:
            return fast, fast
        resume = min(script.decl_at(p), doc.done_upto)
        inside = script.decls[resume].local if resume < len(script.decls) else None
        if inside is not None and doc.complete:
            # HOL elaborates `local … end` as one declaration: the pass starts at it.
            doc.kept_tail = True
            return inside, None
        return resume, None

    def _fast_path(self, doc, old, new, p):
        if not doc.complete:
            return None
        s = _common_suffix(old.text, new.text, p)
        old_end, new_end = len(old.text) - s, len(new.text) - s
        k = old.decl_at(p)
        if k >= len(old.decls) or k >= len(new.decls):
            return None
        a, b = old.decls[k], new.decls[k]
        if not (a.is_proof() and b.is_proof() and a.pool_name == b.pool_name and a.body and b.body):
            return None
        if a.in_local():
            return None  # proved by the compile: there is no pool check to redo alone
        if self.s.settings.fast_path_from_start:
            return k if a.body[0] <= p < a.body[1] else None
        if a.body[0] <= p and old_end <= a.body[1] and b.body[0] <= p and new_end <= b.body[1]:
            if len(old.decls) == len(new.decls):
                return k
        return None

    def _drop(self, doc, script, resume, fast):
        """Announce `cheated` for pool entries this attempt invalidates."""
        names = self._dropped_names(doc, script, resume, fast)
        dropped = sorted((e for n, e in doc.pool.items() if n in names), key=_pos_key)
        self._cheat(doc, dropped)

    def _dropped_names(self, doc, script, resume, fast):
        if fast is not None:
            names = {script.decls[fast].pool_name}
        elif doc.base is None or resume >= len(script.decls):
            names = set() if doc.base is None else {d.pool_name for d in doc.base.decls[len(script.decls):]}
        else:
            cut = script.decls[resume].start
            names = {d.pool_name for d in doc.base.decls if d.is_proof() and d.start >= cut}
            if doc.kept_tail:
                # Only the entries whose declaration changed: the others are re-announced.
                same = {d.pool_name: doc.base.text[d.start:d.end] for d in doc.base.decls if d.is_proof()}
                names = {d.pool_name for d in script.decls if d.is_proof() and d.start >= cut
                         and same.get(d.pool_name) != script.text[d.start:d.end]} & names | (
                    names - {d.pool_name for d in script.decls if d.is_proof()})
        return names

    def _cheat(self, doc, entries):
        if not entries:
            return
        changed = False
        for e in entries:
            if e.job:
                e.job.cancel.set()
            doc.pool.pop(e.name, None)
            e.status, e.detail = "cheated", None
            changed |= doc.proof_diags.pop(e.name, None) is not None
        self.s.notify("$/proofStates", {"uri": doc.uri, "states": [e.wire() for e in entries]})
        if changed:
            self.publish(doc, doc.version)

    def _begin(self, doc):
        token = str(self.tokens)
        self.tokens += 1
        self.s.send({"jsonrpc": "2.0", "id": self.progress_ids, "method": "window/workDoneProgress/create",
                     "params": {"token": token}})
        self.progress_ids += 1
        self._progress(token, {"kind": "begin", "title": "HOL compile", "cancellable": False,
                               "percentage": 0, "message": doc.basename()})
        return token

    def _progress(self, token, value):
        self.s.notify("$/progress", {"token": token, "value": value})

    def _debug_scope(self, doc, version, script, resume, fast, prev):
        if not self.s.dbg or prev is None:
            return
        pos = script.decls[resume].start if resume < len(script.decls) else len(script.text)
        if pos > 0:
            self.s.notify("$/compileResumedAt", {"uri": doc.uri, "version": version,
                                                 "pos": len(script.text[:pos].encode())})
        why = "taken" if fast is not None else "edit is not inside one Proof-QED body"
        self.s.notify("$/compileScope", {"uri": doc.uri, "tacticOnly": fast is not None,
                                         "reuseTail": fast is not None, "why": why, "tailWhy": why})
        stderr(f"DIAG: compile {doc.uri} v{version} from decl {resume} fast={fast is not None}")

    # ------------------------------------------------------------ elaboration

    def _elaborate(self, doc, script, version, resume, fast, token, prev):
        decls = script.decls
        todo = [fast] if fast is not None else list(range(resume, len(decls)))
        with self.s.lock:
            diags = [dg for i, d in enumerate(decls) if i < resume for dg in self.decl_diags(script, i)]
            doc.compile_diags = diags
        pct, first = 0, True
        if todo:
            with self.s.lock:
                # The pass first publishes what is known before the declarations it
                # elaborates ([] for a clean prefix), then each change as it comes.
                self.publish(doc, version)
            first = False
        for i in todo:
            if doc.cancel_pass.wait(self.s.settings.decl_ms / 1000) or not self._gate_open(doc):
                return self._interrupted(doc, token, i)
            with self.s.lock:
                if doc.closed:
                    return self._interrupted(doc, token, i)
                d = decls[i]
                doc.compile_diags = doc.compile_diags + self.decl_diags(script, i)
                doc.frontier = d.end
                doc.done_upto = i + 1 if fast is None else doc.done_upto
                self.s.notify("$/compileProgress", {"uri": doc.uri, "pos": script.lines.pos(d.end, self.s.enc)})
                self._maybe_publish(doc, version, force=first)
                first = False
                pct = self._report(token, pct, d.end, len(script.text))
        self._finish(doc, script, version, resume, fast, token, first)

    def _gate_open(self, doc):
        """False if an edit cancelled the pass while FAKE_HOL_COMPILE_GATE was shut (at most a minute)."""
        gate = self.s.settings.compile_gate
        for _ in range(3000):
            if not gate or os.path.exists(gate):
                return True
            if doc.cancel_pass.wait(0.02):
                return False
        return True

    def _report(self, token, pct, done, total):
        now = 100 if total == 0 else min(100, done * 100 // total)
        if now > pct:
            self._progress(token, {"kind": "report", "percentage": now})
        return max(now, pct)

    def _interrupted(self, doc, token, i):
        with self.s.lock:
            doc.running = False
            self._progress(token, {"kind": "end"})
            self.s.notify("$/compileInterrupted", {"uri": doc.uri})

    def _finish(self, doc, script, version, resume, fast, token, first):
        with self.s.lock:
            if doc.cancel_pass.is_set() or doc.closed:
                return self._interrupted(doc, token, len(script.decls))
            if fast is not None:
                doc.compile_diags = [dg for i in range(len(script.decls)) for dg in self.decl_diags(script, i)]
            end = len(script.text)
            self.s.notify("$/compileProgress", {"uri": doc.uri, "pos": script.lines.pos(end, self.s.enc)})
            if self.s.check_proofs:
                self._handoff(doc, script, resume, fast)
            self._maybe_publish(doc, version, force=first)
            self._progress(token, {"kind": "end"})
            doc.running, doc.complete = False, True
            doc.done_upto, doc.frontier = len(script.decls), end
            params = {"uri": doc.uri}
            if self.s.check_proofs:
                params.update(version=version, declared=script.declared())
            self.s.notify("$/compileCompleted", params)
            if self.s.check_proofs:
                self._census(doc, set(script.declared()))

    def _census(self, doc, declared):
        gone = [n for n in doc.proof_diags if n not in declared]
        for n in gone:
            doc.proof_diags.pop(n)
        for n in [n for n in doc.pool if n not in declared]:
            e = doc.pool.pop(n)
            if e.job:
                e.job.cancel.set()
        if gone:
            self.publish(doc, doc.version)

    def decl_diags(self, script, i):
        """Compile diagnostics of declaration i (pure function of the text)."""
        d, lines, enc = script.decls[i], script.lines, self.s.enc
        if d.kind == "bad":
            r = lines.range(d.name_start, d.name_start + 1, enc)
            return [{"range": r, "severity": 2, "message": "expected identifier"},
                    {"range": r, "severity": 1, "message": "bad declaration"}]
        # Parse recovery comes first: HOL parses a declaration before compiling it.
        out = [{"range": lines.range(a, b, enc), "severity": parse_severity(msg), "message": msg}
               for a, b, msg in d.parse_diags]
        bad = statement_error(script, i)
        if bad is not None:
            at, message = bad
            return out + [{"range": lines.range(at, at, enc), "severity": 1, "message": message}]
        if not d.body:
            return out
        st = fh_goals.plan(script.text, script.masked, d.body, _stmt(script, d) if d.in_local() else "")
        out += [{"range": lines.range(a, b, enc), "severity": 1,
                 "message": f"Value or constructor ({w}) has not been declared\n"}
                for a, b, w in st.uncompilable]
        fail = next((s for s in st.steps if s[0] in ("fail", "raise")), None) if d.in_local() else None
        if fail is not None and not st.uncompilable:
            # The compile proves a theorem inside `local … end` (no pool entry);
            # a failure is an error of the whole block.  The wording is the fake's
            # guess after boolLib's "Failed to prove theorem"; the range is `local`.
            why = f"{_THEOREM_FAIL}{fail[1]}" if fail[0] == "fail" else fail[1].strip()
            block = script.decls[d.local]
            out.append({"range": lines.range(block.start, block.start + len("local"), enc), "severity": 1,
                        "message": f'Failed to prove theorem "{d.name}"\n{why}\n'})
        return out

    # ------------------------------------------------------------ diagnostics

    def current_diags(self, doc):
        out, seen = [], set()
        for dg in doc.compile_diags + list(doc.walk_diags.values()) + list(doc.proof_diags.values()):
            key = (repr(dg["range"]), dg["message"])
            if key not in seen:
                seen.add(key)
                out.append(dg)
        return out

    def publish(self, doc, version):
        diags = self.current_diags(doc)
        doc.last_published = diags
        self.s.notify("textDocument/publishDiagnostics",
                      {"uri": doc.uri, "version": version, "diagnostics": diags})

    def _maybe_publish(self, doc, version, force=False):
        if force or self.current_diags(doc) != doc.last_published:
            self.publish(doc, version)

    # ------------------------------------------------------------ the pool

    def _handoff(self, doc, script, resume, fast):
        todo = [fast] if fast is not None else range(resume, len(script.decls))
        queued = []
        for i in todo:
            d = script.decls[i]
            if not d.is_proof() or d.in_local() or d.pool_name in doc.pool:
                continue
            st = fh_goals.plan(script.text, script.masked, d.body or (d.end, d.end), _stmt(script, d))
            if st.uncompilable or statement_error(script, i) is not None:
                continue  # no pool entry, not even `cheated` (transcript error-classes)
            if d.empty_tactic:
                # The tactic expression raises as soon as it is evaluated.
                st.steps.insert(0, ("raise", EMPTY_DETAIL, None))
            e = Entry(d.pool_name, script.lines.pos(d.start, self.s.enc))
            e.job = Job(doc, e, st, self._fail_range(script, d, st))
            doc.pool[e.name] = e
            queued.append(e)
        if queued:
            self.s.notify("$/proofStates", {"uri": doc.uri, "states": [e.wire() for e in queued]})
        if doc.kept_tail and fast is None:
            # After an edit inside `local … end` the real server re-ran the pass
            # from that block and re-announced every later proof, unchanged, in
            # one batch (transcript edit-timing-rich-list-local-block).
            doc.kept_tail = False
            later = [doc.pool[d.pool_name] for d in script.decls[resume:]
                     if d.is_proof() and d.pool_name in doc.pool and d.pool_name not in {e.name for e in queued}]
            for e in later:
                e.pos = script.lines.pos(next(d.start for d in script.decls if d.pool_name == e.name), self.s.enc)
            if later:
                self.s.notify("$/proofStates", {"uri": doc.uri, "states": [e.wire() for e in later]})
        else:
            self._announce_moved(doc, script, {e.name for e in queued}, after=fast)
        for e in queued:
            self._enqueue(e.job)

    def _announce_moved(self, doc, script, fresh, after=None):
        """Re-announce entries whose position moved and, after a fast-path pass
        on declaration `after`, every entry below it with its unchanged status
        (the recorded server does: add0 after each edit of rev_length, and a
        152-entry batch in rich_list)."""
        moved = []
        for i, d in enumerate(script.decls):
            e = doc.pool.get(d.pool_name) if d.is_proof() else None
            if e and e.name not in fresh:
                pos = script.lines.pos(d.start, self.s.enc)
                if pos != e.pos or (after is not None and i > after):
                    e.pos = pos
                    moved.append(e)
        if moved:
            self.s.notify("$/proofStates", {"uri": doc.uri, "states": [e.wire() for e in moved]})

    def _fail_range(self, script, d, st):
        fail = next((s for s in st.steps if s[0] in ("fail", "raise")), None)
        if fail is None or fail[0] == "raise" or not d.body:
            return None
        atoms = fh_goals.atoms(script.text, script.masked, d.body[0], d.body[1])
        if fail[2] is None:
            atom = next((a for a in atoms if a.head() in fh_catalog.PROVERS), atoms[0] if atoms else None)
        else:
            atom = next((a for a in atoms if a.start <= fail[2] < a.end), None)
        return script.lines.range(atom.start, atom.end, self.s.enc) if atom else None

    def _enqueue(self, job):
        self.busy += 1
        while self.workers_started < self.s.settings.workers:
            self.workers_started += 1
            threading.Thread(target=self._worker, daemon=True).start()
        self.jobs.put(job)

    def _worker(self):
        while True:
            job = self.jobs.get()
            try:
                if not job.cancel.is_set():
                    verdict = self._run(job)
                    if verdict:
                        self._verdict(job, *verdict)
            finally:
                with self.s.lock:
                    self.busy -= 1

    def _run(self, job):
        """Replay one proof; (status, detail) or None when cancelled."""
        if job.cancel.wait(self.s.settings.proof_ms / 1000):
            return None
        for kind, arg, _ in job.plan.steps:
            if kind == "sleep" and job.cancel.wait(arg / 1000):
                return None
            if kind == "loop":
                job.looping = True
                job.cancel.wait()
                return None
            if kind == "grow":
                job.looping = True
                # Poly/ML keeps the heap a stopped check grew (candidate-loops.jsonl).
                self.s.grower.grow_while(job.cancel, release=False)
                return None
            if kind == "crash":
                self.s.crash("CRASH_TAC")
            if kind == "fail":
                return "failed", f"\n{_THEOREM_FAIL}{arg}\n"
            if kind == "raise":
                return "failed", arg
        if job.plan.suspends:
            return "suspended", ", ".join(job.plan.suspends)
        if job.plan.diverges:
            return "diverged", "1 extra hypothesis"
        return "proved", None

    def _verdict(self, job, status, detail):
        doc, e = job.doc, job.entry
        with self.s.lock:
            if job.cancel.is_set() or doc.pool.get(e.name) is not e:
                return
            e.status, e.detail, e.job = status, detail, None
            self.s.notify("$/proofStates", {"uri": doc.uri, "states": [e.wire()]})
            if self._set_proof_diag(doc, e, job) and not doc.running and not doc.closed:
                self.publish(doc, doc.version)
            if status in ("suspended", "diverged") and e.name not in doc.rerun and not doc.closed:
                # HOL re-elaborates from there with the proof actually run (docs/protocol.md#what-an-edit-does-to-the-pool).
                doc.rerun.add(e.name)
                self.request(doc, "extra", name=e.name)

    def _set_proof_diag(self, doc, e, job):
        before = doc.proof_diags.get(e.name)
        name_range = self._name_range(doc, e.name)
        if e.status == "failed" and name_range:
            text = " ".join(e.detail.split())
            dg = {"range": name_range, "severity": 1, "message": f"proof failed: {text}"}
            doc.proof_diags[e.name] = dg
            if job.fail_range:
                due = time.monotonic() + self.s.settings.relocate_ms / 1000
                self.relocations.append((doc, e.name, dg, job.fail_range, due))
        elif e.status == "diverged" and name_range:
            doc.proof_diags[e.name] = {"range": name_range, "severity": 2, "message":
                                       f"proof produced {e.detail}, so what elaboration stood in "
                                       "for this theorem was not what the proof gives"}
        else:
            doc.proof_diags.pop(e.name, None)
        return doc.proof_diags.get(e.name) != before

    def _name_range(self, doc, name):
        script = doc.base or doc.script()
        d = next((d for d in script.decls if d.pool_name == name), None)
        return script.lines.range(d.name_start, d.name_end, self.s.enc) if d else None

    def _relocator(self):
        """Move a failure diagnostic from the theorem name to the failing
        step once the pool is idle and no compile runs (docs/protocol.md#proof-diagnostics)."""
        while True:
            time.sleep(0.02)
            with self.s.lock:
                if not self.relocations or self.busy or any(d.running for d in self.s.docs.values()):
                    continue
                now = time.monotonic()
                due = [r for r in self.relocations if r[4] <= now]
                self.relocations = [r for r in self.relocations if r[4] > now]
                for doc, name, dg, rng, _ in due:
                    if doc.proof_diags.get(name) is dg and not doc.closed:
                        doc.proof_diags[name] = dict(dg, range=rng)
                        self.publish(doc, doc.version)

    def checking_off(self):
        """`checkProofs: false`: every entry `cheated`, proof diagnostics gone."""
        for doc in list(self.s.docs.values()):
            entries = sorted(doc.pool.values(), key=_pos_key)
            had = bool(doc.proof_diags)
            for e in entries:
                if e.job:
                    e.job.cancel.set()
                e.status, e.detail, e.job = "cheated", None, None
            doc.pool.clear()
            doc.proof_diags.clear()
            if entries:
                self.s.notify("$/proofStates", {"uri": doc.uri, "states": [e.wire() for e in entries]})
            if entries or had:
                self.publish(doc, doc.version)


# A statement that does not elaborate: HOL's compile-time report, as recorded
# (error-classes), with the parts the fake cannot know left out.
_STATEMENT_ERROR = ('Exception\n   HOL_ERR\n     (HOL_ERROR\n         {message =\n          "{why}",\n'
                    '          origins =\n          [{origin_function = "store_thm_at", origin_structure = "Q", '
                    'source_location = Loc_Unknown}]}) raised\n')
_NOT_A_NUMBER = re.compile(r"[+*-]\s*[TF]\b|\b[TF]\s*[+*-]")


def statement_error(script, i):
    """(offset, message) when theorem i's statement does not elaborate, else None.

    The fake knows two kinds: brackets that do not balance (a parse error) and
    `T`/`F` as an operand of `+`, `*` or `-` (a type error).  HOL reports either
    zero-width at the start of the gap before the declaration: the line after
    the previous declaration ends (transcript error-classes)."""
    d = script.decls[i]
    if d.kind != "theorem" or not d.stmt:
        return None
    stmt = script.masked[d.stmt[0]:d.stmt[1]]
    if stmt.count("(") != stmt.count(")"):
        why = ("Don't expect to find a <end of input> in this position after a (\\n"
               "in compiler-generated text and at frag 0 row 0 col 1.\\n")
    elif _NOT_A_NUMBER.search(stmt):
        why = "\\nType error in function application.\\n"
    else:
        return None
    at = d.start
    if i > 0:
        prev_end = script.decls[i - 1].end
        nl = script.text.find("\n", prev_end)
        at = d.start if nl < 0 or nl + 1 > d.start else nl + 1
    return at, _STATEMENT_ERROR.replace("{why}", why)


def parse_severity(message):
    """docs/protocol.md#diagnostics: parse errors the parser recovers from ("unclosed
    quotation", anything "expected") are warnings; other parse errors are
    errors."""
    return 2 if "unclosed quotation" in message or "expected" in message else 1


def _pos_key(e):
    return (e.pos["line"], e.pos["character"])


def _stmt(script, d):
    return script.text[d.stmt[0]:d.stmt[1]] if d.stmt else ""


def _common_prefix(a, b):
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _common_suffix(a, b, p):
    n = min(len(a), len(b)) - p
    i = 0
    while i < n and a[-1 - i] == b[-1 - i]:
        i += 1
    return i
