"""deploy/: the Containerfile and the Kubernetes Job hold what running ramp unattended needs — a non-root
image whose entrypoint is ``ramp``, one try under a deadline, the key from a Secret (never a literal), the
record on a PVC, CPU requests equal to limits, and the "restricted" Pod Security profile — and the Job's
arguments are ones ``ramp run`` accepts. PyYAML comes with the test extra's tokenizers (huggingface_hub)."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from loadgen.cli.commands import build_parser

yaml = pytest.importorskip("yaml", reason="PyYAML (installed with the test extra's tokenizers)")

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"


def job_and_claims() -> tuple[dict[str, Any], set[str]]:
    docs = [d for d in yaml.safe_load_all((DEPLOY / "k8s" / "job.yaml").read_text()) if d]
    (job,) = [d for d in docs if d["kind"] == "Job"]
    claims = {d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"}
    return job, claims


def test_the_job_tries_once_under_a_deadline() -> None:
    job, _ = job_and_claims()
    assert job["apiVersion"] == "batch/v1"
    spec = job["spec"]
    assert spec["backoffLimit"] == 0
    assert isinstance(spec["activeDeadlineSeconds"], int) and spec["activeDeadlineSeconds"] > 0
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_the_pod_meets_the_restricted_profile_with_cpu_requests_equal_to_limits() -> None:
    job, _ = job_and_claims()
    pod = job["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"]["type"] in ("RuntimeDefault", "Localhost")
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    allowed = {"persistentVolumeClaim", "emptyDir", "configMap", "secret", "projected", "downwardAPI"}
    for volume in pod["volumes"]:
        assert set(volume) - {"name"} <= allowed, volume  # no hostPath
    for container in pod["containers"]:
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
        assert sc.get("privileged", False) is False and sc.get("runAsUser", 1) != 0
        res = container["resources"]
        assert res["requests"]["cpu"] == res["limits"]["cpu"], "a throttled load generator measures itself"
        assert res["requests"]["memory"] == res["limits"]["memory"]


def test_the_key_comes_from_a_secret_and_the_record_goes_to_the_claim() -> None:
    job, claims = job_and_claims()
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    for name, entry in env.items():
        if re.search(r"KEY|TOKEN|SECRET|PASSW", name):
            assert "value" not in entry and entry["valueFrom"]["secretKeyRef"]["key"], name
    runs_dir = env["RAMP_RUNS_DIR"]["value"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts[runs_dir]]["persistentVolumeClaim"]["claimName"] in claims
    if container["securityContext"].get("readOnlyRootFilesystem"):
        assert "/tmp" in mounts  # the workers' temporary files, with the root read-only


def test_the_job_runs_headless_with_arguments_ramp_accepts() -> None:
    job, _ = job_and_claims()
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[0] == "run" and "--headless" in args
    parsed = build_parser().parse_args(args)  # exits (SystemExit) on a flag ramp does not know
    assert parsed.headless and parsed.metrics_host == "0.0.0.0"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == parsed.metrics_port
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == parsed.metrics_port


def test_the_image_is_non_root_with_ramp_as_entrypoint() -> None:
    lines = [ln.strip() for ln in (DEPLOY / "Containerfile").read_text().splitlines()]
    code = [ln for ln in lines if ln and not ln.startswith("#")]
    (entry,) = [ln for ln in code if ln.startswith("ENTRYPOINT")]
    assert json.loads(entry.removeprefix("ENTRYPOINT")) == ["ramp"]
    users = [ln.split()[1] for ln in code if ln.startswith("USER ")]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert any(ln.startswith("ENV") for ln in code) and "RAMP_RUNS_DIR=/runs" in " ".join(code)
    assert not re.search(r"(API_KEY|TOKEN|SECRET)\s*=", " ".join(code)), "no secret baked into the image"


def rayjob() -> dict[str, Any]:
    (job,) = [d for d in yaml.safe_load_all((DEPLOY / "k8s" / "rayjob.yaml").read_text()) if d]
    return job


def test_the_rayjob_runs_ramp_on_ray_headless_once_under_a_deadline() -> None:
    job = rayjob()
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob"
    spec = job["spec"]
    assert (
        spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] > 0 and spec["shutdownAfterJobFinishes"]
    )
    args = spec["entrypoint"].split()
    assert args[0] == "ramp"
    parsed = build_parser().parse_args(args[1:])  # exits (SystemExit) on a flag ramp does not know
    assert parsed.headless and parsed.ray == "" and parsed.out.startswith("/runs/")


def test_every_rayjob_pod_is_restricted_with_the_key_from_a_secret() -> None:
    cluster = rayjob()["spec"]["rayClusterSpec"]
    head = cluster["headGroupSpec"]["template"]["spec"]
    pods = [head] + [group["template"]["spec"] for group in cluster["workerGroupSpecs"]]
    image = {c["image"] for pod in pods for c in pod["containers"]}
    assert len(image) == 1, "driver and cluster: one image, one Ray version"
    for pod in pods:
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
        for container in pod["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
            res = container["resources"]
            assert res["requests"]["cpu"] == res["limits"]["cpu"]
            env = {e["name"]: e for e in container.get("env", [])}
            # the workers send the requests: the key must be where they run, and only from the Secret
            assert env["OPENAI_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "ramp-target"
            assert all("value" not in e for n, e in env.items() if "KEY" in n)
    (container,) = head["containers"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in head["volumes"]}
    _, claims = job_and_claims()
    assert volumes[mounts["/runs"]]["persistentVolumeClaim"]["claimName"] in claims


def restricted(pod: dict[str, Any]) -> None:
    """The "restricted" Pod Security profile's demands on one pod spec."""
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    for container in pod["containers"]:
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
        assert sc.get("privileged", False) is False and sc.get("runAsUser", 1) != 0


