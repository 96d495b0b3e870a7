"""Offline checks of the Dockerfile (no Docker engine on CI): it builds with CI's own scripts,
copies only what exists or what the install produced, and runs the server as CI built it,
non-root, with its kernel cache on a volume and a health check through `gpucompute health`.

check() returns a list of error strings; empty means the check passed."""

import fnmatch
import json
import os
import re
import shlex

import repo_facts

# The server image holds these and nothing else of ours.
RUNTIME_BINARIES = {"gpucompute-server", "gpucompute"}
# What the build stage may run that CI does not: apt's cache cleanup, the library copy.
_BUILD_TOOLS = re.compile(r"(\./)?scripts/|cmake\b|ninja\b|make\b|[gc]\+\+|gcc\b|nvcc\b")
# .dockerignore must keep these out of the context (large, or private to this checkout).
IGNORED = ("build*/", ".device/", ".git/")


def parse(text):
    """[(INSTRUCTION, arguments)], continuation lines joined, comments dropped."""
    out, current = [], ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not current):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        word, _, rest = current.partition(" ")
        out.append((word.upper(), rest.strip()))
        current = ""
    return out


def _stages(instructions):
    """Build stages as dicts: image (ARG defaults substituted), name, and instructions."""
    args, stages = {}, []
    for word, rest in instructions:
        if word == "ARG" and not stages:
            name, _, value = rest.partition("=")
            args[name] = value
        elif word == "FROM":
            image = re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m[1] or m[2], ""), rest)
            parts = image.split()
            name = parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None
            stages.append({"image": parts[0], "name": name, "body": []})
        elif stages:
            stages[-1]["body"].append((word, rest))
    return stages


def _exec_form(rest, what, errors):
    try:
        value = json.loads(rest)
    except ValueError:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors.append(f"{what}: use the exec form [\"...\"] (no shell in between)")
        return []
    return value


def _copy_sources(rest):
    """(--from stage or None, [sources]) of a COPY."""
    words = shlex.split(rest)
    options = [w for w in words if w.startswith("--")]
    paths = [w for w in words if not w.startswith("--")]
    stage = next((o.split("=", 1)[1] for o in options if o.startswith("--from=")), None)
    return stage, paths[:-1]


