#!/usr/bin/env python3
"""Fails when a source file includes a header of a layer it may not depend on.

The project's layers, lowest first (docs/design/README.md, "Layers"): each may include its own
headers and those of the layers it is listed over, directly or through them, and nothing
else of the project. Headers outside these folders (Abseil, gRPC, CUDA, the generated protobuf
code under its proto/ path) are not checked. Run from anywhere; exits 1 and lists every
offending include, or prints a summary and exits 0.

    scripts/check-layers.py [REPO]
"""
import os
import re
import sys

# layer: the layers it is built on (its own headers are always allowed).
LAYERS = {
    "math": [],                       # host/device math: Philox, Lomb-Scargle, activations, limits
    "common": ["math"],               # host utilities of every program: status macros, types, logs
    "proto": ["common"],              # the API (generated code) and its wire helpers
    "kernels": ["math"],              # device code
    "server/metrics": ["common"],
    "server/device": ["kernels", "common"],  # contexts, streams, memory, library handles, kernel cache
    "server/ops": ["server/device", "server/metrics"],  # each operation: semantics, CPU and CUDA code
    "server/runtime": ["server/ops"],  # scheduler, tensor store, shared memory, the backends
    "server/transport": ["server/metrics", "proto"],  # listeners, TLS, tokens, callers, health port
    "server/service": ["server/runtime", "server/transport"],  # the gRPC services
    "server/front": ["server/runtime", "server/transport"],    # worker mode's proxy
    "client/cpp": ["proto"],
    "client/cli": ["client/cpp"],
    "client/load": ["client/cpp"],
    # The composition roots: the server program (main.cc, server.cc) wires the layers together
    # and reads the CLI's model manifests.
    "server": ["server/service", "server/front", "client/cli"],
}
# Generated or installed include prefixes that belong to a layer.
ALIASES = {"gpucompute/v1/": "proto", "wire/": "proto"}
SOURCE = re.compile(r"\.(h|cc|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def allowed(layer):
    """The layers `layer` may include: itself and everything below it."""
    seen, todo = {layer}, list(LAYERS[layer])
    while todo:
        below = todo.pop()
        if below not in seen:
            seen.add(below)
            todo.extend(LAYERS[below])
    return seen


def layer_of(path):
    """The layer of a repository path (longest folder prefix), or None."""
    best = None
    for layer in LAYERS:
        if path.startswith(layer + "/") and (best is None or len(layer) > len(best)):
            best = layer
    return best


def included_layer(repo, source, name):
    for prefix, layer in ALIASES.items():
        if name.startswith(prefix):
            return layer
    beside = os.path.normpath(os.path.join(os.path.dirname(source), name))
    if os.path.exists(os.path.join(repo, beside)):
        return layer_of(beside)
    return layer_of(name)


def check(repo):
    assert all(b in LAYERS for deps in LAYERS.values() for b in deps), "unknown layer"
    for layer in LAYERS:  # no cycles: no layer reaches itself
        assert all(layer not in allowed(b) for b in LAYERS[layer]), f"cycle through {layer}"
    problems, files = [], 0
    for top in sorted({l.split("/")[0] for l in LAYERS}):
        for root, _, names in os.walk(os.path.join(repo, top)):
            for name in sorted(names):
                if not SOURCE.search(name):
                    continue
                source = os.path.relpath(os.path.join(root, name), repo)
                layer = layer_of(source)
                if layer is None:
                    continue
                files += 1
                ok = allowed(layer)
                with open(os.path.join(repo, source), errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = included_layer(repo, source, m.group(1))
                        if target is not None and target not in ok:
                            problems.append(f"{source}:{number}: {layer} includes {m.group(1)} "
                                            f"({target}), not below it")
    return problems, files


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    problems, files = check(repo)
    for p in problems:
        print(p)
    if problems:
        print(f"check-layers: {len(problems)} include(s) against the layers", file=sys.stderr)
        return 1
    print(f"check-layers: {files} files, every include points down ({len(LAYERS)} layers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
