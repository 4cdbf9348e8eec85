"""Every tunable of the daemon, in one frozen object built once at start: the settings table.

Values come from command-line flags, else `HOLSRV_*` environment variables,
else the config file (`$XDG_CONFIG_HOME/holsrv/config.toml`, keys named as
the fields), else defaults sized from the machine (`settingsources` reads
them).  Nothing else in the daemon reads the environment, so tests build a
`Settings` and pass it in.

Only the fields in USER and OPERATOR are settings someone sets; the rest
are constants, read from nowhere.  A user setting is one a person using
holctl, holmcp or an editor has a reason to choose for their machine or
their HOL: where HOL is, how much memory and how many servers, how long a
warm server is kept, how patient a trial or a runaway check is, how far
Holmake runs in parallel, whether goal states are asked ahead.  An operator
setting bounds the daemon for whoever runs it (as a service, or for several
clients): connections, frame bytes, jobs, the answer cache, when it exits
and how long it may take to stop.  A constant is a choice the code's
correctness or its tests depend on (quiet periods, ratios, internal waits,
protocol deadlines, encodings offered to HOL): tuning one is a change to
the code, so it is not offered as a knob, and a test that needs another
value passes it to the constructor.  Each constant was a setting once, so
naming one in the config file or the environment is a warning that it is
now fixed, never a refusal to start (`settingsources.gather`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from holsrv.config import executables, memorylimit, metricslisten
from holsrv.config.settingsources import ConfigError, config_path, env_names, gather, parse, show
from holsrv.errors import HolNotFound, SocketPathTooLong
from holsrv.rpc import paths

__all__ = ["CONSTANTS", "FIXED", "OPERATOR", "USER", "ConfigError", "Settings", "config_path", "env_names", "show"]

# The settings a user sets (docs/settings.md's first table), and those an
# operator sets (its second); every other field is a constant (CONSTANTS).
USER = frozenset({
    "socket", "hol_bin", "extra_path", "holmake_bin",
    "max_servers", "max_heap_mb", "memory_budget_mb", "start_footprint_mb", "soft_footprint_mb",
    "hard_footprint_pct",
    "idle_timeout_s", "letgo_s", "try_timeout_s", "max_try_candidates", "prefetch_per_pass",
    "holmake_jobs", "holmake_timeout_s",
    "verify_oracles", "verify_axioms",  # what counts as proved is the user's to say
})
OPERATOR = frozenset({
    "max_connections", "max_idle_per_peer", "frame_budget_mb", "cache_entries",
    "max_jobs", "job_keep_s", "idle_exit_s", "stop_timeout_s", "metrics_listen",
})
# The source a constant shows where settings are listed (`effective`), and
# where a client was given one (`differences`).
FIXED = "fixed"


def _total_memory_mb() -> int:
    """The box's memory: the machine's, or its cgroup's limit where lower (see `memorylimit`)."""
    return memorylimit.here().mb


