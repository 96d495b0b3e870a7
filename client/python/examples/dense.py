#!/usr/bin/python3
"""A small MLP resident on a gpucompute server, checked against NumPy.

    PYTHONPATH=build/python /usr/bin/python3 client/python/examples/dense.py \
        --target=localhost:50051 --dtype=bfloat16

Loads 1024 -> 4096 (LayerNorm, gelu_tanh) -> 1024 (no activation), runs a batch of rows,
prints the relative l2 error against a float64 NumPy forward pass and the server's timings,
then unloads the model.
"""

import argparse

import numpy as np

import gpucompute


def forward(layers, x):
    """The same stack in float64."""
    h = np.asarray(x, np.float64)
    for layer in layers:
        if layer.get("layernorm"):
            h = (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5)
        h = h @ layer["weight"].astype(np.float64) + layer["bias"]
        if layer.get("activation") == "gelu_tanh":
            h = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h ** 3)))
    return h


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="localhost:50051")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--rows", type=int, default=256)
    args = parser.parse_args()

    rng = np.random.default_rng()
    layers = [
        {"weight": (rng.standard_normal((1024, 4096)) / 32).astype(np.float32),
         "bias": (0.1 * rng.standard_normal(4096)).astype(np.float32),
         "layernorm": True, "activation": "gelu_tanh"},
        {"weight": (rng.standard_normal((4096, 1024)) / 64).astype(np.float32),
         "bias": np.zeros(1024, np.float32)},
    ]
    name = f"example-mlp-{rng.integers(1 << 30)}"
    with gpucompute.Client(args.target) as client:
        info = client.load_model(name, layers, dtype=args.dtype)
        print(f"loaded {name}: {info['dtype']}, {info['device_bytes'] / 2**20:.1f} MiB resident")
        try:
            x = rng.standard_normal((args.rows, 1024)).astype(np.float32)
            y = client.dense(name, x)
            ref = forward(layers, x)
            err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
            print(f"{args.rows} rows -> {y.shape} {y.dtype}: relative l2 error {err:.2e}; "
                  f"server {client.last_timings}")
        finally:
            client.unload_model(name)


if __name__ == "__main__":
    main()
