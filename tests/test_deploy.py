"""deploy/: the Ray cluster-launcher YAML and the KubeRay manifests, checked here without a cloud.

The launcher YAML is validated against the JSON schema the installed Ray ships for cluster configs
(`ray/autoscaler/ray-schema.json`); the manifests are parsed and checked for what the sweeps rely on:
the node kinds' custom resources, GPUs and CPUs (fed to the same placement check a sweep runs
before Tune starts, with the sweeps' own requests), token authentication on every node and client, the
token from a file or Secret and never inline, the dashboard's exposure, and object storage. What was
not run: `ray up` on AWS and `kubectl apply` on a Kubernetes cluster (docs: deploy/README.md).
"""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import jsonschema
import pytest
import ray
import yaml

from abacus_ray.api.sweeps import expand, load_sweep
from abacus_ray.cli.sweep import parse

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
GPU_TRIAL = ["--set", "cluster.use_gpu=true", "--set", "cluster.resources=l4:1"]
CPU_TRIAL = ["--set", "cluster.resources=cpu_pool:1"]


def configs(sweep: str, flags: list[str]):
    """The sweep's trial configs under `flags`, through the sweep command's own parser and expansion."""
    s = load_sweep(sweep)
    options, _ = parse(s, flags)
    return [t.config for t in expand(s, options)]


def launcher_nodes() -> list:
    from abacus_ray.cluster.placement import Node

    cfg = yaml.safe_load((DEPLOY / "aws.yaml").read_text())
    return [Node(name, {k: float(v) for k, v in t["resources"].items()})
            for name, t in cfg["available_node_types"].items()]


def test_launcher_yaml_is_valid_for_ray():
    cfg = yaml.safe_load((DEPLOY / "aws.yaml").read_text())
    schema = json.loads((Path(ray.__file__).parent / "autoscaler" / "ray-schema.json").read_text())
    jsonschema.validate(cfg, schema)
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(cfg))  # what `ray up` runs on the file before it touches the cloud
    assert cfg["head_node_type"] in cfg["available_node_types"]
    assert cfg["provider"]["type"] == "aws"
    with pytest.raises(jsonschema.ValidationError):  # the schema does bite: resources must be integers
        jsonschema.validate(cfg | {"available_node_types": {"x": {"resources": {"CPU": "many"}, "node_config": {}}}},
                            schema)