def default_max_servers(total_mb: int) -> int:
    # A warm HOL server with proofs replayed commonly sits at 0.3-2 GB.
    return max(1, min(16, total_mb // 3072))


def default_memory_budget_mb(total_mb: int) -> int:
    # Room for the desktop, the editor and the agent besides the HOL fleet.
    return total_mb * 3 // 4


def _default_max_servers() -> int:
    return default_max_servers(_total_memory_mb())


def _default_memory_budget_mb() -> int:
    return default_memory_budget_mb(_total_memory_mb())


@dataclass(frozen=True)
class Settings:
    socket: Path = field(default_factory=paths.default_socket)
    # The `hol` executable; None means "find it when a server is first needed".
    hol_bin: str | None = None
    extra_path: tuple[str, ...] = ()
    max_servers: int = field(default_factory=_default_max_servers)
    # Poly/ML --maxheap for each server, MB; 0 means no cap.  The limit one
    # server may reach; what the budget counts is what servers use.
    max_heap_mb: int = 6144
    # Above this footprint (resident + swapped) a server is reported LARGE,
    # and, once idle with nothing checking, replaced by a fresh one.
    soft_footprint_mb: int = 4096
    # The whole fleet's memory, MB: each running server counts its measured
    # footprint, a new one what the last server started with its heap cap
    # measured (start_footprint_mb before any was).  0 means no budget.
    memory_budget_mb: int = field(default_factory=_default_memory_budget_mb)
    start_footprint_mb: int = 1024
    # Past this share of the budget (measured), idle servers are stopped,
    # least recently used first, before any call fails for room.
    memory_pressure_pct: int = 90
    idle_timeout_s: float = 1800.0
    # A file counts as settled once every proof of its census has a verdict
    # (`census`); at most this long after a new failure still on its name (HOL
    # moves it to its step a moment after the verdict); quiet_clean_s of quiet
    # where the census cannot be trusted.
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
    # A server that holds on to work past this is a runaway, replaced at once
    # (`runaway`): a goal-state walk not answered this long after it was
    # sent, another request this long after it was cancelled, a text sent to
    # an idle compile not started on this long after; and one whose footprint
    # passes hard_footprint_pct of its heap cap (0: no such limit).
    letgo_s: float = 10.0
    hard_footprint_pct: int = 125
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
    # A script with a live server is synced to it when written, once the
    # writes have paused this long (each write restarts the wait).
    sync_debounce_s: float = 0.05
    # Offered to HOL in this order.  HOL is byte-native and picks utf-8 when
    # offered (docs/protocol.md#position-encoding); tests offer only utf-16 to cover that path.
    position_encodings: tuple[str, ...] = ("utf-8", "utf-16")
    cache_entries: int = 4096
    # Proofs of one text whose failing step's goal state is asked for in the
    # background once its verdict settles, so the agent's next call is a hit; 0: none.
    prefetch_per_pass: int = 3
    # Clients of the daemon socket: connections open at once (over it, the
    # oldest idle one is closed to make room); deadlines for a new
    # connection's hello, for the rest of a frame once its first byte came,
    # and for a client to take one reply, after which it is dropped; bytes
    # of unfinished large frames held across all connections.
    max_connections: int = 256
    # Idle connections one client process may keep: past it, its own oldest
    # idle one makes room, so one process cannot fill the daemon with them.
    max_idle_per_peer: int = 16
    # A connection counts as idle for max_idle_per_peer only once it has waited
    # this long for its next request: between a reply and the next request, or
    # a welcome and the first, a busy client's connection is in use.
    idle_grace_s: float = 2.0
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
    # verify: the oracles (besides HOL's DISK_THM) and the axioms ("theory.name") a verified
    # theorem may rest on; `cheat` never.  Empty: none.
    verify_oracles: tuple[str, ...] = ()
    verify_axioms: tuple[str, ...] = ()
    max_try_candidates: int = 8
    try_timeout_s: float = 30.0
    trial_wait_s: float = 30.0
    # With no HOL server and no client connection for this long, the daemon
    # exits; 0 never.  Off unless set, except when a client started the daemon
    # on demand (holsrv.main: ON_DEMAND_IDLE_EXIT_S).
    idle_exit_s: float = 0.0
    # Replacing a server whose ancestors were rebuilt (holsrv/pool/replacement.py):
    # how long its successor may take to start and catch up before the
    # replacement is given up (and the agent told to restart); 0: never
    # replace in the background, only say so.
    replace_timeout_s: float = 900.0
    # Jobs (calls that outran their `defer_after`): how many the daemon holds
    # at once, running or finished, and how long a finished one's answer is
    # kept before it is forgotten.
    max_jobs: int = 16
    job_keep_s: float = 600.0
    # Where `/metrics` is served over HTTP (`metricslisten`): "" off, a loopback
    # HOST:PORT, a Unix socket path, or HOST:PORT! to listen beyond loopback.
    metrics_listen: str = ""
    # Where each value not from a default came from ("environment HOLSRV_X",
    # "flag --x"); filled by `from_env`.
    sources: dict[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)
    # What `from_env` found that has no effect (a constant named), one sentence each.
    warnings: tuple[str, ...] = field(default=(), compare=False, hash=False, repr=False)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, config_file: Path | None = None,
                 **overrides) -> Settings:
        """Defaults, then the config file (`config_file`, default `config_path(environ)`),
        then environment variables (`HOLSRV_<FIELD>`, then the other names in
        OTHER_NAMES), then non-None `overrides` (the daemon's flags).  Only USER
        and OPERATOR settings are read; each constant named is one of `warnings`.

        A bad config file or value raises `ConfigError`, saying where."""
        env = os.environ if environ is None else environ
        read = {name: _TYPES[name] for name in USER | OPERATOR}
        values, sources, warnings = gather(read, env, config_file or config_path(env), overrides, _FIXED_VALUES)
        try:
            metricslisten.parse(values.get("metrics_listen", ""))
        except ValueError as err:
            raise ConfigError(f"{err} (from {sources.get('metrics_listen', 'the settings')})") from None
        if values.get("socket"):
            try:
                paths.checked_socket(Path(values["socket"]))
            except SocketPathTooLong as err:
                raise ConfigError(f"{err} (from {sources.get('socket', 'the settings')})") from None
        return cls(**values, sources=sources, warnings=tuple(warnings))

    def effective(self) -> list[tuple[str, str, str]]:
        """(environment name, value, where it came from) for every setting and
        constant, for status and `holctl config`: a constant's source is FIXED
        at its value, else "set" (by whoever built this object, as tests do);
        a setting's is "default" only at its default."""
        return [(env_names(f.name)[0], show(getattr(self, f.name)), self._source(f))
                for f in dataclasses.fields(self) if f.name in _NAMED]

    def _source(self, f: dataclasses.Field) -> str:
        if f.name in self.sources:
            return self.sources[f.name]
        default = f.default_factory() if callable(f.default_factory) else f.default
        if getattr(self, f.name) != default:
            return "set"
        return FIXED if f.name in CONSTANTS else "default"

    def differences(self, given: Mapping[str, str]) -> list[tuple[str, str, str, str]]:
        """The settings a client was given (environment names and values) that this
        daemon does not have: (name given, value given, the daemon's value, its source).

        A constant given another value than this daemon's has FIXED for its
        source: no daemon reads it, so restarting one would not apply it."""
        found = []
        for name, raw in given.items():
            setting = _BY_ENV_NAME.get(name)
            if setting is None or setting == "socket" or not raw:
                continue  # the socket picks the daemon, so it always agrees
            try:
                wanted = parse(_TYPES, setting, raw)
            except ValueError:
                wanted = raw
            ours = getattr(self, setting)
            if setting == "hol_bin":
                ours = self._resolved_hol()
                wanted = os.path.realpath(str(wanted))
            if wanted != ours:
                source = FIXED if setting in CONSTANTS else self.sources.get(setting, "default")
                found.append((name, raw, show(ours), source))
        return found

    def budget_source(self) -> str:
        """Where `memory_budget_mb` came from, for status: a setting, or the default's share of the box."""
        box = memorylimit.here()
        if "memory_budget_mb" in self.sources:
            return self.sources["memory_budget_mb"]
        if self.memory_budget_mb != default_memory_budget_mb(box.mb):
            return "set"
        return f"default: 75% of {box.source} ({box.mb} MB)"

    def _resolved_hol(self) -> str | None:
        try:
            return os.path.realpath(self.hol_command())
        except HolNotFound:
            return None

    def hol_command(self, environ: dict[str, str] | None = None) -> str:
        """The `hol` executable: hol_bin / $HOL_BIN, else $HOLDIR/bin/hol, else `hol` on PATH."""
        return executables.hol_command(self.hol_bin, self.extra_path, environ)

    def holmake_command(self, environ: dict[str, str] | None = None) -> str:
        """Holmake of the same HOL as the servers: holmake_bin, else beside `hol`, else $HOLDIR/bin, else PATH."""
        return executables.holmake_command(self.holmake_bin, self.hol_bin, self.extra_path, environ)


_NAMED = [f.name for f in dataclasses.fields(Settings) if f.name not in ("sources", "warnings")]
CONSTANTS = frozenset(_NAMED) - USER - OPERATOR
_TYPES = {f.name: f.type for f in dataclasses.fields(Settings) if f.name in _NAMED}
TYPES = _TYPES  # for project files (`projects`), which read a few settings the same way
_BY_ENV_NAME = {name: setting for setting in _NAMED for name in env_names(setting)}
# The constants' values: a constant has a plain default, never one sized from the machine.
_FIXED_VALUES = {f.name: f.default for f in dataclasses.fields(Settings) if f.name in CONSTANTS}
