"""Offline checks of deploy/k8s: each object against the Kubernetes API types (python3-kubernetes'
models), and each resolved overlay against the server it runs (flags, ports, metrics).

Every function returns a list of error strings; empty means the check passed."""

import copy
import json
import os
import re

import kubernetes.client
import yaml

import repo_facts

# (apiVersion, kind) -> python3-kubernetes model. Debian 12's python3-kubernetes is 22.6
# (Kubernetes 1.22): it predates autoscaling/v2 (1.23), so the HPA is read with the v2beta2
# model, whose schema v2 kept unchanged; and Probe.grpc (1.24), which _take_grpc_probes checks.
_MODELS = {
    ("apps/v1", "Deployment"): "V1Deployment",
    ("v1", "Service"): "V1Service",
    ("v1", "ConfigMap"): "V1ConfigMap",
    ("v1", "Secret"): "V1Secret",
    ("policy/v1", "PodDisruptionBudget"): "V1PodDisruptionBudget",
    ("autoscaling/v2", "HorizontalPodAutoscaler"): "V2beta2HorizontalPodAutoscaler",
}
_PROBES = ("startupProbe", "livenessProbe", "readinessProbe")
_COMPUTE_SERVICE = "gpucompute.v1.Compute"
_GPU = "nvidia.com/gpu"

_api = kubernetes.client.ApiClient()


class _Response:  # what ApiClient.deserialize reads
    def __init__(self, obj):
        self.data = json.dumps(obj)


def _read_back(obj, model, path, errors):
    """Deserialises `obj` into `model`, serialises it again, and reports every field that did
    not survive: the models drop unknown (misspelt, misplaced) fields silently."""
    try:
        parsed = _api.deserialize(_Response(obj), model)
    except (ValueError, TypeError) as e:  # a required field missing, a wrong type
        errors.append(f"{path}: {e}")
        return
    _diff(obj, _api.sanitize_for_serialization(parsed), path, errors)


def _diff(want, got, path, errors):
    if want is None:
        return
    if isinstance(want, dict):
        if not isinstance(got, dict):
            errors.append(f"{path}: expected an object, the API type has {got!r}")
            return
        for key, value in want.items():
            if key not in got and value is not None:
                errors.append(f"{path}.{key}: unknown field")
            else:
                _diff(value, got.get(key), f"{path}.{key}", errors)
    elif isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            errors.append(f"{path}: list read back as {got!r}")
            return
        for i, (w, g) in enumerate(zip(want, got)):
            _diff(w, g, f"{path}[{i}]", errors)
    elif want != got or isinstance(want, bool) != isinstance(got, bool):
        # Quantities (cpu: 4, nvidia.com/gpu: 1) are strings in the models; the API also takes
        # numbers for them.
        if isinstance(want, (int, float)) and not isinstance(want, bool) and got == str(want):
            return
        errors.append(f"{path}: {want!r} reads back as {got!r}")


def _pod_spec(obj):
    return obj.get("spec", {}).get("template", {}).get("spec", {})


def _take_grpc_probes(obj, path, errors):
    """Removes the grpc handlers from `obj`'s probes (the 1.22 models lack them) after checking
    them by hand against core/v1 GRPCAction: port (int, required), service (string)."""
    for i, c in enumerate(_pod_spec(obj).get("containers", [])):
        for name in _PROBES:
            probe = c.get(name)
            if not isinstance(probe, dict) or "grpc" not in probe:
                continue
            where = f"{path}.spec.template.spec.containers[{i}].{name}.grpc"
            grpc = probe.pop("grpc")
            if not isinstance(grpc, dict):
                errors.append(f"{where}: expected an object")
                continue
            for key in set(grpc) - {"port", "service"}:
                errors.append(f"{where}.{key}: unknown field")
            port = grpc.get("port")
            if type(port) is not int or not 0 < port < 65536:
                errors.append(f"{where}.port: {port!r} is not a port number")
            if not isinstance(grpc.get("service", ""), str):
                errors.append(f"{where}.service: {grpc['service']!r} is not a string")
            if set(probe) & {"exec", "httpGet", "tcpSocket"}:
                errors.append(f"{where}: a probe has one handler")


