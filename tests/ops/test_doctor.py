"""`holctl doctor`, run as a user runs it: a subprocess against the fake HOL,
with a temporary HOME for the agent hosts' configuration files, a fake
systemctl and a socket of its own."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import msgspec
import pytest

from holctl.doctor.report import Report, Status
from holsrv import __version__
from holsrv.rpc import framing, messages

from conftest import FAKE_HOL, GOOD_SCRIPT, pid_alive

ROOT = Path(__file__).resolve().parent.parent.parent
DOCTOR_DEADLINE_S = 120.0
NEEDED = ["settings", "hol", "proof_server", "holmake", "daemon", "memory"]
ADVICE = ["heap", "ancestors", "platform", "systemd", "units", "claude_code", "codex", "opencode"]

NO_USER_MANAGER = "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n"
USER_MANAGER = "#!/bin/sh\nexit 0\n"


class Place:
    """A user's machine in miniature: HOME, the working directory, the socket, the tools."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.cwd = root / "work"
        self.bin = root / "bin"
        for directory in (self.home, self.cwd, self.bin):
            directory.mkdir()
        self.socket = root / "run" / "d.sock"
        self.pidfile = root / "hol.pids"
        self.systemctl(NO_USER_MANAGER)
        python_dir = Path(shutil.which("python3") or sys.executable).parent
        self.env = {
            **{k: v for k, v in os.environ.items()
               if not k.startswith(("HOLSRV_", "HOL_", "XDG_", "FAKE_HOL", "CODEX_", "OPENCODE_")) and k != "HOLDIR"},
            "HOME": str(self.home),
            "PATH": os.pathsep.join([str(self.bin), str(python_dir), "/usr/bin", "/bin"]),
            "HOLSRV_SOCKET": str(self.socket),
            "HOL_BIN": str(FAKE_HOL),
            "HOLCTL_SYSTEMCTL": str(self.bin / "systemctl"),
            "FAKE_HOL_PIDFILE": str(self.pidfile),
            "PYTHONPATH": str(ROOT),
        }

    def systemctl(self, script: str) -> None:
        self.tool("systemctl", script)

    def tool(self, name: str, script: str, where: Path | None = None) -> Path:
        path = (where or self.bin) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script)
        path.chmod(0o755)
        return path

    def doctor(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "holctl", "doctor", *args], cwd=self.cwd, env=self.env,
                              capture_output=True, text=True, timeout=DOCTOR_DEADLINE_S)

    def lines(self, *args: str) -> dict[str, str]:
        """Each check's line of the text report, by check name."""
        done = self.doctor(*args)
        found = {}
        for line in done.stdout.splitlines():
            words = line.split(None, 2)
            if len(words) == 3 and words[0] in ("ok", "warn", "FAIL", "skip"):
                found[words[1]] = f"{words[0]} {words[2]}"
        found["exit"] = str(done.returncode)
        return found


@pytest.fixture
def place(short_tmp) -> Place:
    return Place(short_tmp)


def hol_tree(place: Place, theories: list[str]) -> Path:
    """A HOL tree whose sigobj holds `theories`, for the fake to report as its own."""
    holdir = place.root / "HOL"
    (holdir / "sigobj").mkdir(parents=True)
    for name in theories:
        (holdir / "sigobj" / f"{name}Theory.uo").write_text("")
    place.env["FAKE_HOL_HOLDIR"] = str(holdir)
    return holdir


def hol_alone(place: Place, directory: str = "lonely") -> Path:
    """A `hol` (the fake) in a directory with no Holmake beside it."""
    return place.tool("hol", f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_HOL}" "$@"\n', place.root / directory)


# -- HOL ------------------------------------------------------------------------


def test_doctor_on_the_fake_hol_passes_every_needed_check_and_exits_0(place):
    lines = place.lines()
    assert lines["exit"] == "0"
    assert lines["hol"].startswith(f"ok {FAKE_HOL}: hol_bin from environment HOL_BIN")
    assert lines["proof_server"].startswith("ok `--maxheap")
    assert "HOL4 fake" in lines["proof_server"] and "positions utf-8" in lines["proof_server"]
    assert lines["holmake"] == f"ok {FAKE_HOL.parent / 'Holmake'}: beside the `hol`."
    assert lines["daemon"].startswith("ok not running; startable")


