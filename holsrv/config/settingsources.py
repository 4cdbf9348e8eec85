"""Where a setting's value comes from: flags, `HOLSRV_*` environment variables
and the config file (`$XDG_CONFIG_HOME/holsrv/config.toml`), each read and
checked against the setting's type.

Knows the settings only as a table of names to type names (`Types`), so it
sits below `settings`, which owns the table.  Only the settings a user or an
operator sets are read; a constant (`fixed`: its name and value) named in the
config file or the environment is a warning, not an error: each was a setting
once, and a config file that names one must keep the daemon starting.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV_PREFIX = "HOLSRV_"
# Settings that are lists, given in the environment separated by commas.
_COMMA_LISTS = ("position_encodings", "verify_oracles", "verify_axioms")
# Other environment names for a setting, after its own HOLSRV_ name: an old
# name of what is now a constant (warned of as the constant is), and the names
# the reference tool (the in-process MCP server holmcp re-homes) reads, so its
# users' setups carry over.
OTHER_NAMES = {
    "lookup_wait_s": ("HOLSRV_DIAGNOSTICS_WAIT_S",),
    "hol_bin": ("HOL_BIN",),
    "extra_path": ("HOL_LSP_EXTRA_PATH",),
    "max_servers": ("HOL_LSP_MCP_MAX_SERVERS",),
}
# holsrv's flags not named like their setting
_FLAGS = {"hol_bin": "--hol", "idle_timeout_s": "--idle-timeout", "idle_exit_s": "--idle-exit"}
CONFIG_NAME = "config.toml"
_NUMBERS = {"int": (int,), "float": (int, float)}

# A setting's name to its type as the dataclass spells it ("int", "float", "Path", ...).
Types = Mapping[str, Any]


class ConfigError(ValueError):
    """A config file or environment value the daemon will not start with; says where and why."""


def env_names(setting: str) -> tuple[str, ...]:
    """The environment names a setting is read from, in order of precedence."""
    return (ENV_PREFIX + setting.upper(), *OTHER_NAMES.get(setting, ()))


def gather(types: Types, env: Mapping[str, str], config_file: Path | None,
           overrides: Mapping[str, object], fixed: Mapping[str, object] | None = None,
           ) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(values, where each came from, warnings): the config file, then the
    environment, then non-None `overrides`; `types` are the settings read, and
    a constant of `fixed` named in the file or the environment is a warning.

    A bad config file or value raises `ConfigError`, saying where."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    warnings: list[str] = []
    fixed = fixed or {}
    if config_file is not None and config_file.is_file():
        found, warnings = read_config(config_file, types, fixed)
        for name, value in found.items():
            values[name], sources[name] = value, f"config file {config_file}"
    for setting in types:
        got = _from_env(types, setting, env)
        if got is not None:
            values[setting], sources[setting] = got
    warnings += [fixed_warning(name, setting, fixed[setting], "the environment")
                 for setting in fixed for name in env_names(setting) if env.get(name)]
    for name, value in overrides.items():
        if value is not None:
            values[name], sources[name] = value, f"flag {_FLAGS.get(name, '--' + name.replace('_', '-'))}"
    return values, sources, warnings


def fixed_warning(name: str, setting: str, value: object, where: str) -> str:
    """Why a constant named in `where` has no effect, and what to do."""
    return (f"{name} in {where} has no effect: {setting} is no longer a setting but a constant, fixed at "
            f"{show(value)} (docs/settings.md lists the constants); remove it")


def _from_env(types: Types, setting: str, env: Mapping[str, str]) -> tuple[Any, str] | None:
    """The setting's value from its first environment name that is set, and that name's source."""
    for name in env_names(setting):
        raw = env.get(name)
        if raw:
            try:
                return parse(types, setting, raw), f"environment {name}"
            except ValueError as err:
                raise ConfigError(f"{name}={raw!r} in the environment: {err}; "
                                  "fix or unset it, then start the daemon again") from None
    return None


def show(value: object) -> str:
    """A setting's value as its environment variable would spell it."""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    return "" if value is None else str(value)


def parse(types: Types, name: str, raw: str) -> Any:
    """A setting's value from the text of an environment variable; ValueError if it is not one."""
    kind = types[name]
    if name == "socket":
        return Path(raw)
    if name == "extra_path":
        return tuple(p for p in raw.split(os.pathsep) if p)
    if name in _COMMA_LISTS:
        return tuple(p.strip() for p in raw.split(",") if p.strip())
    if kind in ("int",):
        return int(raw)
    if kind in ("float",):
        return float(raw)
    return raw


# -- the config file -----------------------------------------------------------


def config_path(environ: Mapping[str, str] | None = None) -> Path | None:
    """`$XDG_CONFIG_HOME/holsrv/config.toml` (else under `$HOME/.config`); None with neither set."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or (str(Path(env["HOME"]) / ".config") if env.get("HOME") else "")
    return Path(base) / "holsrv" / CONFIG_NAME if base else None


def read_config(path: Path, types: Types, fixed: Mapping[str, object]) -> tuple[dict, list[str]]:
    """The settings `path` sets, checked, and a warning for each constant of
    `fixed` it names (its value is not looked at): an unknown key or a bad
    value raises `ConfigError` naming the key, the file and its line."""
    try:
        text = path.read_text(encoding="utf-8")
        table = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read the config file {path}: {err}") from None
    except tomllib.TOMLDecodeError as err:  # its message names the line and column
        raise ConfigError(f"{path} is not valid TOML: {err}; fix it or move it away") from None
    values, warnings = {}, []
    for key, raw in table.items():
        where = f"{path}, line {_key_line(text, key)}"
        if key in fixed:
            warnings.append(fixed_warning(repr(key), key, fixed[key], where))
            continue
        if key not in types:
            known = list(types)
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigError(f"unknown setting {key!r} in {where}; {hint}the settings are: {', '.join(known)}")
        try:
            values[key] = _from_toml(types, key, raw)
        except ValueError as err:
            raise ConfigError(f"bad value for {key!r} in {where}: {err}") from None
    return values, warnings


def _key_line(text: str, key: str) -> int | str:
    """The line where `key` is set (tomllib does not say): `key =`, a quoted key,
    a dotted key or a `[key]` table header."""
    name = rf"(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')"
    pattern = re.compile(rf"^\s*(?:{name}\s*[=.]|\[+\s*{name}\s*[\].])")
    for number, line in enumerate(text.splitlines(), 1):
        if pattern.match(line):
            return number
    return "?"


def _from_toml(types: Types, key: str, raw: object):
    """A TOML value as the setting's type; ValueError saying what was expected."""
    kind = types[key]
    if key in ("extra_path", *_COMMA_LISTS):
        if isinstance(raw, str):
            return parse(types, key, raw)
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


# For project files (`projects`): their keys are read and placed as the config file's are.
from_toml = _from_toml
key_line = _key_line
