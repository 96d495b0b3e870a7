"""Conversion between NumPy arrays and ``gpucompute.v1.Tensor`` messages.

A Tensor is ``{dtype, shape, data}``: raw little-endian elements in row-major (C) order, the
KServe-v2 layout. ``to_tensor``/``from_tensor`` are the only places this package encodes or
decodes one.
"""

import numpy as np

from gpucompute.v1 import tensor_pb2

# Wire dtype <-> little-endian NumPy dtype. BFLOAT16 has no NumPy type: ``from_tensor`` widens
# it to float32 and ``to_tensor`` cannot produce it.
_TO_NUMPY = {
    tensor_pb2.FLOAT32: np.dtype("<f4"),
    tensor_pb2.FLOAT64: np.dtype("<f8"),
    tensor_pb2.FLOAT16: np.dtype("<f2"),
    tensor_pb2.INT32: np.dtype("<i4"),
    tensor_pb2.INT64: np.dtype("<i8"),
    tensor_pb2.UINT8: np.dtype("u1"),
}
_FROM_NUMPY = {dt.newbyteorder("="): code for code, dt in _TO_NUMPY.items()}


def wire_dtype(dtype):
    """Returns the ``DType`` enum value for a NumPy dtype (or anything ``np.dtype`` accepts).

    Raises ``TypeError`` for dtypes the wire format cannot carry.
    """
    dt = np.dtype(dtype).newbyteorder("=")
    try:
        return _FROM_NUMPY[dt]
    except KeyError:
        raise TypeError(
            f"dtype {dt} has no gpucompute.v1.DType; supported: "
            + ", ".join(sorted(d.name for d in _FROM_NUMPY))) from None


def to_tensor(array, dtype=None):
    """Encodes ``array`` (anything ``np.asarray`` takes) as a ``Tensor``.

    ``dtype`` casts first (e.g. ``"float64"``); otherwise the array keeps its own dtype, which
    must be float16/32/64, int32/64 or uint8. Values are copied once into little-endian,
    C-ordered bytes.
    """
    a = np.asarray(array) if dtype is None else np.asarray(array, dtype=dtype)
    code = wire_dtype(a.dtype)
    data = np.ascontiguousarray(a, dtype=_TO_NUMPY[code]).tobytes()
    return tensor_pb2.Tensor(dtype=code, shape=list(a.shape), data=data)


def from_tensor(tensor):
    """Decodes a ``Tensor`` into a new writable NumPy array in native byte order.

    The array has the tensor's dtype (BFLOAT16 is widened to float32) and shape. Raises
    ``ValueError`` if the payload is missing (allowed for zero elements) or its size does not
    match the shape.
    """
    shape = tuple(int(s) for s in tensor.shape)
    count = int(np.prod(shape, dtype=np.int64))
    if tensor.WhichOneof("payload") != "data" and count != 0:
        raise ValueError("Tensor has no inline data payload")
    if tensor.dtype == tensor_pb2.BFLOAT16:
        if len(tensor.data) != 2 * count:
            raise ValueError(f"Tensor: {len(tensor.data)} bytes for shape {shape} of bfloat16")
        bits = np.frombuffer(tensor.data, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    try:
        dt = _TO_NUMPY[tensor.dtype]
    except KeyError:
        raise ValueError(f"Tensor: unsupported dtype {tensor.dtype}") from None
    if len(tensor.data) != dt.itemsize * count:
        raise ValueError(f"Tensor: {len(tensor.data)} bytes for shape {shape} of {dt.name}")
    return np.frombuffer(tensor.data, dtype=dt).astype(dt.newbyteorder("="), copy=True).reshape(shape)
