"""Replay the client side of a recorded real session against the fake and
reduce both server sides to comparable sequences."""

import json
import os
import subprocess
import sys

from .lsp_client import Client

HOLMAKE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "Holmake")
# A recording names the files of its directory but gives only the texts it
# opened; the others get a small theory the fake Holmake can build.
_PLACEHOLDER = "Theory {name}\n\nDefinition double_def:\n  double n = n + n\nEnd\n"

_NOISE = {"$/compileProgress"}
_VERDICTS = {"proved", "failed", "suspended", "diverged"}


def find_transcripts():
    """The shared transcript directory, searched upwards from here."""
    here = os.path.dirname(os.path.abspath(__file__))
    for _ in range(6):
        cand = os.path.join(here, "shared", "hol-lsp", "transcripts")
        if os.path.isdir(cand):
            return cand
        here = os.path.dirname(here)
    return os.environ.get("HOL_LSP_TRANSCRIPTS", "")


def load(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def recorded_dir(records):
    """The script directory of the recording (its meta line's cwd)."""
    return next(r["msg"]["cwd"] for r in records if r["dir"] == "meta" and "cwd" in r["msg"])


def rewrite(obj, old_dir, new_dir):
    return json.loads(json.dumps(obj).replace(old_dir, new_dir))


def replay(records, workdir, env=None):
    """Run the fake with the recorded argv; send each recorded client
    message once the fake has produced the anchors the real server had
    produced before it.  A recording of several server runs starts a fake
    for each, and a `ran Holmake` meta line runs the fake Holmake in the
    directory at that point.  Returns (expected, received) server messages."""
    old_dir = recorded_dir(records)
    _write_files(records, workdir, old_dir)
    client = None
    expected, received = [], []
    try:
        for kind, what, answers in _steps(records):
            if kind == "server":
                received += _end(client)
                client = Client(tuple(what[1:]), cwd=workdir, env=env)
            elif kind == "holmake":
                _holmake(what[1:], workdir)
            else:
                msg = rewrite(what, old_dir, workdir)
                client.send({k: v for k, v in msg.items() if k != "jsonrpc"})
                expected += [rewrite(a, old_dir, workdir) for a in answers]
                received += _await_anchors(client, _anchor_count(expected) - _anchor_count(received))
        received += _end(client)
    finally:
        if client is not None:
            client.close()
    return expected, received


def _end(client):
    """What a server run sent after its last anchor, once it has exited."""
    if client is None:
        return []
    rest = client.quiet_for(0.3)
    client.proc.wait(5)
    client.close()
    return rest


def _steps(records):
    """("server", argv, []), ("holmake", argv, []) and ("send", message, its answers), in order."""
    out = []
    for r in records:
        msg = r["msg"]
        if r["dir"] == "meta" and "argv" in msg and "event" not in msg:
            out.append(("server", msg["argv"], []))
        elif r["dir"] == "meta" and msg.get("event") == "ran Holmake":
            out.append(("holmake", msg["argv"], []))
        elif r["dir"] == "C->S":
            out.append(("send", msg, []))
        elif r["dir"] == "S->C" and out and out[-1][0] == "send":
            out[-1][2].append(msg)
    return out


def _write_files(records, workdir, old_dir):
    """The files a meta line says the directory held: the text the recording
    opened, else a placeholder theory."""
    names = [n for r in records if r["dir"] == "meta" for n in r["msg"].get("files", ())]
    opened = {}
    for r in records:
        if r["dir"] == "C->S" and r["msg"].get("method") == "textDocument/didOpen":
            doc = r["msg"]["params"]["textDocument"]
            opened.setdefault(doc["uri"].rsplit("/", 1)[-1], doc["text"])
    for name in names:
        text = opened.get(name, _PLACEHOLDER.format(name=name.removesuffix("Script.sml")))
        with open(os.path.join(workdir, name), "w", encoding="utf-8") as f:
            f.write(text.replace(old_dir, workdir))


def _holmake(args, workdir):
    """Run the fake Holmake where the recording ran the real one (bounded)."""
    done = subprocess.run([sys.executable, HOLMAKE, *args], cwd=workdir, capture_output=True, timeout=60)
    assert done.returncode == 0, (done.stdout + done.stderr).decode("utf-8", "replace")


def _anchor_count(msgs):
    return sum(1 for m in msgs if _is_anchor(m))


def _is_anchor(m):
    if "method" not in m:
        return True
    if m["method"] in ("$/compileCompleted", "$/compileBlocked"):
        return True
    return m["method"] == "$/proofStates" and len(m["params"]["states"]) == 1 \
        and m["params"]["states"][0]["status"] in _VERDICTS


def _await_anchors(client, need):
    """Wait for `need` more anchors (responses, terminal notifications,
    verdicts); anchors that already arrived early count as a surplus."""
    got = []
    while _anchor_count(got) < need:
        got += client.until(_is_anchor)
    return got + client.quiet_for(0.05)


def shape(x):
    if isinstance(x, dict):
        return {k: shape(v) for k, v in sorted(x.items())}
    if isinstance(x, list):
        return [shape(x[0])] if x else []
    return type(x).__name__


def reduce(msgs):
    """(sequence, verdicts): the sequence drops $/compileProgress, progress
    reports and single-proof verdicts (they arrive in completion order) and
    collapses runs of publishDiagnostics to the last one; verdicts are
    returned separately as a sorted list."""
    seq, verdicts = [], []
    for m in msgs:
        method = m.get("method")
        if method in _NOISE or (method == "$/progress" and m["params"]["value"]["kind"] == "report"):
            continue
        if method == "$/proofStates" and len(m["params"]["states"]) == 1 \
                and m["params"]["states"][0]["status"] in _VERDICTS:
            s = m["params"]["states"][0]
            verdicts.append((s["name"], s["status"], s.get("detail")))
            continue
        if method == "$/eval/1" and seq and seq[-1][0] == "$/eval/1" \
                and m["params"]["out"]["kind"] == "compileProgress":
            continue
        key = method or ("error" if "error" in m else "result")
        item = (key, shape(m.get("params", m.get("result", m.get("error")))))
        if key == "textDocument/publishDiagnostics" and seq and seq[-1][0] == key:
            seq[-1] = item
            continue
        seq.append(item)
    return seq, sorted(verdicts, key=repr)


def final_diagnostics(msgs):
    """The last publishDiagnostics (its whole params: uri, version and the
    complete set), or None."""
    last = [m for m in msgs if m.get("method") == "textDocument/publishDiagnostics"]
    return last[-1]["params"] if last else None


_EXACT_METHODS = ("$/compileCompleted", "$/compileBlocked", "window/showMessage")
_EXACT_REQUESTS = ("textDocument/documentSymbol", "textDocument/references", "$/eval")


def exact_parts(records, msgs, workdir):
    """Messages whose content (not just shape) must match: terminal
    notifications, multi-proof batches, and answers to parse-driven
    requests (symbols, references, eval)."""
    ids = {r["msg"]["id"] for r in records if r["dir"] == "C->S"
           and r["msg"].get("method") in _EXACT_REQUESTS}
    out = []
    for m in msgs:
        method = m.get("method")
        if method in _EXACT_METHODS or (method == "$/proofStates" and len(m["params"]["states"]) > 1):
            out.append((method, m["params"]))
        elif method is None and m.get("id") in ids:
            out.append((m["id"], m.get("result", m.get("error"))))
    return out
