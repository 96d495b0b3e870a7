"""Dense models: encoding layers for ``LoadModel`` and decoding ``ModelInfo``.

A model is a stack of layers, each ``y = activation(LayerNorm(x) @ W + b)`` with ``W`` of shape
``(in_features, out_features)`` and LayerNorm's biased variance. ``Client.load_model`` streams
the header and then every tensor in chunks (``chunks``), so that models of many GiB load under
any message size limit. Only what is needed to encode a layer is checked here; the server
validates shapes across layers and names the offending field.
"""

import numpy as np

from gpucompute.v1 import compute_pb2, tensor_pb2

ACTIVATIONS = {
    "none": compute_pb2.ACTIVATION_NONE,
    "gelu_tanh": compute_pb2.ACTIVATION_GELU_TANH,
    "gelu_erf": compute_pb2.ACTIVATION_GELU_ERF,
    "relu": compute_pb2.ACTIVATION_RELU,
    "silu": compute_pb2.ACTIVATION_SILU,
}
_ACTIVATION_NAMES = {code: name for name, code in ACTIVATIONS.items()}

MODEL_DTYPES = {
    "float32": tensor_pb2.FLOAT32,
    "float16": tensor_pb2.FLOAT16,
    "bfloat16": tensor_pb2.BFLOAT16,
}

# Tensor bytes per LoadModelChunk: 4 MiB less 1 KiB, so that a chunk with its framing stays
# under gRPC's default 4 MiB message limit.
DEFAULT_CHUNK_BYTES = (4 << 20) - 1024

_LAYER_KEYS = {"weight", "bias", "layernorm", "activation"}
_LAYERNORM_KEYS = {"eps", "gamma", "beta"}
# Sent as they are, little-endian; anything else (ints, bools, ...) is sent as float32.
# Keyed by either byte order: dtype -> (DType, the little-endian dtype it travels as).
_WIRE_FLOATS = {
    dt.newbyteorder(order): (code, dt.newbyteorder("<"))
    for dt, code in ((np.dtype("float16"), tensor_pb2.FLOAT16),
                     (np.dtype("float32"), tensor_pb2.FLOAT32),
                     (np.dtype("float64"), tensor_pb2.FLOAT64))
    for order in "<>"
}


def model_dtype(dtype):
    """``"bfloat16"``, ``"float16"`` or ``"float32"`` (or a NumPy float16/float32 dtype) ->
    the ``DType`` enum value. Raises ``ValueError`` for anything else."""
    name = dtype if isinstance(dtype, str) else getattr(np.dtype(dtype), "name", str(dtype))
    try:
        return MODEL_DTYPES[str(name).lower()]
    except KeyError:
        raise ValueError(
            f"model dtype {dtype!r}: expected one of {sorted(MODEL_DTYPES)}") from None


def activation_code(name):
    """Activation name (``none``, ``gelu_tanh``, ``gelu_erf``, ``relu``, ``silu``; None means
    none) -> the ``Activation`` enum value. Raises ``ValueError`` for anything else."""
    if name is None:
        return compute_pb2.ACTIVATION_NONE
    try:
        return ACTIVATIONS[str(name).lower()]
    except KeyError:
        raise ValueError(
            f"activation {name!r}: expected one of {sorted(ACTIVATIONS)}") from None


def wire_array(array):
    """``(DType, little-endian C-ordered array)`` as a tensor travels: float16/32/64 as they
    are, an ``ml_dtypes.bfloat16`` array as BFLOAT16 bits, anything else as float32."""
    a = np.asarray(array)
    wire = _WIRE_FLOATS.get(a.dtype)
    if wire is None:
        if a.dtype.name == "bfloat16" and a.dtype.itemsize == 2:  # ml_dtypes / jax / torch
            return tensor_pb2.BFLOAT16, np.ascontiguousarray(a.view(np.uint16), dtype="<u2")
        a = a.astype(np.float32)
        wire = _WIRE_FLOATS[a.dtype]
    code, little_endian = wire
    return code, np.ascontiguousarray(a, dtype=little_endian)


def _tensor_header(array):
    code, a = wire_array(array)
    return compute_pb2.TensorHeader(dtype=code, shape=list(a.shape)), a


