"""Dense-model helpers for the tests: a NumPy float64 reference of a layer stack, random
layers, and the accuracy check (relative l2 error; NaN or inf never passes).

The reference is written here from the definitions, independently of the server and of
math/activation.cuh: LayerNorm with the biased variance, eps inside the square root,
optional gamma/beta; then x @ W + b; then the activation.
"""

import math

import numpy as np

from gpucompute.v1 import compute_pb2, tensor_pb2

try:
    from scipy.special import erf
except ImportError:  # the GPU machine may lack SciPy: the same function, element by element
    erf = np.vectorize(math.erf, otypes=[np.float64])

SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)

ACTIVATION_FNS = {
    "none": lambda x: x,
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x ** 3))),
    "gelu_erf": lambda x: 0.5 * x * (1.0 + erf(x / np.sqrt(2.0))),
    "relu": lambda x: np.maximum(x, 0.0),
    "silu": lambda x: x / (1.0 + np.exp(-x)),
}

# Relative l2 tolerances against the float64 reference (issue 3).
TOLERANCES = {"float32": 1e-5, "tf32": 1e-3, "bfloat16": 1e-2, "float16": 1e-2}


def reference(layers, x):
    """The stack's output for x (rows x in_features, or 1-D) in float64."""
    h = np.asarray(x, dtype=np.float64)
    for layer in layers:
        ln = layer.get("layernorm")
        if ln:
            opts = ln if isinstance(ln, dict) else {}
            eps = opts.get("eps")
            eps = 1e-5 if eps is None else float(eps)
            mean = h.mean(axis=-1, keepdims=True)
            var = ((h - mean) ** 2).mean(axis=-1, keepdims=True)  # biased
            h = (h - mean) / np.sqrt(var + eps)
            if opts.get("gamma") is not None:
                h = h * np.asarray(opts["gamma"], dtype=np.float64)
            if opts.get("beta") is not None:
                h = h + np.asarray(opts["beta"], dtype=np.float64)
        h = h @ np.asarray(layer["weight"], dtype=np.float64)
        if layer.get("bias") is not None:
            h = h + np.asarray(layer["bias"], dtype=np.float64)
        h = ACTIVATION_FNS[layer.get("activation") or "none"](h)
    return h


def rel_l2(actual, expected):
    """||actual - expected||_2 / ||expected||_2 in float64."""
    a = np.asarray(actual, dtype=np.float64)
    e = np.asarray(expected, dtype=np.float64)
    return float(np.linalg.norm(a - e) / np.linalg.norm(e))


def check(actual, expected, tol, what=""):
    """Asserts same shape, all finite (no NaN ever passes), and relative l2 error <= tol.
    Returns the error."""
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected), f"{what}: shape {actual.shape} != {np.shape(expected)}"
    assert not np.isnan(actual).any(), f"{what}: NaN in the result"
    assert np.isfinite(actual).all(), f"{what}: inf in the result"
    err = rel_l2(actual, expected)
    assert err <= tol, f"{what}: relative l2 error {err:.3e} > {tol:.0e}"
    return err


def random_layer(rng, n_in, n_out, *, activation="none", layernorm=False, bias=True,
                 gamma_beta=False, eps=None, dtype=np.float32):
    """One layer dict with weights ~ N(0, 1/n_in), bias ~ N(0, 0.1^2)."""
    layer = {"weight": (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(dtype),
             "activation": activation}
    if bias:
        layer["bias"] = (0.1 * rng.standard_normal(n_out)).astype(dtype)
    if layernorm:
        if gamma_beta or eps is not None:
            ln = {}
            if eps is not None:
                ln["eps"] = eps
            if gamma_beta:
                ln["gamma"] = (1.0 + 0.1 * rng.standard_normal(n_in)).astype(dtype)
                ln["beta"] = (0.1 * rng.standard_normal(n_in)).astype(dtype)
            layer["layernorm"] = ln
        else:
            layer["layernorm"] = True
    return layer


def random_stack(rng, sizes, activations, layernorms, **kwargs):
    """Layers sizes[0] -> sizes[1] -> ...; activations/layernorms one per layer."""
    return [random_layer(rng, sizes[i], sizes[i + 1], activation=activations[i],
                         layernorm=layernorms[i], **kwargs)
            for i in range(len(sizes) - 1)]


def upload_header(name, n_in=4, n_out=3):
    """The header message of a LoadModel stream by hand: one float32 layer, n_in x n_out."""
    return compute_pb2.LoadModelChunk(header=compute_pb2.ModelHeader(
        name=name, dtype=tensor_pb2.FLOAT32, layers=[compute_pb2.LayerHeader(
            weight=compute_pb2.TensorHeader(dtype=tensor_pb2.FLOAT32, shape=[n_in, n_out]))]))


def upload_chunk(offset, data, layer=0):
    """A weight chunk message of a LoadModel stream by hand."""
    return compute_pb2.LoadModelChunk(chunk=compute_pb2.TensorChunk(
        layer=layer, tensor=compute_pb2.LAYER_TENSOR_WEIGHT, offset=offset, data=data))
