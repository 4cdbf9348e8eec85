"""LSP base-protocol framing as the real `hol lsp` does it: a strict
`Content-Length: N\\r\\n` reader and a writer that emits raw UTF-8 with
control characters escaped in uppercase hex."""

import json
import os
import re
import sys
import threading
import time

_LENGTH_RE = re.compile(rb"Content-Length: (\d+)\r\n")
# json.dumps escapes control characters as \u00xx in lowercase; HOL's
# writer uses uppercase, so rewrite them (only where the backslash is real).
_CTRL_RE = re.compile(r"((?:^|[^\\])(?:\\\\)*)\\u00([0-9a-f]{2})")


class FramingError(Exception):
    pass


def read_message(stream):
    """Read one frame; None at end of input.  Raises FramingError on a
    header the real server would choke on."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if not line.endswith(b"\r\n"):
            raise FramingError(f"header line without CRLF: {line!r}")
        if line == b"\r\n":
            break
        if line.startswith(b"Content-Length"):
            m = _LENGTH_RE.fullmatch(line)
            if not m:
                raise FramingError(f"malformed header: {line!r}")
            length = int(m.group(1))
    if length is None:
        raise FramingError("header without Content-Length")
    body = stream.read(length)
    if len(body) < length:
        return None
    return body


def encode(msg):
    text = json.dumps(msg, ensure_ascii=False, separators=(",", ":"))
    text = _CTRL_RE.sub(lambda m: m.group(1) + "\\u00" + m.group(2).upper(), text)
    return text.encode("utf-8", "replace")


class Writer:
    """Serialises every outgoing message; optionally logs both directions."""

    def __init__(self, out, log_path=None):
        self.out = out
        self.lock = threading.Lock()
        self.log_lock = threading.Lock()
        self.log_path = log_path
        self.t0 = time.monotonic()
        self.muted = False
        self.broken_ids = set()

    def send(self, msg):
        with self.lock:
            if self.muted:
                return
            if "id" in msg and "method" not in msg and msg["id"] in self.broken_ids:
                self._raw(b"Content-Length: xyz\r\n\r\n")
                return
            body = encode(msg)
            # Logged before it is written: a client that has read it finds it in the log.
            self.log("S->C", msg)
            self._raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def broken_frame(self):
        with self.lock:
            self._raw(b"Content-Length: xyz\r\n\r\n")

    def _raw(self, data):
        try:
            self.out.write(data)
            self.out.flush()
        except (BrokenPipeError, ValueError, OSError):
            # The client is gone; the reader will see EOF and exit.
            pass

    def log(self, direction, msg):
        if not self.log_path:
            return
        line = json.dumps({"t": round(time.monotonic() - self.t0, 6), "dir": direction, "msg": msg},
                          ensure_ascii=False)
        with self.log_lock, open(self.log_path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def stderr(line):
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def hard_exit(status):
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os._exit(status)