def _check_service_monitor(obj, path, errors):
    """monitoring.coreos.com/v1 ServiceMonitor: a CRD, so no model; the fields deploy/ uses (and
    their neighbours) from the Prometheus Operator's API reference."""
    for key in set(obj) - {"apiVersion", "kind", "metadata", "spec"}:
        errors.append(f"{path}.{key}: unknown field")
    _read_back(obj.get("metadata", {}), "V1ObjectMeta", f"{path}.metadata", errors)
    spec = obj.get("spec", {})
    allowed = {"selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels",
               "podTargetLabels", "sampleLimit"}
    for key in set(spec) - allowed:
        errors.append(f"{path}.spec.{key}: unknown field")
    if "selector" not in spec:
        errors.append(f"{path}.spec.selector: required")
    _read_back(spec.get("selector", {}), "V1LabelSelector", f"{path}.spec.selector", errors)
    endpoints = spec.get("endpoints")
    if not isinstance(endpoints, list) or not endpoints:
        errors.append(f"{path}.spec.endpoints: a non-empty list is required")
        return
    allowed = {"port", "targetPort", "path", "scheme", "interval", "scrapeTimeout", "honorLabels",
               "relabelings", "metricRelabelings", "tlsConfig", "bearerTokenSecret", "params"}
    for i, e in enumerate(endpoints):
        where = f"{path}.spec.endpoints[{i}]"
        for key in set(e) - allowed:
            errors.append(f"{where}.{key}: unknown field")
        if not isinstance(e.get("port"), str):
            errors.append(f"{where}.port: the Service port's name is required")
        if not str(e.get("path", "/metrics")).startswith("/"):
            errors.append(f"{where}.path: must start with /")
        for key in ("interval", "scrapeTimeout"):
            if key in e and not re.fullmatch(r"\d+(ms|s|m|h)", str(e[key])):
                errors.append(f"{where}.{key}: {e[key]!r} is not a duration")


def validate_object(obj):
    """Schema errors of one manifest object."""
    if not isinstance(obj, dict):
        return [f"not an object: {obj!r}"]
    kind, name = obj.get("kind"), obj.get("metadata", {}).get("name")
    path = f"{kind}/{name}"
    errors = []
    if (obj.get("apiVersion"), kind) == ("monitoring.coreos.com/v1", "ServiceMonitor"):
        _check_service_monitor(obj, path, errors)
        return errors
    model = _MODELS.get((obj.get("apiVersion"), kind))
    if model is None:
        return [f"{path}: no schema for {obj.get('apiVersion')} {kind}"]
    if not name:
        errors.append(f"{path}: metadata.name is required")
    obj = copy.deepcopy(obj)
    _take_grpc_probes(obj, path, errors)
    _read_back(obj, model, path, errors)
    return errors


# --- Cross-checks of a resolved overlay against the server ---------------------------------


def _server_drain_seconds():
    """The grace Server::Shutdown gives in-flight calls on SIGTERM (server/server.h)."""
    with open(os.path.join(repo_facts.REPO, "server", "server.h")) as f:
        return int(re.search(r"void Shutdown\(absl::Duration grace = absl::Seconds\((\d+)\)\)",
                             f.read()).group(1))


def _port(address):
    return int(address.rsplit(":", 1)[1])


def _selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def adapter_metrics(rules_path, errors):
    """Custom metric names the prometheus-adapter rules serve (Helm values: rules.custom)."""
    with open(rules_path) as f:
        rules = yaml.safe_load(f).get("rules", {}).get("custom", [])
    served = set()
    for i, rule in enumerate(rules):
        series = re.match(r"(\w+)", rule.get("seriesQuery", "")).group(1)
        if series not in repo_facts.metric_names():
            errors.append(f"{rules_path}: rule {i} reads {series}, not a server metric")
        overrides = rule.get("resources", {}).get("overrides", {})
        if {v.get("resource") for v in overrides.values()} != {"namespace", "pod"}:
            errors.append(f"{rules_path}: rule {i} must map namespace and pod (a Pods metric)")
        name = rule.get("name", {})
        if not re.fullmatch(name.get("matches", "^$"), series):
            errors.append(f"{rules_path}: rule {i}'s name.matches misses {series}")
        served.add(name.get("as") or series)
        if "<<.LabelMatchers>>" not in rule.get("metricsQuery", ""):
            errors.append(f"{rules_path}: rule {i}'s metricsQuery ignores <<.LabelMatchers>>")
    return served