def test_doctor_stops_the_hol_server_of_its_handshake_and_never_starts_a_daemon(place):
    log = place.root / "hol.log"
    place.env["FAKE_HOL_LOG"] = str(log)
    assert place.doctor().returncode == 0
    pids = [int(p) for p in place.pidfile.read_text().split()]
    assert len(pids) == 1
    assert not pid_alive(pids[0])
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    sent = [entry["msg"].get("method") for entry in entries if entry["dir"] == "C->S"]
    # The handshake, the probe of its services on a scratch script, and the goodbye (None: a
    # reply to HOL's own progress request).
    assert sent[:3] == ["initialize", "initialized", "textDocument/didOpen"]
    assert sent[-2:] == ["shutdown", "exit"]
    assert set(sent[3:-2]) - {None} == {"$/hol/goalState", "textDocument/hover", "textDocument/definition",
                                        "$/hol/search", "workspace/symbol", "textDocument/completion"}
    assert not place.socket.exists() and not place.socket.parent.exists()


def test_doctor_lists_which_of_hol_s_services_work_by_a_live_probe(place):
    lines = place.lines()
    assert lines["services"] == ("ok on a scratch script: compile and verdicts works, goal states works, hover works, "
                                 "definition works, search works, symbols works, completion works.")
    found = msgspec.json.decode(place.doctor("--json").stdout, type=Report)
    services = next(c for c in found.checks if c.name == "services")
    assert services.services == {name: "works" for name in ("compile and verdicts", "goal states", "hover",
                                                            "definition", "search", "symbols", "completion")}
    assert not services.needed


def test_doctor_names_the_services_this_hol_lacks_and_how_it_showed(place):
    place.env["FAKE_HOL_LACKS"] = "search,hover:unknown,goalstate,symbols"
    lines = place.lines()
    assert lines["exit"] == "0"  # advice: the daemon answers around what is missing
    said = lines["services"]
    assert said.startswith("warn on a scratch script: compile and verdicts works, goal states lacking, hover lacking, "
                           "definition works, search lacking, symbols lacking, completion works.")
    assert "not even bool.TRUTH" in said and "does not know `textDocument/hover` (error -32600)" in said
    assert "no goal-state walker" in said and "not name the ancestors' theorems" in said
    assert "Fix: nothing to do for the daemon's sake" in said


def test_doctor_without_any_hol_fails_and_says_where_to_point_it(place):
    del place.env["HOL_BIN"]
    lines = place.lines()
    assert lines["exit"] == "1"
    assert lines["hol"].startswith("FAIL cannot find HOL4")
    assert "Fix: set HOL_BIN" in lines["hol"]
    assert lines["proof_server"] == "skip not tried: no `hol` to start."
    assert lines["services"] == "skip not probed: no `hol` to start."
    assert lines["holmake"].startswith("FAIL cannot find Holmake")
    assert not place.pidfile.exists()


def test_doctor_warns_that_a_hol_bin_which_is_not_executable_was_passed_over_for_the_path_s(place):
    place.env["HOL_BIN"] = str(place.root / "nosuch" / "hol")
    lonely = hol_alone(place)
    place.env["PATH"] = os.pathsep.join([str(lonely.parent), place.env["PATH"]])
    lines = place.lines()
    assert lines["hol"] == (f"warn {lonely}: the first `hol` on PATH, because hol_bin {place.root}/nosuch/hol (from "
                            "environment HOL_BIN) is not an executable file. Fix: fix or unset it, so the servers "
                            "run the HOL you meant")
    assert lines["proof_server"].startswith("ok ")


def test_doctor_tells_an_old_hol_lsp_without_proof_checking(place):
    place.env["FAKE_HOL_OLD"] = "1"
    lines = place.lines()
    assert lines["exit"] == "1"
    assert lines["proof_server"].startswith("FAIL this `hol lsp` has no proof checking")
    assert "build a recent HOL4" in lines["proof_server"]
    assert lines["hol"].startswith("ok ")


def git_tree(where: Path) -> Path:
    """A HOL tree that is a git checkout with one tagged commit."""
    where.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull}
    for argv in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "k"], ["tag", "trindemossen-2"]):
        subprocess.run(["git", "-C", str(where), *argv], check=True, env=env, capture_output=True, timeout=30)
    return where


