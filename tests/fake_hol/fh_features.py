"""Request handlers of the fake `hol lsp` that read the script: goal state,
hover, definition, symbols, completion, `$/eval` and `$/hol/search`."""

import re
import threading

import fh_built
import fh_catalog
import fh_eval
import fh_goals

NO_REPLY = object()


class Interrupted(Exception):
    """A `$/cancelRequest` reached the handler (answered with -32603)."""


_SYMBOL_KIND = {"Theorem": 14, "Triviality": 14, "Resume": 14, "Definition": 12,
                "Inductive": 12, "CoInductive": 12, "Datatype": 10, "val": 13, "fun": 12}


# A service a server may be built without, and the method that asks it.
SERVICES = {"search": "$/hol/search", "hover": "textDocument/hover", "definition": "textDocument/definition",
            "symbols": "workspace/symbol", "goalstate": "$/hol/goalState", "completion": "textDocument/completion",
            "eval": "$/eval"}


def lacking(spec):
    """FAKE_HOL_LACKS as {method: "empty" | "unknown"}: `name` answers as if nothing matched
    (what the issue's HOL did), `name:unknown` with -32600 (as the July server does)."""
    out = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, how = item.partition(":")
        if name not in SERVICES or how not in ("", "empty", "unknown"):
            raise SystemExit(f"FAKE_HOL_LACKS: unknown service or mode {item!r}")
        out[SERVICES[name]] = how or "empty"
    return out