def check_overlay(objects, flags, adapter_served=(), image_uid=None):
    """Cross-checks of one resolved overlay: the Deployment against the server's flags and
    ports, and every Service, PDB, ServiceMonitor and HPA against the Deployment."""
    errors = []
    for obj in objects:
        errors += validate_object(obj)
    deployments = [o for o in objects if o.get("kind") == "Deployment"]
    if len(deployments) != 1:
        return errors + [f"expected one Deployment, found {len(deployments)}"]
    dep = deployments[0]
    pod = _pod_spec(dep)
    pod_labels = dep["spec"]["template"]["metadata"].get("labels", {})
    containers = pod.get("containers", [])
    if len(containers) != 1:
        return errors + ["expected one container (the server)"]
    c = containers[0]

    # Flags: all defined by the server, none twice, the ports and paths the rest relies on.
    args, names = repo_facts.flag_args(c.get("args", []))
    for n in names:
        if n not in flags:
            errors.append(f"args: --{n} is not a gpucompute-server flag")
    for n in {n for n in names if names.count(n) > 1}:
        errors.append(f"args: --{n} given twice")
    for n in ("address", "health_port", "metrics_port", "kernel_cache_dir"):
        if not args.get(n):
            errors.append(f"args: --{n}=... is required")
    if errors:
        return errors
    grpc_port, health_port = _port(args["address"]), int(args["health_port"])
    metrics_port = int(args["metrics_port"])
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    want_ports = {"grpc": grpc_port, "health": health_port, "metrics": metrics_port}
    if ports != want_ports:
        errors.append(f"container ports {ports} differ from the args' {want_ports}")

    # Probes: kubelet's gRPC probes on the plaintext health port.
    for name in _PROBES:
        grpc = c.get(name, {}).get("grpc")
        if grpc is None:
            errors.append(f"{name}: a grpc probe is required")
        elif grpc.get("port") != health_port:
            errors.append(f"{name}: port {grpc.get('port')} is not --health_port={health_port}")
    if c.get("readinessProbe", {}).get("grpc", {}).get("service") != _COMPUTE_SERVICE:
        errors.append(f"readinessProbe: service must be {_COMPUTE_SERVICE}")
    if c.get("livenessProbe", {}).get("grpc", {}).get("service", "") != "":
        errors.append("livenessProbe: service must be '' (the server as a whole)")

    # Non-root, read-only, no privileges.
    psc, sc = pod.get("securityContext", {}), c.get("securityContext", {})
    uid = sc.get("runAsUser", psc.get("runAsUser"))
    if not (psc.get("runAsNonRoot") or sc.get("runAsNonRoot")) or not uid:
        errors.append("securityContext: runAsNonRoot and a non-zero runAsUser are required")
    if image_uid is not None and uid != image_uid:
        errors.append(f"securityContext: runAsUser {uid} is not the image's USER {image_uid}")
    if sc.get("allowPrivilegeEscalation") is not False:
        errors.append("securityContext: allowPrivilegeEscalation must be false")
    if sc.get("readOnlyRootFilesystem") is not True:
        errors.append("securityContext: readOnlyRootFilesystem must be true")
    if "ALL" not in sc.get("capabilities", {}).get("drop", []):
        errors.append("securityContext: capabilities must drop ALL")
    seccomp = sc.get("seccompProfile", psc.get("seccompProfile", {}))
    if seccomp.get("type") != "RuntimeDefault":
        errors.append("securityContext: seccompProfile must be RuntimeDefault")

    # GPUs, placement, resources.
    res = c.get("resources", {})
    gpus = res.get("limits", {}).get(_GPU)
    if type(gpus) is not int or gpus < 1:
        errors.append(f"resources.limits.{_GPU}: a positive integer is required")
    elif res.get("requests", {}).get(_GPU, gpus) != gpus:
        errors.append(f"resources: requests.{_GPU} must equal limits")
    elif gpus > 1 and "replicate_models" not in args:
        errors.append(f"{gpus} GPUs per pod without --replicate_models")
    for kind in ("requests", "limits"):
        for r in ("cpu", "memory"):
            if r not in res.get(kind, {}):
                errors.append(f"resources.{kind}.{r} is required")
    if pod.get("nodeSelector", {}).get("nvidia.com/gpu.present") != "true":
        errors.append("nodeSelector: nvidia.com/gpu.present: 'true' is required")
    toleration = {"key": _GPU, "operator": "Exists", "effect": "NoSchedule"}
    if toleration not in pod.get("tolerations", []):
        errors.append(f"tolerations: {_GPU} Exists NoSchedule is required")

    # Writable paths: the kernel cache, the driver's JIT cache and /tmp on emptyDirs.
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
    for m in c.get("volumeMounts", []):
        if m["name"] not in volumes:
            errors.append(f"volumeMount {m['mountPath']}: no volume {m['name']}")
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    for path in (args["kernel_cache_dir"], env.get("CUDA_CACHE_PATH", "/tmp"), "/tmp"):
        mount = next((m for m in mounts if path == m or path.startswith(m + "/")), None)
        if mount is None or "emptyDir" not in volumes.get(mounts[mount], {}):
            errors.append(f"{path}: must be on an emptyDir (the root filesystem is read-only)")
    for a in ("--tls_cert_file", "--tls_key_file", "--tls_client_ca_file", "--auth_token_file"):
        path = args.get(a[2:])
        if path and not any(path.startswith(m + "/") for m in mounts):
            errors.append(f"{a}={path}: not on a mounted volume")

    # Graceful termination: preStop, then the server's drain, within the grace period.
    command = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    if len(command) != 2 or command[0] != "sleep" or not command[1].isdigit():
        errors.append("lifecycle.preStop: exec ['sleep', SECONDS] is required")
    else:
        need = int(command[1]) + _server_drain_seconds()
        if pod.get("terminationGracePeriodSeconds", 30) <= need:
            errors.append(f"terminationGracePeriodSeconds must exceed preStop + drain = {need}")

    annotations = dep["spec"]["template"]["metadata"].get("annotations", {})
    if annotations.get("prometheus.io/port", str(metrics_port)) != str(metrics_port):
        errors.append("annotation prometheus.io/port is not --metrics_port")

    # Services, PDB, ServiceMonitor, HPA point at this Deployment's pods and ports.
    named = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}

    def container_port(service_port):  # targetPort by name or number, defaulting to port
        target = service_port.get("targetPort", service_port["port"])
        return named.get(target) if isinstance(target, str) else target

    services = [o for o in objects if o.get("kind") == "Service"]
    for s in services:
        if not _selects(s["spec"].get("selector"), pod_labels):
            errors.append(f"Service/{s['metadata']['name']}: selector misses the pods")
        for p in s["spec"].get("ports", []):
            if container_port(p) not in named.values():
                errors.append(f"Service/{s['metadata']['name']}: port {p['port']} reaches no "
                              "container port")
    if not any(s["spec"].get("clusterIP") == "None" for s in services):
        errors.append("a headless Service (clusterIP: None) is required for dns:/// balancing")
    for pdb in (o for o in objects if o.get("kind") == "PodDisruptionBudget"):
        if not _selects(pdb["spec"].get("selector", {}).get("matchLabels"), pod_labels):
            errors.append("PodDisruptionBudget: selector misses the pods")
    for sm in (o for o in objects if o.get("kind") == "ServiceMonitor"):
        selector = sm["spec"].get("selector", {}).get("matchLabels")
        for e in sm["spec"].get("endpoints", []):
            hits = [p for s in services if _selects(selector, s["metadata"].get("labels", {}))
                    for p in s["spec"].get("ports", []) if p.get("name") == e.get("port")]
            if not hits or any(container_port(p) != metrics_port for p in hits):
                errors.append(f"ServiceMonitor: port {e.get('port')} does not reach "
                              f"--metrics_port={metrics_port}")
            if e.get("path", "/metrics") != "/metrics":
                errors.append("ServiceMonitor: the server serves /metrics")
    for hpa in (o for o in objects if o.get("kind") == "HorizontalPodAutoscaler"):
        ref = hpa["spec"].get("scaleTargetRef", {})
        if (ref.get("kind"), ref.get("name")) != ("Deployment", dep["metadata"]["name"]):
            errors.append("HorizontalPodAutoscaler: scaleTargetRef is not the Deployment")
        if "replicas" in dep["spec"]:
            errors.append("HorizontalPodAutoscaler: the Deployment must leave replicas to it")
        for m in hpa["spec"].get("metrics", []):
            name = m.get("pods", {}).get("metric", {}).get("name")
            if m.get("type") != "Pods" or name is None:
                continue
            if name not in repo_facts.metric_names():
                errors.append(f"HorizontalPodAutoscaler: the server exports no {name}")
            if name not in adapter_served:
                errors.append(f"HorizontalPodAutoscaler: prometheus-adapter serves no {name}")
    return errors