def test_doctor_names_a_hol_build_whose_server_info_says_unknown(place):
    tree = git_tree(place.root / "HOL")
    place.env["FAKE_HOL_VERSION"] = "unknown"  # as the recorded servers say (transcripts' second set)
    place.env["FAKE_HOL_HOLDIR"] = str(tree)
    line = place.lines()["proof_server"]
    assert line.startswith("ok ") and "HOL4 unknown" in line
    assert f"It does not name its build (version unknown): HOLDIR {tree}, hol {os.path.realpath(FAKE_HOL)} of " in line
    assert "git trindemossen-2" in line


def test_doctor_finds_the_hol_tree_beside_a_hol_that_did_not_say_where_it_is(place):
    place.env["FAKE_HOL_OLD"] = "1"  # no handshake, so no serverInfo.holdir
    tree = place.root / "HOL"
    (tree / "sigobj").mkdir(parents=True)
    (tree / "sigobj" / "arithmeticTheory.uo").write_text("")
    place.env["HOL_BIN"] = str(hol_alone(place, "HOL/bin"))
    (place.cwd / "demoScript.sml").write_text(GOOD_SCRIPT)
    assert place.lines()["ancestors"] == "ok 1 ancestor of 1 script here: built or HOL's own."


def test_doctor_gives_up_on_a_hol_that_does_not_answer_in_time_and_stops_it(place):
    place.env["FAKE_HOL_STARTUP_MS"] = "600000"
    lines = place.lines("--hol-timeout", "1")
    assert lines["exit"] == "1"
    assert lines["proof_server"].startswith("FAIL ")
    assert "did not answer initialize within 1.0s" in lines["proof_server"]
    assert "--hol-timeout" in lines["proof_server"]
    assert not pid_alive(int(place.pidfile.read_text().split()[0]))


def test_doctor_fails_when_no_holmake_is_beside_hol_or_anywhere(place):
    place.env["HOL_BIN"] = str(hol_alone(place))
    lines = place.lines()
    assert lines["exit"] == "1"
    assert lines["holmake"].startswith("FAIL cannot find Holmake")
    assert "HOLSRV_HOLMAKE_BIN" in lines["holmake"]
    assert lines["proof_server"].startswith("ok ")


def test_doctor_warns_of_a_holmake_from_elsewhere_than_beside_hol(place):
    place.env["HOL_BIN"] = str(hol_alone(place))
    other = place.tool("Holmake", "#!/bin/sh\nexit 0\n")
    lines = place.lines()
    assert lines["holmake"].startswith(f"warn {other} is not beside the `hol`")
    assert lines["exit"] == "0"


# -- the scripts here -----------------------------------------------------------


def test_doctor_names_an_unbuilt_ancestor_and_sees_it_once_built(place):
    hol_tree(place, ["arithmetic"])
    script = "Theory top\nAncestors arithmetic base\n\nTheorem t: T\nProof\n  simp[]\nQED\n"
    (place.cwd / "topScript.sml").write_text(script)
    lines = place.lines()
    assert lines["ancestors"].startswith("warn not built here")
    assert "topScript.sml needs base." in lines["ancestors"]
    assert "arithmetic" not in lines["ancestors"].split("needs")[1]
    assert "Fix: `holctl holmake topScript.sml`" in lines["ancestors"]
    assert lines["exit"] == "0"  # advice: the holmake tool builds it
    (place.cwd / ".hol" / "objs").mkdir(parents=True)
    (place.cwd / ".hol" / "objs" / "baseTheory.uo").write_text("")
    assert place.lines()["ancestors"] == "ok 2 ancestors of 1 script here: built or HOL's own."


def test_doctor_says_hol_s_own_theories_cannot_be_told_without_a_sigobj(place):
    (place.cwd / "demoScript.sml").write_text(GOOD_SCRIPT)
    line = place.lines()["ancestors"]
    assert line.startswith("warn ") and "no sigobj in the HOL tree" in line and "needs arithmetic" in line


def test_doctor_warns_of_a_holmakefile_heap_that_is_not_built(place):
    hol_tree(place, ["arithmetic"])
    (place.cwd / "demoScript.sml").write_text(GOOD_SCRIPT)
    (place.cwd / "Holmakefile").write_text("INCLUDES = ..\nHOLHEAP = myheap\n")
    line = place.lines()["heap"]
    assert line.startswith(f"warn HOLHEAP = myheap, but {place.cwd.resolve() / 'myheap'} is not built")
    assert "Fix: run Holmake in" in line
    (place.cwd / "myheap").write_text("")
    assert place.lines()["heap"] == f"ok HOLHEAP = myheap: {place.cwd.resolve() / 'myheap'} is built."