def _ignored(path, patterns):
    """Whether .dockerignore's `patterns` exclude `path` or a folder above it."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for p in patterns:
        p = p.rstrip("/")
        for prefix in prefixes:
            if fnmatch.fnmatch(prefix, p) or (p.startswith("**/") and
                                              fnmatch.fnmatch(prefix.split("/")[-1], p[3:])):
                return True
    return False


def check(text, dockerignore, flags, repo=repo_facts.REPO):
    """Errors of Dockerfile `text` with .dockerignore `dockerignore` (None: missing)."""
    errors = []
    stages = _stages(parse(text))
    if len(stages) < 2:
        return [f"expected a build stage and the server's, found {len(stages)} stage(s)"]
    build, runtime = stages[0], stages[-1]  # between them: tool images (--target load)
    m = re.fullmatch(r"nvidia/cuda:(13\.0\.\d+)-devel-(ubuntu[\d.]+)", build["image"])
    if not m or build["name"] is None:
        errors.append(f"build stage: {build['image']} is not nvidia/cuda:13.0.x-devel-ubuntu* "
                      "AS NAME")
    elif runtime["image"] != f"nvidia/cuda:{m[1]}-runtime-{m[2]}":
        errors.append(f"runtime stage: {runtime['image']} is not the build image's runtime twin")

    # The build stage runs what CI runs (scripts/test.sh) and nothing else that compiles.
    steps = []
    for word, rest in build["body"]:
        if word == "RUN":
            for cmd in re.split(r"&&|\|", rest):
                cmd = " ".join(cmd.split())
                if _BUILD_TOOLS.match(cmd):
                    steps.append(re.sub(r"^\./", "", cmd))
    prefix = None
    if (len(steps) == 3 and steps[:2] == ["scripts/install-deps.sh",
                                          "scripts/build.sh -DBUILD_TESTING=OFF"]
            and re.fullmatch(r"cmake --install build --prefix (/\S+)", steps[2])):
        prefix = steps[2].split()[-1]
    else:
        errors.append(f"build stage: runs {steps}, not exactly scripts/install-deps.sh, "
                      "scripts/build.sh -DBUILD_TESTING=OFF, cmake --install build --prefix DIR")
    with open(os.path.join(repo, "scripts", "test.sh")) as f:
        ci = f.read()
    for script in ("./scripts/install-deps.sh", "./scripts/build.sh"):
        if script not in ci:
            errors.append(f"scripts/test.sh (CI) no longer runs {script}: CI does not prove "
                          "the image")
    with open(os.path.join(repo, "scripts", "build.sh")) as f:
        if not re.search(r'^cmake --preset release "\$@"$', f.read(), re.M):
            errors.append("scripts/build.sh: does not configure with cmake --preset release \"$@\"")

    # COPY sources exist in the context (and are not ignored), or come from the install.
    if dockerignore is None:
        errors.append(".dockerignore is missing")
        patterns = []
    else:
        patterns = [l.strip() for l in dockerignore.splitlines()
                    if l.strip() and not l.startswith("#")]
        for want in IGNORED:
            if want not in patterns:
                errors.append(f".dockerignore: {want} is not excluded")
    build_runs = " ".join(rest for word, rest in build["body"] if word == "RUN")
    binaries = set()  # what the server image copies out of bin/
    for stage in stages:
        for word, rest in stage["body"]:
            if word != "COPY":
                continue
            source_stage, sources = _copy_sources(rest)
            for src in sources:
                if source_stage is None:
                    if src != "." and not os.path.exists(os.path.join(repo, src)):
                        errors.append(f"COPY {src}: not in the repository")
                    elif src != "." and _ignored(src, patterns):
                        errors.append(f"COPY {src}: excluded by .dockerignore")
                elif source_stage != build["name"]:
                    errors.append(f"COPY --from={source_stage}: no such stage")
                elif prefix and src.startswith(prefix + "/bin/"):
                    name = src[len(prefix) + 5:]
                    if name not in repo_facts.installed_executables():
                        errors.append(f"COPY {src}: {name} is not an executable the build "
                                      "installs into bin/")
                    if stage is runtime:
                        binaries.add(name)
                elif not (prefix and src.startswith(prefix + "/") and
                          f"mkdir -p {src.rstrip('/')}" in build_runs):
                    errors.append(f"COPY --from={source_stage} {src}: neither installed nor made "
                                  "by a build-stage RUN")
    if binaries != RUNTIME_BINARIES:
        errors.append(f"runtime stage: copies {sorted(binaries)}, not {sorted(RUNTIME_BINARIES)}")

    # Runtime: non-root, server flags, cache volume, health check.
    body = {}
    for word, rest in runtime["body"]:
        body[word] = rest  # the last of each counts, as in Docker
    user = body.get("USER", "root").split(":")[0]
    if not user.isdigit() or int(user) == 0:
        errors.append(f"USER {user}: must be a numeric non-root uid (runAsNonRoot checks it)")
    if _exec_form(body.get("ENTRYPOINT", ""), "ENTRYPOINT", errors) != ["gpucompute-server"]:
        errors.append('ENTRYPOINT: must be ["gpucompute-server"], flags in CMD')
    cmd = _exec_form(body.get("CMD", ""), "CMD", errors)
    args, names = repo_facts.flag_args(cmd)
    for n in names:
        if n not in flags:
            errors.append(f"CMD: --{n} is not a gpucompute-server flag")
    volume = body.get("VOLUME", "")
    volumes = json.loads(volume) if volume.startswith("[") else volume.split()
    cache = args.get("kernel_cache_dir")
    if not cache or cache not in volumes:
        errors.append(f"VOLUME {volumes}: does not hold --kernel_cache_dir={cache}")
    hc = body.get("HEALTHCHECK", "")
    m = re.search(r"(?:^|\s)CMD\s+(.*)$", hc)
    hc_cmd = _exec_form(m[1] if m else "", "HEALTHCHECK", errors)
    if hc_cmd[:2] != ["gpucompute", "health"]:
        errors.append("HEALTHCHECK: must run gpucompute health")
    elif "--address" not in hc_cmd or not args.get("health_port"):
        errors.append("HEALTHCHECK: needs --address and the server's --health_port")
    else:
        address = hc_cmd[hc_cmd.index("--address") + 1]
        if address.rsplit(":", 1)[-1] != args["health_port"]:
            errors.append(f"HEALTHCHECK: {address} is not --health_port={args['health_port']}")
    return errors


def image_uid(text):
    """The runtime stage's USER uid, for the Kubernetes manifests' runAsUser."""
    user = [rest for word, rest in _stages(parse(text))[-1]["body"] if word == "USER"]
    return int(user[-1].split(":")[0]) if user and user[-1].split(":")[0].isdigit() else None
