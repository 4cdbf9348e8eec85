"""Every tunable of the daemon, in one frozen object built once at start.

Values come from command-line flags, else `HOLSRV_*` environment variables,
else the config file (`$XDG_CONFIG_HOME/holsrv/config.toml`, keys named as
the fields), else defaults sized from the machine.  Nothing else in the daemon reads the
environment, so tests build a `Settings` and pass it in.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import math
import os
import re
import shutil
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from holsrv.errors import HolNotFound
from holsrv.rpc import paths

ENV_PREFIX = "HOLSRV_"
# Other environment names for a setting, after its own HOLSRV_ name: an old
# name kept working after a rename, and the names the reference tool (the
# in-process MCP server holmcp re-homes) reads, so its users' setups carry over.
OTHER_NAMES = {
    "lookup_wait_s": ("HOLSRV_DIAGNOSTICS_WAIT_S",),
    "hol_bin": ("HOL_BIN",),
    "extra_path": ("HOL_LSP_EXTRA_PATH",),
    "max_servers": ("HOL_LSP_MCP_MAX_SERVERS",),
}


def _total_memory_mb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError):
        return 8192


def _default_max_servers() -> int:
    # A warm HOL server with proofs replayed commonly sits at 0.3-2 GB; keep
    # room for the heaviest of them to reach their cap without swapping.
    return max(1, min(16, _total_memory_mb() // 3072))


def _default_memory_budget_mb() -> int:
    # Room for the desktop, the editor and the agent besides the HOL fleet.
    return _total_memory_mb() * 3 // 4


@dataclass(frozen=True)
class Settings:
    socket: Path = field(default_factory=paths.default_socket)
    # The `hol` executable; None means "find it when a server is first needed".
    hol_bin: str | None = None
    extra_path: tuple[str, ...] = ()
    max_servers: int = field(default_factory=_default_max_servers)
    # Poly/ML --maxheap for each server, MB; 0 means no cap.
    max_heap_mb: int = 6144
    # Above this footprint (resident + swapped) a server is reported LARGE.
    soft_footprint_mb: int = 4096
    # The whole fleet's memory, MB: the sum over servers of the heap cap (the
    # soft footprint for one without a cap), or the footprint when larger.
    # 0 means no budget.
    memory_budget_mb: int = field(default_factory=_default_memory_budget_mb)
    idle_timeout_s: float = 1800.0
    # A file counts as settled once the server has been quiet this long after
    # a failure (HOL moves a failure's diagnostic to its step a moment after
    # the verdict), or quiet_clean_s when no proof failed or was suspended.
    quiet_s: float = 1.0
    quiet_clean_s: float = 0.2
    # How long a lookup, a retry or a restart waits for the compile to reach
    # what it needs (diagnostics has its own `wait`), and, separately, for
    # the file's server to start.
    lookup_wait_s: float = 25.0
    start_wait_s: float = 25.0
    # A compile HOL has been silent about for this long is reported as stuck.
    compile_silence_s: float = 120.0
    # A proof checking for slow_ratio times the slowest finished proof of its
    # file, and at least slow_after_s, is reported as far slower than the rest.
    slow_after_s: float = 10.0
    slow_ratio: float = 50.0
    looping_after_s: float = 180.0
    looping_ratio: float = 10.0
    looping_min_s: float = 60.0
    start_timeout_s: float = 180.0
    request_timeout_s: float = 60.0
    stop_timeout_s: float = 10.0
    memory_sample_s: float = 5.0
    restart_backoff_s: float = 2.0
    restart_backoff_max_s: float = 60.0
    stderr_tail_lines: int = 200
    # How long an edit that spills from one proof into the next waits for HOL
    # to start acting on its interim text (HOL debounces edits by 300 ms).
    spill_wait_s: float = 3.0
    # Offered to HOL in this order.  HOL is byte-native and picks utf-8 when
    # offered (PROTOCOL.md §4.4); tests offer only utf-16 to cover that path.
    position_encodings: tuple[str, ...] = ("utf-8", "utf-16")
    cache_entries: int = 4096
    # Clients of the daemon socket: connections open at once (over it, the
    # oldest idle one is closed to make room); deadlines for a new
    # connection's hello, for the rest of a frame once its first byte came,
    # and for a client to take one reply, after which it is dropped; bytes
    # of unfinished large frames held across all connections.
    max_connections: int = 256
    # Idle connections one client process may keep: past it, its own oldest
    # idle one makes room, so one process cannot fill the daemon with them.
    max_idle_per_peer: int = 16
    hello_timeout_s: float = 10.0
    frame_timeout_s: float = 10.0
    send_timeout_s: float = 10.0
    frame_budget_mb: int = 64
    # Holmake: the executable (None: beside `hol`, else $HOLDIR/bin,
    # else PATH), how long one run may take before its process group is
    # killed, its -j (0: Holmake's own default), and lines of log kept.
    holmake_bin: str | None = None
    holmake_timeout_s: float = 1800.0
    holmake_jobs: int = 0
    holmake_tail_lines: int = 40
    # Trials (`try`): candidates per call, each one's default time limit, and
    # how long another call on the file waits for a running trial to end.
    max_try_candidates: int = 8
    try_timeout_s: float = 30.0
    trial_wait_s: float = 30.0
    # With no HOL server and no client connection for this long, the daemon
    # exits; 0 never.  Off unless set, except when a client started the daemon
    # on demand (holsrv.main: ON_DEMAND_IDLE_EXIT_S).
    idle_exit_s: float = 0.0
    # Replacing a server whose ancestors were rebuilt (holsrv/replacement.py):
    # how long its successor may take to start and catch up before the
    # replacement is given up (and the agent told to restart); 0: never
    # replace in the background, only say so.
    replace_timeout_s: float = 900.0
    # Where each value not from a default came from ("environment HOLSRV_X",
    # "flag --x"); filled by `from_env`.
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, config_file: Path | None = None,
                 **overrides) -> Settings:
        """Defaults, then the config file (`config_file`, default `config_path(environ)`),
        then environment variables (`HOLSRV_<FIELD>`, then the other names in
        OTHER_NAMES), then non-None `overrides` (the daemon's flags).

        A bad config file or value raises `ConfigError`, saying where."""
        env = os.environ if environ is None else environ
        values: dict = {}
        sources: dict[str, str] = {}
        config_file = config_file or config_path(env)
        if config_file is not None and config_file.is_file():
            for name, value in read_config(config_file).items():
                values[name], sources[name] = value, f"config file {config_file}"
        for f in dataclasses.fields(cls):
            for name in env_names(f.name):
                raw = env.get(name)
                if raw:
                    try:
                        values[f.name] = _parse(f.name, raw)
                    except ValueError as err:
                        raise ConfigError(f"{name}={raw!r} in the environment: {err}; "
                                          "fix or unset it, then start the daemon again") from None
                    sources[f.name] = f"environment {name}"
                    break
        for name, value in overrides.items():
            if value is not None:
                values[name], sources[name] = value, f"flag {_FLAGS.get(name, '--' + name.replace('_', '-'))}"
        return cls(**values, sources=sources)

    def effective(self) -> list[tuple[str, str, str]]:
        """(environment name, value, where it came from) for every setting, for status."""
        return [
            (env_names(f.name)[0], _show(getattr(self, f.name)), self.sources.get(f.name, "default"))
            for f in dataclasses.fields(self) if f.name != "sources"
        ]

    def differences(self, given: Mapping[str, str]) -> list[tuple[str, str, str, str]]:
        """The settings a client was given (environment names and values) that this
        daemon does not have: (name given, value given, the daemon's value, its source)."""
        found = []
        for name, raw in given.items():
            setting = _BY_ENV_NAME.get(name)
            if setting is None or setting == "socket" or not raw:
                continue  # the socket picks the daemon, so it always agrees
            try:
                wanted = _parse(setting, raw)
            except ValueError:
                wanted = raw
            ours = getattr(self, setting)
            if setting == "hol_bin":
                ours = self._resolved_hol()
                wanted = os.path.realpath(str(wanted))
            if wanted != ours:
                found.append((name, raw, _show(ours), self.sources.get(setting, "default")))
        return found

    def _resolved_hol(self) -> str | None:
        try:
            return os.path.realpath(self.hol_command())
        except HolNotFound:
            return None

    def hol_command(self, environ: dict[str, str] | None = None) -> str:
        """The `hol` executable: hol_bin / $HOL_BIN, else $HOLDIR/bin/hol, else `hol` on PATH."""
        env = os.environ if environ is None else environ
        tried = []
        for candidate in (self.hol_bin, env.get("HOL_BIN")):
            if candidate:
                if os.access(candidate, os.X_OK) and Path(candidate).is_file():
                    return candidate
                tried.append(f"HOL_BIN={candidate} (not an executable file)")
        holdir = env.get("HOLDIR")
        if holdir:
            candidate = str(Path(holdir) / "bin" / "hol")
            if os.access(candidate, os.X_OK):
                return candidate
            tried.append(f"HOLDIR={holdir} (no executable bin/hol there)")
        search = os.pathsep.join([*self.extra_path, env.get("PATH", "")])
        found = shutil.which("hol", path=search)
        if found:
            return found
        tried.append("`hol` on PATH (not found)")
        raise HolNotFound(
            "cannot find HOL4: tried " + "; ".join(tried) + ". Set HOL_BIN to the `hol` "
            "executable, or HOLDIR to the HOL4 tree, or put HOL's bin/ on PATH, then restart "
            "the daemon (holctl shutdown)."
        )


    def holmake_command(self, environ: dict[str, str] | None = None) -> str:
        """Holmake of the same HOL as the servers: holmake_bin, else beside `hol`, else $HOLDIR/bin, else PATH."""
        env = os.environ if environ is None else environ
        if self.holmake_bin:
            if os.access(self.holmake_bin, os.X_OK) and Path(self.holmake_bin).is_file():
                return self.holmake_bin
            raise HolNotFound(f"HOLSRV_HOLMAKE_BIN={self.holmake_bin} is not an executable file: fix or unset it")
        candidates = []
        with contextlib.suppress(HolNotFound):
            hol = self.hol_command(environ)
            candidates += [Path(hol).parent / "Holmake", Path(os.path.realpath(hol)).parent / "Holmake"]
        if env.get("HOLDIR"):
            candidates.append(Path(env["HOLDIR"]) / "bin" / "Holmake")
        for candidate in candidates:
            if os.access(candidate, os.X_OK) and candidate.is_file():
                return str(candidate)
        found = shutil.which("Holmake", path=os.pathsep.join([*self.extra_path, env.get("PATH", "")]))
        if found:
            return found
        raise HolNotFound(
            "cannot find Holmake: looked beside the `hol` the servers use, in $HOLDIR/bin and on PATH. "
            "Set HOLSRV_HOLMAKE_BIN (or HOLDIR) and restart the daemon (holctl shutdown)."
        )


_TYPES = {f.name: f.type for f in dataclasses.fields(Settings)}
# holsrv's flags not named like their setting
_FLAGS = {"hol_bin": "--hol", "idle_timeout_s": "--idle-timeout", "idle_exit_s": "--idle-exit"}


def env_names(setting: str) -> tuple[str, ...]:
    """The environment names a setting is read from, in order of precedence."""
    return (ENV_PREFIX + setting.upper(), *OTHER_NAMES.get(setting, ()))


_BY_ENV_NAME = {name: f.name for f in dataclasses.fields(Settings) if f.name != "sources" for name in env_names(f.name)}


def _show(value: object) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return "" if value is None else str(value)


def _parse(name: str, raw: str):
    kind = _TYPES[name]
    if name == "socket":
        return Path(raw)
    if name == "extra_path":
        return tuple(p for p in raw.split(os.pathsep) if p)
    if name == "position_encodings":
        return tuple(p.strip() for p in raw.split(",") if p.strip())
    if kind in ("int",):
        return int(raw)
    if kind in ("float",):
        return float(raw)
    return raw


# -- the config file -----------------------------------------------------------

CONFIG_NAME = "config.toml"
_NUMBERS = {"int": (int,), "float": (int, float)}


class ConfigError(ValueError):
    """A config file or environment value the daemon will not start with; says where and why."""


def config_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """`$XDG_CONFIG_HOME/holsrv/config.toml` (else under `$HOME/.config`); None with neither set."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or (str(Path(env["HOME"]) / ".config") if env.get("HOME") else "")
    return Path(base) / "holsrv" / CONFIG_NAME if base else None


def read_config(path: Path) -> dict:
    """The settings `path` sets, checked: an unknown key or a bad value raises
    `ConfigError` naming the key, the file and its line."""
    try:
        text = path.read_text(encoding="utf-8")
        table = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read the config file {path}: {err}") from None
    except tomllib.TOMLDecodeError as err:  # its message names the line and column
        raise ConfigError(f"{path} is not valid TOML: {err}; fix it or move it away") from None
    values = {}
    for key, raw in table.items():
        where = f"{path}, line {_key_line(text, key)}"
        if key not in _TYPES or key == "sources":
            known = [f for f in _TYPES if f != "sources"]
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"unknown setting {key!r} in {where}; {hint}the settings are: {', '.join(known)}")
        try:
            values[key] = _from_toml(key, raw)
        except ValueError as err:
            raise ConfigError(f"bad value for {key!r} in {where}: {err}") from None
    return values


def _key_line(text: str, key: str) -> int | str:
    """The line where `key` is set (tomllib does not say): `key =`, a quoted key,
    a dotted key or a `[key]` table header."""
    name = rf"(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')"
    pattern = re.compile(rf"^\s*(?:{name}\s*[=.]|\[+\s*{name}\s*[\].])")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return number
    return "?"


def _from_toml(key: str, raw: object):
    """A TOML value as the setting's type; ValueError saying what was expected."""
    kind = _TYPES[key]
    if key in ("extra_path", "position_encodings"):
        if isinstance(raw, str):
            return _parse(key, raw)
        if isinstance(raw, list) and all(isinstance(item, str) for item in raw):
            return tuple(raw)
        raise ValueError(f"expected a list of strings, got {raw!r}")
    if kind in _NUMBERS:
        if isinstance(raw, bool) or not isinstance(raw, _NUMBERS[kind]):
            raise ValueError(f"expected {'an integer' if kind == 'int' else 'a number'}, got {raw!r}")
        if not math.isfinite(raw) or raw < 0:
            raise ValueError(f"expected a finite number of 0 or more, got {raw!r}")
        return float(raw) if kind == "float" else raw
    if not isinstance(raw, str) or not raw:
        raise ValueError(f"expected a non-empty string, got {raw!r}")
    if key == "socket":
        return Path(raw).expanduser()
    return os.path.expanduser(raw) if key == "hol_bin" else raw