def test_doctor_reads_the_default_heap_from_the_hol_tree_without_a_holmakefile(place):
    holdir = hol_tree(place, ["arithmetic"])
    (place.cwd / "demoScript.sml").write_text(GOOD_SCRIPT)
    lines = place.lines()
    assert lines["heap"] == f"ok no Holmakefile here: the default heap ({holdir}/bin/hol.state)."
    assert lines["ancestors"].startswith("ok ")


# -- the daemon -------------------------------------------------------------------


def test_doctor_says_hello_to_a_running_daemon_and_counts_its_memory(place, daemon_factory):
    running = daemon_factory(socket=place.socket.parent.parent / "live.sock", memory_budget_mb=8192,
                             max_servers=10, max_heap_mb=6144, start_footprint_mb=1024)
    place.env["HOLSRV_SOCKET"] = str(running.socket)
    lines = place.lines()
    assert lines["daemon"].startswith(f"ok running (pid {os.getpid()}, version {__version__}, protocol "
                                      f"{messages.PROTOCOL_VERSION}) on {running.socket}")
    # Counted as admission counts a new server (what it is expected to use), not at its heap cap:
    # doctor says what status says.
    status = running.call(messages.Status())
    assert (status.usual_footprint_mb, status.servers_fit) == (1024, 8)
    assert lines["memory"] == ("ok the daemon: budget 8192 MB, servers of 1024 MB each (expected use, as admission "
                               "counts a new server): 8 fit (max_servers 10), 0 MB held now, 8 more fit.")
    assert lines["exit"] == "0"


class FakeDaemon:
    """A socket that answers hello (and status) as a daemon of another version would."""

    def __init__(self, path: Path, hello_reply: messages.ReplyBase) -> None:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        self.listener.listen()
        self.listener.settimeout(DOCTOR_DEADLINE_S)
        self.hello_reply = hello_reply
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(DOCTOR_DEADLINE_S)
            if framing.recv_body(conn) is None:
                return
            conn.sendall(framing.encode(self.hello_reply))
            if isinstance(self.hello_reply, messages.Welcome) and framing.recv_body(conn) is not None:
                conn.sendall(framing.encode(messages.StatusResult(
                    "0.0.1", messages.PROTOCOL_VERSION, 4242, 1.0, "", 4, [], 0, 0)))

    def close(self) -> None:
        self.listener.close()
        self.thread.join(DOCTOR_DEADLINE_S)


def test_doctor_fails_a_daemon_of_another_version_and_says_how_to_replace_it(place):
    fake = FakeDaemon(place.socket, messages.Welcome(messages.PROTOCOL_VERSION, "0.0.1", 4242))
    try:
        lines = place.lines()
    finally:
        fake.close()
    assert lines["exit"] == "1"
    assert lines["daemon"].startswith(f"FAIL running (pid 4242, version 0.0.1, protocol {messages.PROTOCOL_VERSION})")
    assert f"these clients are version {__version__}" in lines["daemon"]
    assert "Fix: `holctl shutdown`" in lines["daemon"]


def test_doctor_fails_a_daemon_of_another_protocol_with_its_own_fix(place):
    said = "protocol mismatch: this daemon speaks 2. Restart the daemon: `kill 4242`"
    fake = FakeDaemon(place.socket, messages.ErrorReply("protocol_mismatch", said))
    try:
        lines = place.lines()
    finally:
        fake.close()
    assert lines["exit"] == "1"
    assert lines["daemon"] == f"FAIL a daemon of another protocol runs on {place.socket}: {said}"


def test_doctor_fails_when_the_socket_directory_is_open_to_every_user(place):
    place.socket.parent.mkdir()
    place.socket.parent.chmod(0o777)
    lines = place.lines()
    assert lines["daemon"].startswith("FAIL not running, and could not be started")
    assert "is writable by every user" in lines["daemon"]
    assert lines["exit"] == "1"