class Features:
    def __init__(self, server):
        self.s = server

    def handler(self, method):
        how = self.s.settings.lacks.get(method)
        if how == "unknown":
            return None
        if how == "empty":
            return self._without_backend(method)
        return {
            "$/hol/goalState": self.goal_state,
            "textDocument/hover": self.hover,
            "textDocument/definition": self.definition,
            "textDocument/documentSymbol": self.document_symbol,
            "workspace/symbol": self.workspace_symbol,
            "textDocument/completion": self.completion,
            "$/eval": self.eval,
            "$/hol/search": self.search,
        }.get(method)

    def _without_backend(self, method):
        """How a server built without this backend answers: as if nothing matched.  Its
        workspace/symbol still lists the open files' names, but no ancestor's."""
        if method == "workspace/symbol":
            return lambda p, cancel, mid: [s for s in self.workspace_symbol(p, cancel, mid)
                                           if s["containerName"] == "this file"]
        empty = {"$/eval": [], "$/hol/search": [], "textDocument/hover": None, "textDocument/definition": [],
                 "$/hol/goalState": None, "textDocument/completion": {"isIncomplete": True, "items": []}}
        return lambda p, cancel, mid: empty[method]

    def _doc_at(self, p):
        doc = self.s.docs.get(p["textDocument"]["uri"])
        if doc is None:
            return None, None, None
        script = doc.script()
        off, _ = script.lines.offset(p["position"], self.s.enc)
        return doc, script, off

    # ------------------------------------------------------------ goal state

    def goal_state(self, p, cancel, mid):
        with self.s.lock:
            doc, script, off = self._doc_at(p)
            if doc is None:
                return None
            if doc.refused:
                return {"status": "pending"}
            if doc.blocked is not None:
                return None
            if doc.running or not doc.preloaded:
                return {"status": "pending"}
            d = _proof_at(script, off)
            if d is None:
                return None
            settled = doc.complete and doc.base is not None and doc.base.text == script.text
            consts = {x.const for x in script.decls if x.const}
        with self.s.walk_lock:
            result = self._walk(script, d, off, cancel, consts)
        if cancel.is_set():
            raise Interrupted()
        result["status"] = "ok" if settled else "pending"
        self._walk_diag(doc, d, result)
        return result

    def _walk(self, script, d, off, cancel, consts):
        initial = fh_goals.normalise(script.text[d.stmt[0]:d.stmt[1]]) if d.kind == "theorem" else "T"
        body = d.body or (d.end, d.end)
        atoms = fh_goals.atoms(script.text, script.masked, body[0], body[1])
        unlimited = self.s.settings.walker_unlimited
        budget = None if unlimited else self.s.settings.walk_ms / 1000
        w = fh_goals.walk(initial, atoms, off, budget, cancel, consts, on_loop=self.s.hold)
        pretty, segments = ("", []) if w.timed_out else fh_goals.render(w.goals, consts)
        failed = script.lines.range(w.failed.start, w.failed.end, self.s.enc) if w.failed else None
        return {"theorem": d.pool_name, "step": w.step,
                "goals": [{"asms": list(a), "goal": g} for a, g in w.goals],
                "pretty": pretty, "context": [], "note": None, "status": "ok",
                "error": w.error, "failedRange": failed, "failedCloseRange": None,
                "segments": segments}

    def _walk_diag(self, doc, d, result):
        with self.s.lock:
            before = doc.walk_diags.get(d.pool_name)
            if result["failedRange"]:
                doc.walk_diags[d.pool_name] = {"range": result["failedRange"], "severity": 1,
                                               "message": result["error"]}
            else:
                doc.walk_diags.pop(d.pool_name, None)
            if doc.walk_diags.get(d.pool_name) != before and not doc.closed:
                self.s.compiler.publish(doc, doc.version)

    # ------------------------------------------------------------ hover / definition

    def _token(self, doc, script, off):
        if doc is None or doc.blocked is not None or doc.refused or off >= doc.frontier:
            return None
        for m in re.finditer(r"[A-Za-z0-9_'.]+", script.masked[max(0, off - 200):off + 200]):
            a = max(0, off - 200) + m.start()
            if a <= off < a + len(m.group(0)):
                word = m.group(0).strip(".")
                if word and not word[0].isdigit() and word not in fh_catalog.HOL_KEYWORDS:
                    return a, a + len(m.group(0)), word
        return None

    def hover(self, p, cancel, mid):
        with self.s.lock:
            doc, script, off = self._doc_at(p)
            tok = self._token(doc, script, off)
            if tok is None:
                return None
            a, b, word = tok
            parts = self._hover_parts(script, word)
        fence = "```"
        value = "\n\n---\n\n".join(f"{fence}\n{part}\n{fence}" for part in parts)
        return {"contents": {"kind": "markdown", "value": value},
                "range": script.lines.range(a, b, self.s.enc)}

    def _hover_parts(self, script, word):
        short = word.rsplit(".", 1)[-1]
        h = script.header()
        if h and word == h.name:
            return [f"Theory {word}"]
        for d in script.decls:
            if d.name == short and d.kind in ("theorem", "definition"):
                stmt = fh_goals.normalise(script.text[d.stmt[0]:d.stmt[1]]) if d.stmt else short
                return [f"val {short}: Thm.thm", f"⊢ {stmt}"]
        if short in fh_catalog.THEOREM_BY_NAME:
            return [f"val {short}: Thm.thm", fh_catalog.THEOREM_BY_NAME[short][3]]
        return [f"val {short}: {fh_catalog.SML_VALUES.get(short, chr(39) + 'a')}"]

    def definition(self, p, cancel, mid):
        with self.s.lock:
            doc, script, off = self._doc_at(p)
            tok = self._token(doc, script, off)
            if tok is None:
                return []
            a, b, word = tok
            origin = script.lines.range(a, b, self.s.enc)
            short = word.rsplit(".", 1)[-1]
            for d in script.decls:
                if d.kind in ("theorem", "definition") and short in (d.name, d.const):
                    return [{"targetUri": doc.uri, "targetRange": script.lines.range(d.start, d.end, self.s.enc),
                             "targetSelectionRange": script.lines.range(d.name_start, d.name_end, self.s.enc),
                             "originSelectionRange": origin}]
        thm = fh_catalog.THEOREM_BY_NAME.get(short)
        if thm is None:
            return []
        whole = {"start": {"line": thm[2], "character": 0}, "end": {"line": thm[2] + 1, "character": 0}}
        return [{"targetUri": self._hol_uri(thm[1]), "targetRange": whole,
                 "targetSelectionRange": whole, "originSelectionRange": origin}]

    def _hol_uri(self, theory):
        path = fh_catalog.HOL_SCRIPT_PATHS.get(theory, f"src/{theory}/{theory}Script.sml")
        return f"file://{self.s.holdir}/{path}"

    # ------------------------------------------------------------ symbols

    def document_symbol(self, p, cancel, mid):
        with self.s.lock:
            doc = self.s.docs.get(p["textDocument"]["uri"])
            if doc is None:
                return []
            script = doc.script()
        out = []
        for d in script.decls:
            sym = self._symbol(script, d)
            if sym:
                out.append(sym if self.s.hierarchical else self._flat(doc.uri, sym))
        return out[:2000]

    def _symbol(self, script, d):
        lines, enc = script.lines, self.s.enc
        if d.kind == "theory" and d.name:
            kind, detail, name = 2, "Theory", d.name
        elif d.kind in ("theorem", "resume", "definition"):
            kind, name = _SYMBOL_KIND.get(d.keyword, 14), d.name
            detail = d.keyword + (f" [{', '.join(d.attrs)}]" if d.attrs and d.kind != "resume" else "")
        elif d.kind == "block" and d.const:
            kind, detail, name = _SYMBOL_KIND.get(d.keyword, 12), d.keyword, d.name or d.const
        elif d.kind == "sml" and d.name:
            kind, detail, name = _SYMBOL_KIND.get(d.keyword, 13), None, d.name
        else:
            return None
        sym = {"name": name, "detail": detail, "kind": kind, "range": lines.range(d.start, d.end, enc),
               "selectionRange": lines.range(d.name_start, d.name_end, enc)}
        if detail is None:
            del sym["detail"]
        return sym

    def _flat(self, uri, sym):
        return {"name": sym["name"], "kind": sym["kind"], "location": {"uri": uri, "range": sym["range"]}}

    def workspace_symbol(self, p, cancel, mid):
        query = (p.get("query") or "").lower()
        if len(query) < 2:
            return []
        out = []
        with self.s.lock:
            for doc in self.s.docs.values():
                script = doc.script()
                for d in script.decls:
                    if d.kind in ("theorem", "definition") and d.name and query in d.name.lower():
                        line = script.lines.pos(d.start, self.s.enc)["line"]
                        out.append(_wsym(d.name, 12 if d.kind == "definition" else 14, "this file",
                                         doc.uri, line))
        local = {o["name"] for o in out}
        for name, theory, line, _, cls in fh_catalog.THEOREMS:
            if query in name.lower() and name not in local:
                out.append(_wsym(name, 12 if cls == "Def" else 14, f"{theory}Theory",
                                 self._hol_uri(theory), line))
        return out[:200]

    # ------------------------------------------------------------ completion

    def completion(self, p, cancel, mid):
        with self.s.lock:
            doc, script, off = self._doc_at(p)
            if doc is None:
                return {"isIncomplete": True, "items": []}
            line_start = script.lines.starts[script.lines.pos(off, "utf-8")["line"]]
            m = re.search(r"(?:([A-Za-z_][A-Za-z0-9_']*)\.)?([A-Za-z0-9_']*)$", script.text[line_start:off])
            qualifier, prefix = m.group(1), m.group(2)
            names = [d for d in script.decls if d.kind in ("theorem", "definition") and d.name]
            thy = script.header().name if script.header() else "this"
        if not prefix and not qualifier:
            return {"isIncomplete": True, "items": []}
        items = self._items(prefix.lower(), qualifier, off - len(prefix) == line_start, names, thy)
        return {"isIncomplete": len(items) > 200, "items": items[:200]}

    def _items(self, pre, qualifier, col0, names, thy):
        items = []
        only = qualifier[:-6] if qualifier and qualifier.endswith("Theory") else None
        if not qualifier:
            if col0:
                items += [{"label": k, "kind": 14, "sortText": "0" + k}
                          for k in fh_catalog.HOL_KEYWORDS if k.lower().startswith(pre)]
            items += [{"label": v, "kind": 6} for v in sorted(fh_catalog.SML_VALUES) if v.lower().startswith(pre)]
            items += [{"label": v, "kind": 9} for v in sorted(fh_catalog.STRUCTURES) if v.lower().startswith(pre)]
            items += [{"label": v, "kind": 22} for v in sorted(fh_catalog.TYPES) if v.lower().startswith(pre)]
            items += [{"label": d.name, "kind": 21, "detail": f"{thy}Theory"}
                      for d in names if d.name.lower().startswith(pre)]
        items += [{"label": n, "kind": 21, "detail": f"{t}Theory"} for n, t, _, _, _ in fh_catalog.THEOREMS
                  if n.lower().startswith(pre) and (only is None or t == only)]
        return items

    # ------------------------------------------------------------ eval

    def eval(self, p, cancel, mid):
        code, incr, holdep = p["code"], p.get("incr", 0), p.get("holdep", 1)
        if not isinstance(code, str) or incr not in (0, 1, 2):
            raise ValueError("bad params")
        if incr == 0:
            return self._eval_sync(p.get("uri"), code, holdep, cancel, mid)
        self.s.reply(mid, None)
        threading.Thread(target=self._eval_stream, args=(p.get("uri"), code, incr, holdep, cancel, mid),
                         daemon=True).start()
        return NO_REPLY

    def _holdep(self, uri, code, holdep, mid):
        if holdep:
            for module in fh_eval.load_deps(code):
                self.s.log(f'ignoring load error: Fail "Cannot find file {module}.ui"')
        if holdep != 2:
            return
        mods = sorted(set(re.findall(r"\b([A-Za-z0-9_]+(?:Theory|Lib))\b", code)))
        files = [f"{self.s.holdir}/sigobj/{m}.uo" for m in mods]
        self.s.notify("$/eval/holdep", {"uri": uri, "id": mid, "files": files})
        self.s.notify("$/eval/holdepCompleted", {"uri": uri, "id": mid})

    def _eval_sync(self, uri, code, holdep, cancel, mid):
        self._holdep(uri, code, holdep, mid)
        out = []
        for reports, _, _ in self._run_code(code, cancel):
            out += [r for r in reports if r["kind"] != "compileProgress"]
        return _merge(out)

    def _eval_stream(self, uri, code, incr, holdep, cancel, mid):
        self._holdep(uri, code, holdep, mid)
        lines = _code_lines(code)
        prev = 0
        for reports, a, b in self._run_code(code, cancel):
            if incr == 2:
                for r in reports:
                    self.s.notify("$/eval/1", {"id": mid, "out": r})
            elif a is not None:
                chunk = [r for r in reports if r["kind"] != "compileProgress"]
                self.s.notify("$/eval/P", {"id": mid, "pos": lines.range(prev, b, self.s.enc), "out": chunk})
                prev = b
            else:
                self.s.notify("$/eval/P", {"id": mid, "pos": lines.range(prev, len(code), self.s.enc),
                                           "out": [r for r in reports if r["kind"] == "interrupted"],
                                           "complete": True})
        if incr == 2 and not cancel.is_set():
            self.s.notify("$/eval/1", {"id": mid, "out": {"kind": "compileCompleted"}})

    def _own_theorems(self):
        """The open file's theory and theorems: in the server's session they carry the
        placeholder tag `lsp_deferred` (transcript inherited-cheat)."""
        for doc in list(self.s.docs.values()):
            text = doc.text
            theory = re.search(r"^Theory\s+([A-Za-z_][A-Za-z0-9_']*)", text, re.M)
            return (theory.group(1) if theory else "", fh_built.own_theorems(text))
        return ("", [])

    def _run_code(self, code, cancel):
        """Yield (reports, start, end) per declaration, then a final
        ([] or [interrupted], None, None)."""
        lines, env = _code_lines(code), {fh_eval.OWN: self._own_theorems()}
        for a, b in fh_eval.split_decls(code):
            text = code[a:b]
            if fh_eval.loops(text):
                cancel.wait()
            if cancel.is_set():
                yield [{"kind": "interrupted"}], None, None
                return
            reports = [{"kind": "compileProgress", "pos": lines.pos(a, self.s.enc)}]
            try:
                for kind, at, body in fh_eval.run(text, a, env):
                    reports.append({"kind": kind, "pos": lines.pos(at, self.s.enc), "body": body})
            except fh_eval.EvalError as err:
                reports += [{"kind": "error", "hard": e.hard, "pos": lines.range(e.start, e.end, self.s.enc),
                             "msg": e.msg} for e in err.reports()]
            reports.append({"kind": "compileProgress", "pos": lines.pos(b, self.s.enc)})
            yield reports, a, b
        yield [], None, None

    # ------------------------------------------------------------ search

    def search(self, p, cancel, mid):
        selectors = p.get("selectors")
        if selectors is None:
            selectors = _split_query(p.get("query") or "")
        limit = p.get("limit", 100)
        if not selectors or any(fh_eval.term_problem(s) for s in selectors if s[:1] not in "'\""):
            return []  # an unparsable pattern matches nothing, silently (docs/protocol.md#search)
        out = []
        for name, theory, line, stmt, cls in fh_catalog.THEOREMS:
            if all(_selects(s, name, theory, stmt) for s in selectors):
                out.append({"name": name, "theory": theory, "class": cls, "statement": stmt + "\n",
                            "uri": self._hol_uri(theory), "line": line + 1})
        return out[:limit]