def build_model(name, layers, dtype="bfloat16", allow_tf32=False):
    """Returns ``(ModelHeader, [(layer, LayerTensor, little-endian array), ...])``.

    ``layers``: a list of dicts with ``weight`` (required, ``(in, out)``), ``bias``
    (optional, ``(out,)``), ``layernorm`` (``True``/``False``/None, or a dict with optional
    ``eps``, ``gamma``, ``beta``) and ``activation`` (a name, default ``"none"``). Raises
    ``ValueError``/``TypeError`` for unknown keys, names and types.
    """
    if isinstance(layers, dict):
        raise TypeError("layers must be a list of dicts, one per layer")
    header = compute_pb2.ModelHeader(name=str(name), dtype=model_dtype(dtype),
                                     allow_tf32=bool(allow_tf32))
    tensors = []
    for i, layer in enumerate(layers):
        if not isinstance(layer, dict):
            raise TypeError(f"layers[{i}]: expected a dict, got {type(layer).__name__}")
        unknown = set(layer) - _LAYER_KEYS
        if unknown:
            raise ValueError(f"layers[{i}]: unknown keys {sorted(unknown)} "
                             f"(expected {sorted(_LAYER_KEYS)})")
        if layer.get("weight") is None:
            raise ValueError(f"layers[{i}]: 'weight' is required")
        lh = header.layers.add()
        lh.activation = activation_code(layer.get("activation"))
        th, a = _tensor_header(layer["weight"])
        lh.weight.CopyFrom(th)
        tensors.append((i, compute_pb2.LAYER_TENSOR_WEIGHT, a))
        if layer.get("bias") is not None:
            th, a = _tensor_header(layer["bias"])
            lh.bias.CopyFrom(th)
            tensors.append((i, compute_pb2.LAYER_TENSOR_BIAS, a))
        ln = layer.get("layernorm")
        if isinstance(ln, dict):
            unknown = set(ln) - _LAYERNORM_KEYS
            if unknown:
                raise ValueError(f"layers[{i}].layernorm: unknown keys {sorted(unknown)} "
                                 f"(expected {sorted(_LAYERNORM_KEYS)})")
            lh.layernorm.SetInParent()
            if ln.get("eps") is not None:
                lh.layernorm.eps = float(ln["eps"])
            for key, which in (("gamma", compute_pb2.LAYER_TENSOR_GAMMA),
                               ("beta", compute_pb2.LAYER_TENSOR_BETA)):
                if ln.get(key) is not None:
                    th, a = _tensor_header(ln[key])
                    getattr(lh.layernorm, key).CopyFrom(th)
                    tensors.append((i, which, a))
        elif ln is None or isinstance(ln, (bool, np.bool_)):
            if ln:
                lh.layernorm.SetInParent()
        else:
            raise TypeError(f"layers[{i}].layernorm: expected True, False or a dict "
                            f"{{eps, gamma, beta}}, got {type(ln).__name__}")
    return header, tensors


def chunks(header, tensors, chunk_bytes=DEFAULT_CHUNK_BYTES):
    """Yields the ``LoadModelChunk`` stream: the header, then each tensor's bytes in order in
    pieces of at most ``chunk_bytes`` (offset = bytes of that tensor sent before)."""
    chunk_bytes = int(chunk_bytes)
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    yield compute_pb2.LoadModelChunk(header=header)
    for layer, which, array in tensors:
        data = memoryview(array.reshape(-1)).cast("B")
        for offset in range(0, len(data), chunk_bytes):
            yield compute_pb2.LoadModelChunk(chunk=compute_pb2.TensorChunk(
                layer=layer, tensor=which, offset=offset,
                data=data[offset:offset + chunk_bytes].tobytes()))


def _dtype_name(code):
    try:
        return tensor_pb2.DType.Name(code).lower()
    except ValueError:
        return str(code)


def model_info_to_dict(info):
    """A ``ModelInfo`` as a plain dict with snake_case keys and names for enums::

        {"name": "mlp", "dtype": "bfloat16", "allow_tf32": False, "device_bytes": 123456,
         "load_ms": 1.5, "layers": [{"in_features": 256, "out_features": 512,
         "layernorm": True, "eps": 1e-05, "activation": "gelu_tanh"}, ...]}
    """
    return {
        "name": info.name,
        "dtype": _dtype_name(info.dtype),
        "allow_tf32": bool(info.allow_tf32),
        "device_bytes": int(info.device_bytes),
        "load_ms": float(info.load_ms),
        "layers": [{
            "in_features": int(l.in_features),
            "out_features": int(l.out_features),
            "layernorm": bool(l.layernorm),
            "eps": float(l.eps),
            "activation": _ACTIVATION_NAMES.get(l.activation, str(l.activation)),
        } for l in info.layers],
    }
