"""Conversion between NumPy arrays and ``gpucompute.v1.Tensor`` messages.

A Tensor is ``{dtype, shape, data}``: raw little-endian elements in row-major (C) order, the
KServe-v2 layout. Instead of ``data`` it may name a tensor resident on the server
(``TensorHandle``, from ``Client.put_tensor`` or an output kept with ``output="keep"``) or bytes
in a registered shared-memory region (``SharedMemoryTensor``, from ``SharedMemoryRegion.put``).
``to_tensor``/``from_tensor`` are the only places this package encodes or decodes one.
"""

import dataclasses
import math

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
_FROM_NUMPY.update({dt: code for code, dt in _TO_NUMPY.items()})


# The dtypes an operation computes in (periodogram, assimilate).
_COMPUTE_DTYPES = {"float32": tensor_pb2.FLOAT32, "float64": tensor_pb2.FLOAT64}


def compute_dtype(dtype):
    """``"float64"``/``"float32"`` (or a NumPy dtype) -> the ``DType`` enum value.

    The two names are looked up directly; anything else goes through ``np.dtype`` (whose
    ``name`` takes microseconds to build)."""
    code = _COMPUTE_DTYPES.get(dtype) if isinstance(dtype, str) else None
    if code is not None:
        return code
    name = np.dtype(dtype).name
    try:
        return _COMPUTE_DTYPES[name]
    except KeyError:
        raise ValueError(f"dtype {name!r}: expected float32 or float64") from None


def wire_dtype(dtype):
    """Returns the ``DType`` enum value for a NumPy dtype (or anything ``np.dtype`` accepts).

    Raises ``TypeError`` for dtypes the wire format cannot carry.
    """
    code = _FROM_NUMPY.get(dtype)  # a NumPy dtype of either byte order: no conversion
    if code is not None:
        return code
    dt = np.dtype(dtype).newbyteorder("=")
    try:
        return _FROM_NUMPY[dt]
    except KeyError:
        raise TypeError(
            f"dtype {dt} has no gpucompute.v1.DType; supported: "
            + ", ".join(sorted(d.name for d in _FROM_NUMPY))) from None


@dataclasses.dataclass(frozen=True)
class TensorHandle:
    """A tensor resident on the server, owned by the client that made it.

    Pass it wherever an array is accepted (operation inputs, ``echo``): only the handle travels.
    ``client.get_tensor(h)`` fetches it, ``client.delete_tensor(h)`` frees it; the server also
    frees it after its idle expiry.

    Attributes:
      handle: the server's name for it.
      dtype: the wire ``DType`` code (``dtype_name`` spells it).
      shape: a tuple of ints.
      nbytes: its size in bytes.
    """
    handle: str
    dtype: int
    shape: tuple
    nbytes: int = 0

    @property
    def dtype_name(self):
        return tensor_pb2.DType.Name(self.dtype).lower()

    @property
    def ndim(self):
        return len(self.shape)

    @classmethod
    def from_info(cls, info):
        """From a ``TensorInfo`` (``PutTensor``, ``CreateTensor``, ``ListTensors``)."""
        return cls(handle=info.handle, dtype=info.dtype, shape=tuple(int(s) for s in info.shape),
                   nbytes=int(info.bytes))


@dataclasses.dataclass(frozen=True)
class SharedMemoryTensor:
    """A tensor in a registered shared-memory region: ``length`` bytes at ``offset`` holding
    ``shape`` elements of ``dtype`` (a wire ``DType`` code). Made by ``SharedMemoryRegion.put``;
    ``array`` views the bytes (no copy)."""
    region: object  # the gpucompute.SharedMemoryRegion
    offset: int
    dtype: int
    shape: tuple

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def length(self):
        return itemsize(self.dtype) * int(np.prod(self.shape, dtype=np.int64))

    @property
    def array(self):
        """A NumPy view of the bytes in the region (bfloat16: a widened float32 copy)."""
        return self.region.ndarray(self.shape, self.dtype, self.offset)


def is_reference(x):
    """True for a ``TensorHandle`` or ``SharedMemoryTensor`` (bytes that do not travel)."""
    return isinstance(x, (TensorHandle, SharedMemoryTensor))


def is_prepared(x):
    """True for what ``to_tensor`` passes on without encoding an array: a reference or a
    ``Tensor`` message."""
    return is_reference(x) or isinstance(x, tensor_pb2.Tensor)


# What ``to_tensor`` passes on without encoding an array (see ``is_prepared``).
_PREPARED = (TensorHandle, SharedMemoryTensor, tensor_pb2.Tensor)


def itemsize(code):
    """Bytes per element of a wire ``DType``."""
    return 2 if code == tensor_pb2.BFLOAT16 else _TO_NUMPY[code].itemsize


def reference_tensor(ref):
    """The ``Tensor`` that names a ``TensorHandle`` or ``SharedMemoryTensor``."""
    if isinstance(ref, TensorHandle):
        return tensor_pb2.Tensor(dtype=ref.dtype, shape=list(ref.shape), handle=ref.handle)
    if isinstance(ref, SharedMemoryTensor):
        if ref.region.name is None:
            raise ValueError("the shared-memory region is not registered "
                             "(Client.register_shared_memory)")
        return tensor_pb2.Tensor(dtype=ref.dtype, shape=list(ref.shape),
                                 shared_memory=tensor_pb2.SharedMemoryRef(
                                     region=ref.region.name, offset=ref.offset,
                                     length=ref.length))
    raise TypeError(f"not a tensor reference: {type(ref).__name__}")