def _proof_at(script, off):
    for d in script.decls:
        if d.kind == "theorem" and d.proof_kw is not None:
            last = d.qed if d.qed is not None else d.end
            if d.proof_kw <= off <= last:
                return d
        if d.kind == "resume" and d.body and d.body[0] - 1 <= off <= (d.qed if d.qed is not None else d.end):
            return d
    return None


def _wsym(name, kind, container, uri, line):
    pos = {"line": line, "character": 0}
    return {"name": name, "kind": kind, "containerName": container,
            "location": {"uri": uri, "range": {"start": pos, "end": pos}}}


def _merge(reports):
    """Merge consecutive output pieces of one kind at one position (docs/protocol.md#eval)."""
    out = []
    for r in reports:
        last = out[-1] if out else None
        if last and r["kind"] in ("compilerOut", "toplevelOut") and last["kind"] == r["kind"] \
                and last["pos"] == r["pos"]:
            last["body"] += r["body"]
        else:
            out.append(dict(r))
    return out


def _code_lines(code):
    from fh_script import Lines
    return Lines(code)


def _split_query(q):
    selectors = re.findall(r"'[^']*'|\"[^\"]*\"", q)
    rest = re.sub(r"'[^']*'|\"[^\"]*\"", " ", q).strip()
    return selectors + ([rest] if rest else [])


def _selects(sel, name, theory, stmt):
    if sel.startswith("'"):
        return sel.strip("'") == theory
    if sel.startswith('"'):
        return sel.strip('"').lower() in name.lower()
    return _matches(fh_eval.term_tokens(fh_eval.ascii_free(fh_goals.normalise(sel))), fh_eval.term_tokens(stmt))


def _matches(pattern, stmt):
    """Whether the pattern's tokens match a run of the statement's: a lowercase
    identifier is a variable and matches any one token, the same one each time."""
    for start in range(len(stmt) - len(pattern) + 1):
        bound = {}
        for p, t in zip(pattern, stmt[start:start + len(pattern)], strict=True):
            if fh_eval.is_variable(p):
                if bound.setdefault(p, t) != t:
                    break
            elif p != t:
                break
        else:
            return True
    return False
