"""deploy/k8s, checked offline: every YAML parses, every overlay resolves (`kubectl kustomize`,
or kustomize_lite.py where kubectl is missing, and the two agree where both are) to objects
that the Kubernetes API types accept and that match the server (k8s_checks.py); and the checks
fail on the mistakes they are for."""

import copy
import glob
import os
import shutil
import subprocess

import pytest
import yaml

import dockerfile_checks
import k8s_checks
import kustomize_lite
import repo_facts

DEPLOY = os.path.join(repo_facts.REPO, "deploy")
K8S = os.path.join(DEPLOY, "k8s")
OVERLAYS = sorted(glob.glob(os.path.join(K8S, "overlays", "*")))
ADAPTER_RULES = os.path.join(K8S, "monitoring", "prometheus-adapter-rules.yaml")
IMAGE_UID = dockerfile_checks.image_uid(open(os.path.join(repo_facts.REPO, "Dockerfile")).read())


@pytest.fixture(scope="module")
def served():
    errors = []
    names = k8s_checks.adapter_metrics(ADAPTER_RULES, errors)
    assert errors == []
    return names


KUBECTL = shutil.which("kubectl")


def _kubectl_kustomize(path):
    """The objects `kubectl kustomize` makes of `path` (Kustomize v5)."""
    out = subprocess.run([KUBECTL, "kustomize", path], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return [o for o in yaml.safe_load_all(out.stdout) if o]


# The tests below index an overlay's objects: they come in this order of kinds (kubectl and the
# lite resolver order them differently), objects of one kind by name.
KIND_ORDER = ["Deployment", "Service", "PodDisruptionBudget", "ServiceMonitor",
              "HorizontalPodAutoscaler"]


def resolve_overlay(path):
    """An overlay's objects, by kubectl when it is there, else by the lite resolver, in
    KIND_ORDER."""
    objects = _kubectl_kustomize(path) if KUBECTL else kustomize_lite.resolve(path)
    rank = lambda o: (KIND_ORDER.index(o["kind"]) if o["kind"] in KIND_ORDER else len(KIND_ORDER),
                      o["metadata"]["name"])
    return sorted(objects, key=rank)


def _resolve(name):
    return resolve_overlay(os.path.join(K8S, "overlays", name))


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed: nothing to compare with")
@pytest.mark.parametrize("overlay", OVERLAYS, ids=os.path.basename)
def test_lite_resolver_agrees_with_kubectl(overlay):
    key = lambda o: (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
    lite = {key(o): o for o in kustomize_lite.resolve(overlay)}
    real = {key(o): o for o in _kubectl_kustomize(overlay)}
    assert lite == real


def test_every_yaml_parses():
    files = glob.glob(os.path.join(DEPLOY, "**", "*.yaml"), recursive=True)
    assert len(files) > 10
    for path in files:
        with open(path) as f:
            assert list(yaml.safe_load_all(f)), path


def test_overlays_exist():
    assert {os.path.basename(o) for o in OVERLAYS} >= {"one-gpu", "whole-node"}


@pytest.mark.parametrize("overlay", OVERLAYS, ids=os.path.basename)
def test_overlay_valid(overlay, flags, served):
    objects = resolve_overlay(overlay)
    assert k8s_checks.check_overlay(objects, flags, served, IMAGE_UID) == []


@pytest.mark.parametrize("overlay", OVERLAYS, ids=os.path.basename)
def test_images_are_the_projects_version(overlay):
    """Each overlay runs the image of this version, never `latest` (which, with the base's
    imagePullPolicy IfNotPresent, would run whatever a node pulled first)."""
    tags = [c["image"].rpartition(":")[2] for o in resolve_overlay(overlay)
            if o["kind"] == "Deployment"
            for c in o["spec"]["template"]["spec"]["containers"]]
    assert tags and all(t == repo_facts.project_version() for t in tags), tags


def test_every_component_and_base_is_used():
    used = []
    for overlay in OVERLAYS:
        kustomize_lite.resolve(overlay, used)
    used = set(used)
    every = {os.path.dirname(p) for p in glob.glob(os.path.join(K8S, "**", "kustomization.yaml"),
                                                    recursive=True)}
    assert every <= used, f"not reached from any overlay: {sorted(every - used)}"


def test_gpu_counts():
    gpus = lambda o: o[0]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"][
        "nvidia.com/gpu"]
    assert gpus(_resolve("one-gpu")) == 1
    assert gpus(_resolve("whole-node")) == 8


# --- The checks fail ------------------------------------------------------------------------


def _object(objects, kind, name):
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _server(objects):
    return objects[0]["spec"]["template"]["spec"]["containers"][0]


def _break(fn):
    objects = copy.deepcopy(_resolve("production"))
    assert objects[0]["kind"] == "Deployment"
    fn(objects)
    return objects


BREAKAGES = [
    (lambda o: _server(o).__setitem__("readinesProbe", _server(o).pop("readinessProbe")),
     "readinesProbe: unknown field"),
    (lambda o: _server(o)["ports"][0].__setitem__("containerPort", "50051"), "reads back as"),
    (lambda o: _server(o)["readinessProbe"]["grpc"].__setitem__("port", 50051), "--health_port"),
    (lambda o: _server(o)["livenessProbe"]["grpc"].__setitem__("host", "x"), "grpc.host"),
    (lambda o: _server(o)["args"].append("--no_such_flag=1"), "not a gpucompute-server flag"),
    (lambda o: _server(o)["args"].append("--streams=8"), "given twice"),
    (lambda o: _server(o)["securityContext"].pop("readOnlyRootFilesystem"), "readOnlyRoot"),
    (lambda o: _server(o)["securityContext"].__setitem__("runAsUser", 0), "runAsUser 0"),
    (lambda o: _server(o).__setitem__("volumeMounts", [
        m for m in _server(o)["volumeMounts"] if m["mountPath"] != "/tmp"]),
     "/tmp: must be on an emptyDir"),
    (lambda o: o[0]["spec"]["template"]["spec"].__setitem__("terminationGracePeriodSeconds", 30),
     "must exceed preStop"),
    (lambda o: _server(o)["resources"]["limits"].__setitem__("nvidia.com/gpu", 2),
     "requests.nvidia.com/gpu must equal"),
    (lambda o: _object(o, "Service", "gpucompute")["spec"]["ports"][1].__setitem__(
        "targetPort", "grpc"), "ServiceMonitor"),
    (lambda o: o[-1]["spec"]["metrics"][0]["pods"]["metric"].__setitem__("name", "gpucompute_x"),
     "exports no gpucompute_x"),
    (lambda o: o[-2]["spec"]["endpoints"][0].__setitem__("paht", "/metrics"), "paht"),
    (lambda o: o[0]["spec"].__setitem__("replicas", 3), "leave replicas"),
    (lambda o: _object(o, "Service", "gpucompute-headless")["spec"].__setitem__(
        "clusterIP", "10.0.0.1"), "headless"),
]


@pytest.mark.parametrize("breakage,message", BREAKAGES, ids=[m for _, m in BREAKAGES])
def test_overlay_mistakes_fail(flags, served, breakage, message):
    errors = k8s_checks.check_overlay(_break(breakage), flags, served, IMAGE_UID)
    assert any(message in e for e in errors), errors


def test_unknown_kind_fails():
    assert k8s_checks.validate_object({"apiVersion": "v1", "kind": "Pod"})


# --- The resolver follows kustomize's semantics --------------------------------------------


def test_strategic_merge():
    base = {"spec": {"replicas": 1, "containers": [{"name": "a", "image": "x", "args": ["1"]},
                                                   {"name": "b"}]}}
    patch = {"spec": {"replicas": None, "containers": [
        {"name": "a", "args": ["2"]}, {"name": "b", "$patch": "delete"}, {"name": "c"}]}}
    assert kustomize_lite.strategic_merge(base, patch) == {"spec": {"containers": [
        {"name": "c"}, {"name": "a", "image": "x", "args": ["2"]}]}}


def test_json6902():
    obj = {"a": {"list": [1, 2]}}
    ops = [{"op": "add", "path": "/a/list/-", "value": 3},
           {"op": "replace", "path": "/a/list/0", "value": 0},
           {"op": "add", "path": "/a/b~1c", "value": 1}]
    assert kustomize_lite.json6902(obj, ops) == {"a": {"list": [0, 2, 3], "b/c": 1}}


def test_patch_without_target_fails(tmp_path):
    base = os.path.join(K8S, "base")
    (tmp_path / "kustomization.yaml").write_text(
        f"resources: [{base}]\npatches: [{{path: p.yaml}}]\n")
    (tmp_path / "p.yaml").write_text("kind: Deployment\nmetadata: {name: nope}\n")
    with pytest.raises(kustomize_lite.KustomizeError, match="matches no object"):
        kustomize_lite.resolve(str(tmp_path))


def test_unsupported_field_fails(tmp_path):
    (tmp_path / "kustomization.yaml").write_text("resources: []\nnamePrefix: x-\n")
    with pytest.raises(kustomize_lite.KustomizeError, match="namePrefix"):
        kustomize_lite.resolve(str(tmp_path))