def test_doctor_fails_a_config_file_the_daemon_would_refuse(place):
    config = place.home / ".config" / "holsrv" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text("max_servres = 3\n")
    line = place.lines()["settings"]
    assert line.startswith("FAIL a daemon would not start: unknown setting 'max_servres'")


def test_doctor_warns_of_a_constant_named_where_a_setting_once_was_and_still_passes(place):
    place.env["HOLSRV_QUIET_S"] = "3"
    lines = place.lines()
    assert lines["settings"].startswith("warn a daemon would start with them (no config file), but HOLSRV_QUIET_S in "
                                        "the environment has no effect: quiet_s is no longer a setting but a "
                                        "constant, fixed at 1.0")
    assert lines["exit"] == "0"


def test_doctor_fails_a_memory_budget_that_fits_no_server(place):
    place.env["HOLSRV_MEMORY_BUDGET_MB"] = "1000"
    place.env["HOLSRV_START_FOOTPRINT_MB"] = "4000"
    lines = place.lines()
    assert lines["memory"].startswith("FAIL a daemon started now: budget 1000 MB, servers of 4000 MB each "
                                      "(expected use before any server is measured: start_footprint_mb): "
                                      "not one fits")
    assert "HOLSRV_MEMORY_BUDGET_MB" in lines["memory"]
    assert lines["exit"] == "1"


# -- systemd ------------------------------------------------------------------------


def test_doctor_without_a_user_manager_advises_and_still_exits_0(place):
    lines = place.lines()
    assert lines["systemd"].startswith("warn no systemd user instance answers here")
    assert "Failed to connect to bus" in lines["systemd"]
    assert lines["units"].startswith("ok not installed")
    assert lines["exit"] == "0"


def test_doctor_with_a_user_manager_suggests_install_service(place):
    place.systemctl(USER_MANAGER)
    lines = place.lines()
    assert lines["systemd"].startswith("ok the user manager answers")
    assert lines["units"].startswith("warn not installed") and "`holctl install-service`" in lines["units"]


def test_doctor_does_not_connect_where_systemd_would_start_the_daemon(place):
    # holsrv.socket listens, holsrv.service is not running: a hello would start it.
    place.systemctl('#!/bin/sh\ncase "$*" in *holsrv.service*) exit 3;; esac\nexit 0\n')
    units = place.home / ".config" / "systemd" / "user"
    units.mkdir(parents=True)
    (units / "holsrv.service").write_text("[Service]\n")
    place.socket.parent.mkdir(mode=0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(place.socket))
    listener.listen()
    listener.setblocking(False)
    try:
        lines = place.lines()
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody knocked
    finally:
        listener.close()
    assert lines["units"].startswith("ok installed") and "starts on the first connection" in lines["units"]
    assert lines["daemon"].startswith("ok not running; systemd listens on the socket (holsrv.socket)")


# -- the agent hosts ----------------------------------------------------------------


def test_doctor_finds_holmcp_in_each_host_s_configuration_and_changes_none(place):
    holmcp = place.tool("holmcp", "#!/bin/sh\nexit 0\n")
    files = {
        place.home / ".claude.json": json.dumps(
            {"projects": {str(place.cwd): {"mcpServers": {"hol": {"type": "stdio", "command": str(holmcp)}}}}}),
        place.home / ".codex" / "config.toml": f'[mcp_servers.holmcp]\ncommand = "{holmcp}"\nargs = []\n',
        place.home / ".config" / "opencode" / "opencode.json": json.dumps(
            {"mcp": {"servers": {"holmcp": {"type": "local", "command": [str(holmcp)]}}}}),
    }
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    lines = place.lines()
    assert lines["claude_code"] == (f"ok registered as hol in {place.home}/.claude.json (local scope, {place.cwd}): "
                                    f"{holmcp}.")
    assert lines["codex"] == f"ok registered as holmcp in {place.home}/.codex/config.toml [mcp_servers]: {holmcp}."
    assert lines["opencode"] == (f"ok registered as holmcp in {place.home}/.config/opencode/opencode.json "
                                 f"(mcp.servers): {holmcp}.")
    assert {path: path.read_text() for path in files} == files