def inline_tensor(code, a):
    """The ``Tensor`` carrying the wire-ready array ``a`` (little-endian, C-ordered, of wire
    dtype ``code``) inline: its bytes copied once. Every encoder of this package takes such a
    function as ``encode``; ``Client`` passes one that uploads large arrays instead (see
    ``gpucompute.transfer``)."""
    return tensor_pb2.Tensor(dtype=code, shape=a.shape, data=a.tobytes())


def to_tensor(array, dtype=None, encode=inline_tensor):
    """Encodes ``array`` (anything ``np.asarray`` takes) as a ``Tensor``.

    ``dtype`` casts first (e.g. ``"float64"``); otherwise the array keeps its own dtype, which
    must be float16/32/64, int32/64 or uint8. Values are copied once into little-endian,
    C-ordered bytes (by ``encode``, see ``inline_tensor``). A ``TensorHandle`` or
    ``SharedMemoryTensor`` becomes a Tensor that names it (``dtype`` is then not applied: the
    server converts float inputs itself), and a ``Tensor`` message is returned as it is.
    """
    if (type(array) is np.ndarray and (dtype is None or array.dtype == dtype)
            and array.flags.c_contiguous):
        code = _FROM_NUMPY.get(array.dtype)
        if code is not None and array.dtype is _TO_NUMPY[code]:  # already the wire's layout
            return encode(code, array)
    if isinstance(array, _PREPARED):
        return array if isinstance(array, tensor_pb2.Tensor) else reference_tensor(array)
    a = np.asarray(array) if dtype is None else np.asarray(array, dtype=dtype)
    code = _FROM_NUMPY.get(a.dtype)  # wire_dtype's first lookup, without its call
    if code is None:
        code = wire_dtype(a.dtype)  # the byte order normalised, or TypeError
    # The array itself when it is already little-endian and C-ordered (a 0-d array stays 0-d).
    return encode(code, np.asarray(a, dtype=_TO_NUMPY[code], order="C"))


def from_tensor(tensor):
    """Decodes a ``Tensor`` into a new writable NumPy array in native byte order.

    The array has the tensor's dtype (BFLOAT16 is widened to float32) and shape. Raises
    ``ValueError`` if the payload is missing (allowed for zero elements) or its size does not
    match the shape.
    """
    data = tensor.data  # read once: each read of the field is a new copy of its bytes
    dims = tensor.shape
    if len(dims) == 1:  # most outputs: 1-D, inline, of a NumPy dtype, little-endian like the host
        dt = _NATIVE_TO_NUMPY.get(tensor.dtype)
        if dt is not None and len(data) == dt.itemsize * dims[0]:
            return np.frombuffer(data, dtype=dt).copy()
    shape = tuple(dims)
    count = math.prod(shape)
    # Only an empty ``data`` can mean another payload (or none), so only then is it asked.
    if not data and count != 0 and tensor.WhichOneof("payload") != "data":
        raise ValueError("Tensor has no inline data payload")
    code = tensor.dtype
    if code == tensor_pb2.BFLOAT16:
        if len(data) != 2 * count:
            raise ValueError(f"Tensor: {len(data)} bytes for shape {shape} of bfloat16")
        return _widen_bfloat16(data).reshape(shape)
    try:
        dt = _TO_NUMPY[code]
    except KeyError:
        raise ValueError(f"Tensor: unsupported dtype {code}") from None
    if len(data) != dt.itemsize * count:
        raise ValueError(f"Tensor: {len(data)} bytes for shape {shape} of {dt.name}")
    flat = np.frombuffer(data, dtype=dt)
    if len(shape) != 1:
        flat = flat.reshape(shape)
    # One copy out of the (immutable) bytes: a plain memcpy where the host is little-endian.
    return flat.copy() if dt.isnative else flat.astype(dt.newbyteorder("="))


# The wire dtypes whose bytes are the host's own: decoded by a copy.
_NATIVE_TO_NUMPY = {code: dt for code, dt in _TO_NUMPY.items() if dt.isnative}

_BFLOAT16_BITS = np.dtype("<u2")


def _widen_bfloat16(data):
    """A new 1-D float32 array of the bfloat16 values in ``data`` (raw little-endian bits):
    each widened into the high half of a 32-bit word, exactly."""
    bits = np.frombuffer(data, dtype=_BFLOAT16_BITS).astype(np.uint32)
    bits <<= 16
    return bits.view(np.float32)


def numpy_dtype(code):
    """The little-endian NumPy dtype of a wire ``DType`` (``ValueError`` for bfloat16, which
    NumPy lacks, and unknown codes)."""
    try:
        return _TO_NUMPY[code]
    except KeyError:
        raise ValueError(f"no NumPy dtype for {tensor_pb2.DType.Name(code)}") from None


def from_bytes(data, code, shape):
    """An array of ``shape`` decoded from raw little-endian bytes of wire dtype ``code``: a view
    when ``data`` is a writable buffer and no conversion is needed, bfloat16 widened to
    float32."""
    shape = tuple(int(s) for s in shape)
    if code == tensor_pb2.BFLOAT16:
        return _widen_bfloat16(data).reshape(shape)
    return np.frombuffer(data, dtype=numpy_dtype(code)).reshape(shape)
