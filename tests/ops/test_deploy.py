"""deploy/: the Kubernetes manifests parse and say what a node's holsrv needs (a DaemonSet with the
host socket directory, resource limits, probes that ask the daemon, a grace period past its drain,
scrape annotations on its metrics port; the sidecar's shared socket directory), and the container
build file runs holsrv in the foreground as a user other than root.  The settings they give are
real settings with values holsrv starts with."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from holsrv.config import metricslisten
from holsrv.config.settings import Settings

yaml = pytest.importorskip("yaml")

DEPLOY = Path(__file__).resolve().parent.parent.parent / "deploy"


def manifests() -> list[dict]:
    found = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        found += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    return found


def one(kind: str) -> dict:
    found = [doc for doc in manifests() if doc["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


def container(pod: dict, name: str) -> dict:
    return next(c for c in pod["containers"] if c["name"] == name)


def env(c: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in c.get("env", [])}


def mounts(c: dict) -> dict[str, str]:
    return {v["mountPath"]: v["name"] for v in c.get("volumeMounts", [])}


def check_holsrv(pod: dict, annotations: dict) -> dict:
    """What both forms need of the holsrv container; its environment."""
    daemon = container(pod, "holsrv")
    given = env(daemon)
    settings = Settings.from_env(given, config_file=None)  # real settings, values it starts with
    assert not settings.warnings
    socket_dir = str(Path(given["HOLSRV_SOCKET"]).parent)
    assert any(socket_dir == path or socket_dir.startswith(path + "/") for path in mounts(daemon))
    limits = daemon["resources"]["limits"]
    assert limits["memory"] and limits["cpu"]
    assert "HOLSRV_MEMORY_BUDGET_MB" not in given  # 75% of the cgroup's limit, read by the daemon
    for probe in ("readinessProbe", "livenessProbe"):
        command = daemon[probe]["exec"]["command"]
        assert command[0] == "holctl" and "status" in command and "--no-start" in command, probe
    assert pod["terminationGracePeriodSeconds"] > settings.stop_timeout_s + 5
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    listen = metricslisten.parse(settings.metrics_listen)
    assert listen is not None
    ports = {p["containerPort"] for p in daemon["ports"]}
    assert listen.port in ports
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == listen.port
    assert annotations["prometheus.io/path"] == "/metrics"
    return given


def test_every_manifest_parses_and_names_its_kind():
    kinds = sorted(doc["kind"] for doc in manifests())
    assert kinds == ["DaemonSet", "Pod"]
    for doc in manifests():
        json.dumps(doc)  # plain data, nothing YAML-only


def test_the_daemonset_puts_its_socket_in_a_host_directory_with_limits_probes_and_a_grace_period():
    daemonset = one("DaemonSet")
    template = daemonset["spec"]["template"]
    pod = template["spec"]
    given = check_holsrv(pod, template["metadata"]["annotations"])
    socket_dir = str(Path(given["HOLSRV_SOCKET"]).parent)
    volume = mounts(container(pod, "holsrv"))[socket_dir]
    host = next(v for v in pod["volumes"] if v["name"] == volume)["hostPath"]
    assert host["path"] and host["type"] == "DirectoryOrCreate"
    assert daemonset["spec"]["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()


def test_the_sidecar_shares_the_socket_directory_and_the_checkout_with_its_agent():
    pod_doc = one("Pod")
    pod = pod_doc["spec"]
    given = check_holsrv(pod, pod_doc["metadata"]["annotations"])
    agent = container(pod, "agent")
    assert env(agent)["HOLSRV_SOCKET"] == given["HOLSRV_SOCKET"]
    daemon_mounts, agent_mounts = mounts(container(pod, "holsrv")), mounts(agent)
    shared = {path: name for path, name in daemon_mounts.items() if agent_mounts.get(path) == name}
    assert str(Path(given["HOLSRV_SOCKET"]).parent.parent) in shared  # the daemon makes its own 0700 dir inside
    assert len(shared) >= 2  # the socket directory and the checkout, at the same paths
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert all("emptyDir" in volumes[name] for name in shared.values())


def instructions() -> list[tuple[str, str]]:
    text = (DEPLOY / "Containerfile").read_text(encoding="utf-8").replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_the_container_build_runs_holsrv_in_the_foreground_as_a_user_other_than_root():
    steps = instructions()
    assert steps[0] == ("ARG", "HOL_IMAGE=registry.example.org/hol4:latest")  # HOL's build is the user's
    assert steps[1] == ("FROM", "${HOL_IMAGE}")
    users = [arg for op, arg in steps if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    last = [(op, arg) for op, arg in steps if op in ("CMD", "ENTRYPOINT")][-1]
    command = json.loads(last[1])  # the exec form: holsrv is pid 1 and gets SIGTERM itself
    assert last[0] == "CMD" and command[0] == "holsrv" and "--detach" not in command
    assert all(op in {"ARG", "FROM", "ENV", "USER", "COPY", "RUN", "WORKDIR", "EXPOSE", "CMD"} for op, _ in steps)
    assert any("HOLSRV_SOCKET=" in shlex.split(arg)[0] or "HOLSRV_SOCKET=" in arg for op, arg in steps if op == "ENV")