def test_doctor_recognises_opencode_s_older_form_and_a_project_mcp_json(place):
    (place.cwd / "opencode.jsonc").write_text(
        '{\n  // older OpenCode\n  "mcp": {"holmcp": {"type": "local", "command": ["python3", "-m", "holmcp"]},},\n}\n')
    (place.cwd / ".mcp.json").write_text(json.dumps({"mcpServers": {"prover": {"command": "holmcp", "args": []}}}))
    lines = place.lines()
    assert lines["opencode"].startswith(f"ok registered as holmcp in {place.cwd}/opencode.jsonc (mcp, the older form)")
    assert lines["claude_code"].startswith(f"warn registered as prover in {place.cwd}/.mcp.json (project scope): "
                                           "holmcp, but holmcp is not an executable there.")


def test_doctor_gives_the_command_that_registers_holmcp_where_it_is_missing(place):
    (place.home / ".claude.json").write_text(json.dumps({"mcpServers": {"other": {"command": "other-mcp"}}}))
    (place.home / ".codex").mkdir()
    (place.home / ".codex" / "config.toml").write_text("this is not toml = = \n")
    lines = place.lines()
    assert lines["claude_code"].startswith(f"warn holmcp is not registered ({place.home}/.claude.json)")
    assert "Fix: `claude mcp add --scope user holmcp -- " in lines["claude_code"]
    assert lines["codex"].startswith("warn holmcp is not registered (nothing readable). Could not read: ")
    assert "Fix: `codex mcp add holmcp -- " in lines["codex"]
    assert lines["opencode"].startswith("skip OpenCode not set up here")
    assert lines["exit"] == "0"


# -- --json -----------------------------------------------------------------------------


def test_doctor_json_is_one_typed_entry_per_check_and_agrees_with_the_exit_status(place):
    del place.env["HOL_BIN"]
    done = place.doctor("--json")
    found = msgspec.json.decode(done.stdout, type=Report)
    assert [c.name for c in found.checks] == [*NEEDED[:3], "services", "holmake", "daemon", "memory", *ADVICE]
    assert {c.name for c in found.checks if c.needed} == set(NEEDED)
    assert (found.ok, done.returncode, found.version) == (False, 1, __version__)
    hol = next(c for c in found.checks if c.name == "hol")
    assert hol.status is Status.FAIL and hol.fix.startswith("set HOL_BIN")
    raw = json.loads(done.stdout)
    assert set(raw) == {"ok", "version", "checks"}
    for entry in raw["checks"]:
        assert set(entry) == {"name", "status", "needed", "message", *(["fix"] if entry.get("fix") else []),
                              *(["services"] if entry.get("services") else [])}
        assert entry["status"] in ("ok", "warn", "fail", "skip")


def test_doctor_on_a_healthy_machine_reports_ok_in_json_too(place):
    done = place.doctor("--json")
    found = msgspec.json.decode(done.stdout, type=Report)
    assert (found.ok, done.returncode) == (True, 0)
    assert all(c.status is Status.OK for c in found.checks if c.needed)


def test_the_socket_directory_doctor_checks_is_left_as_it_was(place):
    place.socket.parent.mkdir(mode=0o700)
    before = stat.S_IMODE(place.socket.parent.stat().st_mode)
    assert place.doctor().returncode == 0
    assert stat.S_IMODE(place.socket.parent.stat().st_mode) == before and list(place.socket.parent.iterdir()) == []


def test_doctor_in_a_projects_directory_checks_that_projects_hol_and_heap_cap(place):
    tree = place.root / "HOL-P"
    hol = place.tool("hol", f'#!/bin/sh\nFAKE_HOL_HOLDIR="{tree}" exec "{sys.executable}" "{FAKE_HOL}" "$@"\n',
                     tree / "bin")
    place.tool("Holmake", f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_HOL.parent / "Holmake"}" "$@"\n', tree / "bin")
    (place.cwd / ".git").mkdir()
    (place.cwd / "holsrv.toml").write_text(f'holdir = "{tree}"\nmax_heap_mb = 1234\n')
    (place.cwd / "holsrv.toml").chmod(0o644)
    lines = place.lines()
    assert f"project file {place.cwd / 'holsrv.toml'} over it" in lines["settings"]
    assert lines["hol"].startswith(f"ok {hol}: hol_bin from project file")
    assert lines["proof_server"].startswith("ok `--maxheap 1234")
    assert lines["holmake"].startswith(f"ok {tree / 'bin' / 'Holmake'}")
    (place.cwd / "holsrv.toml").chmod(0o666)
    assert "writable by others" in place.lines()["settings"]
