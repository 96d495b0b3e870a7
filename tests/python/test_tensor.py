"""gpucompute.to_tensor / from_tensor: the NumPy <-> Tensor wire format (no server needed)."""

import numpy as np
import pytest

from gpucompute import from_tensor, to_tensor
from gpucompute.v1 import tensor_pb2

WIRE = {
    "float32": tensor_pb2.FLOAT32,
    "float64": tensor_pb2.FLOAT64,
    "float16": tensor_pb2.FLOAT16,
    "int32": tensor_pb2.INT32,
    "int64": tensor_pb2.INT64,
    "uint8": tensor_pb2.UINT8,
}


@pytest.mark.parametrize("dtype", sorted(WIRE))
@pytest.mark.parametrize("shape", [(), (0,), (1,), (7,), (3, 5), (2, 0, 4)])
def test_round_trip(dtype, shape, rng):
    a = (rng.normal(0, 100, shape)).astype(dtype)
    t = to_tensor(a)
    assert t.dtype == WIRE[dtype]
    assert list(t.shape) == list(shape)
    assert len(t.data) == a.size * a.itemsize
    b = from_tensor(t)
    assert b.dtype == np.dtype(dtype) and b.shape == shape
    np.testing.assert_array_equal(a, b)
    assert b.flags.writeable and b.flags.c_contiguous


def test_bytes_are_little_endian_row_major():
    a = np.arange(6, dtype=">i4").reshape(2, 3).T  # big-endian and Fortran-ordered view
    t = to_tensor(a)
    assert t.data == np.ascontiguousarray(a, dtype="<i4").tobytes()
    assert list(t.shape) == [3, 2]
    np.testing.assert_array_equal(from_tensor(t), a)
    assert t.data[:4] == (0).to_bytes(4, "little") and t.data[4:8] == (3).to_bytes(4, "little")


def test_cast_and_lists():
    t = to_tensor([1, 2, 3], "float64")
    assert t.dtype == tensor_pb2.FLOAT64
    np.testing.assert_array_equal(from_tensor(t), [1.0, 2.0, 3.0])


def test_bfloat16_decodes_to_float32():
    values = np.array([1.0, -2.5, 3.140625, 0.0], dtype=np.float32)
    bits = (values.view(np.uint32) >> 16).astype("<u2")
    t = tensor_pb2.Tensor(dtype=tensor_pb2.BFLOAT16, shape=[2, 2], data=bits.tobytes())
    out = from_tensor(t)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, values.reshape(2, 2))


@pytest.mark.parametrize("dtype", ["complex128", "bool", "uint16", "int8", "object"])
def test_unsupported_dtypes_raise(dtype):
    with pytest.raises(TypeError):
        to_tensor(np.zeros(3, dtype=dtype))


def test_bad_tensors_raise():
    with pytest.raises(ValueError, match="bytes"):
        from_tensor(tensor_pb2.Tensor(dtype=tensor_pb2.FLOAT64, shape=[3], data=b"\0" * 23))
    with pytest.raises(ValueError, match="payload"):
        from_tensor(tensor_pb2.Tensor(dtype=tensor_pb2.FLOAT64, shape=[2]))
    assert from_tensor(tensor_pb2.Tensor(dtype=tensor_pb2.FLOAT64, shape=[0])).shape == (0,)
    with pytest.raises(ValueError, match="dtype"):
        from_tensor(tensor_pb2.Tensor(dtype=tensor_pb2.DTYPE_UNSPECIFIED, shape=[0], data=b""))
