"""A release: the sdist and wheel as PyPI would take them, the wheel installed
where nothing else is, and one version everywhere a user can ask for it.

The build runs once per test session (about 5 s, without build isolation so
nothing is downloaded) from a copy of the tree, so the checkout gets no build
products; the fresh virtual environment has no pip of its own and sees this
environment's dependencies through a path file, but not its editable
holsrv, so what runs there comes from the wheel alone.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from mcp import Client

from holmcp.server import build_server
from holsrv import __version__
from holsrv.rpc import messages

from conftest import FAKE_HOL

ROOT = Path(__file__).resolve().parent.parent.parent
# What the build needs of the tree; the rest (tests, bench, the venv) stays behind
# but for the two READMEs the README links to, which MANIFEST.in names.
TREE = ["pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "CHANGELOG.md", "Makefile",
        "holsrv", "holctl", "holmcp", "docs", "systemd", "tests/fake_hol/README.md", "bench/README.md"]
BUILD_TIMEOUT_S = 300
RUN_TIMEOUT_S = 120
IN_THE_SDIST = ["LICENSE", "CHANGELOG.md", "README.md", "systemd/holsrv.service", "systemd/holsrv.socket",
                "holmcp/skill/SKILL.md", "holmcp/skill/reference.md", "tests/fake_hol/README.md", "bench/README.md",
                *(f"docs/{page.name}" for page in sorted((ROOT / "docs").glob("*.md")))]
IN_THE_WHEEL = ["holmcp/skill/SKILL.md", "holmcp/skill/reference.md"]


def _run(*command: str | Path, timeout: float = RUN_TIMEOUT_S, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> dict[str, Path]:
    """The sdist and the wheel, built from a copy of the tree."""
    tree, out = tmp_path_factory.mktemp("tree"), tmp_path_factory.mktemp("dist")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    for name in TREE:
        source, target = ROOT / name, tree / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, ignore=ignore)
        else:
            shutil.copy2(source, target)
    built = _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, tree, timeout=BUILD_TIMEOUT_S)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return {"sdist": next(out.glob("*.tar.gz")), "wheel": next(out.glob("*.whl"))}


@pytest.fixture(scope="module")
def fresh_venv(dist, tmp_path_factory) -> Path:
    """A new virtual environment with the wheel installed; its bin directory."""
    venv = tmp_path_factory.mktemp("venv")
    made = _run(sys.executable, "-m", "venv", "--without-pip", venv)
    assert made.returncode == 0, made.stderr
    new_python = venv / "bin" / "python"
    site = Path(_run(new_python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))").stdout.strip())
    # A path line adds a directory but runs none of its .pth files: the editable holsrv stays out.
    (site / "deps-from-the-test-venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    installed = _run(sys.executable, "-m", "pip", "--python", new_python, "install", "--no-deps", "--no-index",
                     "--quiet", dist["wheel"])
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return venv / "bin"


def test_the_sdist_and_wheel_pass_twine_check(dist):
    checked = _run(sys.executable, "-m", "twine", "check", "--strict", dist["sdist"], dist["wheel"])
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_sdist_carries_the_license_changelog_units_skill_and_every_linked_doc(dist):
    with tarfile.open(dist["sdist"]) as sdist:
        names = {name.partition("/")[2] for name in sdist.getnames()}
    assert sorted(set(IN_THE_SDIST) - names) == []


def test_the_wheel_carries_the_skill_as_package_data_and_the_license(dist):
    with zipfile.ZipFile(dist["wheel"]) as wheel:
        names = set(wheel.namelist())
    assert sorted(set(IN_THE_WHEEL) - names) == []
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)


def test_the_wheel_in_a_fresh_venv_runs_from_itself_and_says_its_version(fresh_venv):
    # From a directory outside the checkout: `-c` puts the current one first on sys.path.
    where = _run(fresh_venv / "python", "-c", "import holctl, holmcp.skill; print(holctl.__file__)",
                 cwd=fresh_venv)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(fresh_venv.parent), where.stdout
    for command in ("holctl", "holsrv"):
        said = _run(fresh_venv / command, "--version")
        assert said.returncode == 0, said.stderr
        assert __version__ in said.stdout, (command, said.stdout)


def test_the_installed_wheel_installs_its_skill_into_a_directory(fresh_venv, tmp_path):
    copied = _run(fresh_venv / "holctl", "install-skill", "--dir", tmp_path)
    assert copied.returncode == 0, copied.stderr
    assert (tmp_path / "hol4-proof" / "SKILL.md").read_text().startswith("---\nname: hol4-proof\n")


def test_the_installed_wheel_runs_doctor_against_the_fake_hol(fresh_venv, short_tmp):
    socket = short_tmp / "doctor.sock"
    env = {"PATH": f"{fresh_venv}:/usr/bin:/bin", "HOME": str(short_tmp), "XDG_RUNTIME_DIR": str(short_tmp),
           "XDG_CONFIG_HOME": str(short_tmp / "config"), "XDG_STATE_HOME": str(short_tmp / "state"),
           "HOL_BIN": str(FAKE_HOL), "HOLSRV_SOCKET": str(socket)}
    helped = _run(fresh_venv / "holctl", "doctor", "--help", env=env)
    if helped.returncode != 0 and "No such command" in helped.stderr:
        pytest.skip("holctl has no `doctor` command yet: this half runs once it has")
    try:
        doctor = _run(fresh_venv / "holctl", "doctor", "--json", env=env, cwd=short_tmp)
        assert doctor.returncode in (0, 1), doctor.stderr
        assert isinstance(json.loads(doctor.stdout), dict | list), doctor.stdout
    finally:
        _run(fresh_venv / "holctl", "--no-start", "shutdown", env=env)


@pytest.mark.asyncio
async def test_holctl_holsrv_holmcp_and_status_give_one_version(daemon):
    bin_dir = Path(sys.executable).parent
    said = {command: _run(bin_dir / command, "--version").stdout for command in ("holctl", "holsrv")}
    assert {command: text.split()[-1:] for command, text in said.items()} == {"holctl": [__version__],
                                                                              "holsrv": [__version__]}, said
    assert metadata.version("holsrv") == __version__
    async with Client(build_server(daemon.socket, autostart=False)) as client:
        assert client.server_info is not None and client.server_info.version == __version__
    status = daemon.client().call(messages.Status())
    assert isinstance(status, messages.StatusResult) and status.daemon_version == __version__