def test_launcher_yaml_has_token_auth_a_private_dashboard_and_no_credentials():
    text = (DEPLOY / "aws.yaml").read_text()
    cfg = yaml.safe_load(text)
    starts = [c for c in cfg["head_start_ray_commands"] + cfg["worker_start_ray_commands"] if "ray st" in c]
    assert starts and all("RAY_AUTH_MODE=token" in c and "RAY_AUTH_TOKEN_PATH=" in c for c in starts)
    head = next(c for c in cfg["head_start_ray_commands"] if "--head" in c)
    assert "--dashboard-host=127.0.0.1" in head and "--num-cpus=1" in head  # the driver only, Jobs API on loopback
    assert cfg["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"  # the token file, copied to every node
    assert any("chmod 600 ~/.ray/auth_token" in c for c in cfg["setup_commands"])
    assert not re.search(r"AKIA[0-9A-Z]{16}|aws_secret_access_key|AWS_SECRET", text, re.I)
    assert all("IamInstanceProfile" in t["node_config"] for t in cfg["available_node_types"].values())


def test_launcher_node_types_hold_the_sweeps_requests():
    from abacus_ray.cluster.placement import PlacementError, eval_pools, max_concurrency

    nodes = launcher_nodes()
    gpu = configs("fig10_k", ["--preset", "paper", *GPU_TRIAL])
    assert max_concurrency(gpu, nodes) == 4  # one g6.12xlarge: 4 L4 slots for the 20 GPU trials
    assert max_concurrency(configs("fig10_k", ["--preset", "paper", *CPU_TRIAL]), nodes) == 20  # 32 cpu_pool slots
    assert eval_pools(100, None, None, nodes) == (4, 77)  # a GPU evaluator per L4, a CPU one per CPU left
    with pytest.raises(PlacementError, match="a4000: 0"):  # a kind the deployment does not have
        max_concurrency(configs("fig10_k", ["--preset", "paper", "--set", "cluster.resources=a4000:1"]), nodes)


def manifests() -> dict[str, dict]:
    docs = [d for f in sorted((DEPLOY / "kuberay").glob("*.yaml")) for d in yaml.safe_load_all(f.read_text())]
    return {d["kind"]: d for d in docs}


def containers(pod: dict) -> list[dict]:
    return pod["spec"]["containers"]


def kuberay_nodes(cluster: dict) -> list:
    """What each RayCluster pod offers Ray (a group's `replicas` pods): rayStartParams first, then the
    container's limits."""
    from abacus_ray.cluster.placement import Node

    out = []
    groups = [("head", cluster["spec"]["headGroupSpec"])] + [(g["groupName"], g) for g in cluster["spec"]["workerGroupSpecs"]]
    for name, g in groups:
        params, limits = g["rayStartParams"], containers(g["template"])[0]["resources"]["limits"]
        res = {"CPU": float(params.get("num-cpus", limits["cpu"])),
               "GPU": float(params.get("num-gpus", limits.get("nvidia.com/gpu", 0)))}
        if "resources" in params:  # KubeRay's form: a JSON object inside a quoted string
            res |= {k: float(v) for k, v in json.loads(json.loads(params["resources"])).items()}
        assert res["GPU"] == float(limits.get("nvidia.com/gpu", 0)), name  # Ray's GPUs are the pod's GPUs
        out += [Node(f"{name}-{i}", res) for i in range(g.get("replicas", 1))]
    return out


def test_raycluster_groups_token_and_storage():
    from abacus_ray.cluster.placement import max_concurrency

    m = manifests()
    cluster = m["RayCluster"]
    assert cluster["apiVersion"] == "ray.io/v1" and cluster["spec"]["rayVersion"] == ray.__version__
    assert [g["groupName"] for g in cluster["spec"]["workerGroupSpecs"]] == ["gpu", "cpu"]
    assert cluster["spec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] == "1"
    pods = [cluster["spec"]["headGroupSpec"]["template"]] + [g["template"] for g in cluster["spec"]["workerGroupSpecs"]]
    for pod in pods:
        token_dir = next(v["secret"]["secretName"] for v in pod["spec"]["volumes"] if v["name"] == "ray-token")
        assert token_dir == "abacus-ray-token"
        for c in containers(pod):
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert env["RAY_AUTH_MODE"] == "token"
            mount = next(v["mountPath"] for v in c["volumeMounts"] if v["name"] == "ray-token")
            assert env["RAY_AUTH_TOKEN_PATH"].startswith(mount + "/")
            assert {"name": "abacus-ray-s3", "optional": True} in [e["secretRef"] for e in c["envFrom"]]
    nodes = kuberay_nodes(cluster)
    assert max_concurrency(configs("fig10_k", ["--preset", "paper", *GPU_TRIAL]), nodes) == 1  # 1 GPU pod
    # 2 pods x 8 cpu_pool, less a slot on each for the TorchTrainer drivers' CPU slices
    assert max_concurrency(configs("fig10_k", ["--preset", "paper", *CPU_TRIAL]), nodes) == 14
    policy = m["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"]["ray.io/cluster"] == cluster["metadata"]["name"]


def test_rayjob_submits_a_sweep_that_fits_the_raycluster_with_the_token():
    from abacus_ray.cluster.placement import max_concurrency

    m = manifests()
    job = m["RayJob"]
    assert job["apiVersion"] == "ray.io/v1" and job["spec"]["clusterSelector"] == {"ray.io/cluster": "abacus-ray"}
    argv = shlex.split(job["spec"]["entrypoint"])
    image_root = next(line.split()[1] for line in (ROOT / "deploy" / "Dockerfile").read_text().splitlines()
                      if line.startswith("WORKDIR "))  # where the image holds the checkout
    assert argv[0] == "python" and argv[1].startswith(f"{image_root}/sweeps/")
    sweep = ROOT / argv[1].removeprefix(f"{image_root}/")
    assert sweep.is_file()
    flags = argv[2:]
    assert flags[flags.index("--storage") + 1].startswith("s3://")
    trials = configs(sweep.stem, flags)
    assert len(trials) == 20 and max_concurrency(trials, kuberay_nodes(m["RayCluster"])) >= 1
    submitter = containers(job["spec"]["submitterPodTemplate"])[0]
    env = {e["name"]: e.get("value") for e in submitter["env"]}
    assert env["RAY_AUTH_MODE"] == "token" and env["RAY_AUTH_TOKEN_PATH"].startswith("/etc/ray-token/")
    text = "".join(f.read_text() for f in (DEPLOY / "kuberay").glob("*.yaml"))
    assert not re.search(r"AKIA[0-9A-Z]{16}|aws_secret_access_key:", text, re.I)