def test_the_rayjob_submitter_is_restricted_runs_the_same_image_and_holds_no_key() -> None:
    job = rayjob()
    submitter = job["spec"]["submitterPodTemplate"]["spec"]
    restricted(submitter)
    assert submitter["restartPolicy"] == "Never" and submitter["automountServiceAccountToken"] is False
    head = job["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    (container,) = submitter["containers"]
    assert container["image"] == head["containers"][0]["image"]  # its `ray job submit` is the cluster's Ray
    assert "command" not in container and "args" not in container  # KubeRay's own, from `entrypoint`
    env = {e["name"] for e in container.get("env", [])}
    assert not [
        name for name in env if re.search(r"KEY|TOKEN|SECRET|PASSW", name)
    ]  # the driver runs on the head
    res = container["resources"]
    assert res["requests"] == res["limits"]
    if container["securityContext"].get("readOnlyRootFilesystem"):
        mounts = {m["mountPath"] for m in container["volumeMounts"]}
        assert "/tmp" in mounts and container["env"][0] == {"name": "HOME", "value": "/tmp"}


def test_the_image_with_the_ray_extra_has_ray_s_job_server() -> None:
    """KubeRay submits through the Jobs API, the dashboard's: minimal Ray has none, ray[default] does."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    project = tomllib.loads((DEPLOY.parent / "pyproject.toml").read_text())["project"]
    (ray,) = project["optional-dependencies"]["ray"]
    assert re.match(r"ray\[[^\]]*\bdefault\b[^\]]*\]", ray), ray
    script = (DEPLOY / "image.sh").read_text()
    assert "ray job submit" in script and "--dashboard-host 127.0.0.1" in script
    ci = (DEPLOY.parent / ".ci" / "run").read_text()
    assert "RAMP_IMAGE_EXTRAS=ray" in ci  # step g builds the ray image and submits a run to it


def test_a_prometheus_operator_finds_the_jobs_metrics_through_a_podmonitor() -> None:
    job, _ = job_and_claims()
    (monitor,) = [d for d in yaml.safe_load_all((DEPLOY / "k8s" / "podmonitor.yaml").read_text()) if d]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["kind"] == "PodMonitor"
    template = job["spec"]["template"]
    wanted = monitor["spec"]["selector"]["matchLabels"]
    assert wanted.items() <= template["metadata"]["labels"].items()  # it selects the Job's pod
    (container,) = template["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    parsed = build_parser().parse_args(container["args"])
    assert ports[endpoint["port"]] == parsed.metrics_port  # the port ramp's --metrics-port serves
    assert endpoint["path"] == template["metadata"]["annotations"]["prometheus.io/path"] == "/metrics"
    interval = int(endpoint["interval"].removesuffix("s"))
    assert interval <= 15 and int(endpoint["scrapeTimeout"].removesuffix("s")) < interval
