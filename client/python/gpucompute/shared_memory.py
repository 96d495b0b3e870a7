"""POSIX shared memory for clients on the same node as the server (started with
``--allow_shared_memory``): tensors pass as (region, offset, length) instead of bytes.

    region = client.create_shared_memory(256 << 20)        # create, map and register
    x = region.put(array)                                   # copy in; a SharedMemoryTensor
    y = client.echo(x, output=region)                       # read and written in place
    region.reset(); client.unregister_shared_memory(region); region.close()

A region is a ``multiprocessing.shared_memory.SharedMemory`` (``/dev/shm`` on Linux) mapped
here and, once registered, by the server. The server registers only objects the caller can
write: registering writes the server's proof into the region's first 56 bytes for as long as
the call takes, and puts back what was there. Outputs written into it come back as NumPy views of
its bytes: they change when the region is written again.
"""

import itertools
import os
import secrets
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from gpucompute.parallel_copy import copy_bytes
from gpucompute.tensor import SharedMemoryTensor, from_bytes, numpy_dtype, wire_dtype
from gpucompute.v1 import tensor_pb2

ALIGNMENT = 64  # tensors placed by put() and outputs written by the server start at multiples


def _align(n):
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


_created = itertools.count()


def _new_name():
    """A new object's name: servers open only objects named "/gpucompute-..."."""
    return f"gpucompute-{os.getpid()}-{next(_created)}-{secrets.token_hex(4)}"


class SharedMemoryRegion:
    """A shared-memory object mapped read-write in this process.

    Args:
      size: bytes, when creating.
      key: the object's POSIX name (``"/name"``) to open an existing one; None creates a new
        object with a unique name, which ``close`` unlinks.

    Attributes:
      key: what ``RegisterSharedMemory`` takes (``"/" + shm.name``).
      name: the name it is registered under with a server (None until registered).
      size: bytes.
      buf: the mapping (a ``memoryview``).
    """

    def __init__(self, size=None, *, key=None):
        if key is None:
            if not size or int(size) <= 0:
                raise ValueError(f"size must be positive, got {size}")
            self._shm = shared_memory.SharedMemory(name=_new_name(), create=True, size=int(size))
            self._owner = True
        else:
            self._shm = shared_memory.SharedMemory(name=str(key).lstrip("/"), create=False)
            self._owner = False
            # Python < 3.13 tracks attached objects too and unlinks them at exit: not ours to.
            try:
                resource_tracker.unregister(self._shm._name, "shared_memory")
            except Exception:  # pylint: disable=broad-except
                pass
        self.key = "/" + self._shm.name
        self.size = int(size) if size and key is None else self._shm.size
        self.name = None
        self._next = 0

    @property
    def buf(self):
        return self._shm.buf

    def ndarray(self, shape, dtype, offset=0):
        """A NumPy view of ``shape`` elements of ``dtype`` (a NumPy dtype or a wire ``DType``
        code) at byte ``offset``; bfloat16 is widened into a float32 copy."""
        code = dtype if isinstance(dtype, int) else wire_dtype(dtype)
        shape = tuple(int(s) for s in shape)
        itemsize = 2 if code == tensor_pb2.BFLOAT16 else numpy_dtype(code).itemsize
        n = itemsize * int(np.prod(shape, dtype=np.int64))
        if offset < 0 or offset + n > self.size:
            raise ValueError(f"bytes [{offset}, {offset + n}) are outside the region of "
                             f"{self.size} bytes")
        return from_bytes(self._shm.buf[offset:offset + n], code, shape)

    def put(self, array, offset=None, dtype=None):
        """Copies ``array`` into the region and returns the ``SharedMemoryTensor`` naming it.

        ``offset`` None places it after the previous ``put`` (at the next multiple of 64
        bytes); ``reset`` starts again from 0. ``dtype`` casts first.
        """
        a = np.asarray(array) if dtype is None else np.asarray(array, dtype=dtype)
        code = wire_dtype(a.dtype)
        a = np.ascontiguousarray(a, dtype=numpy_dtype(code))
        at = self._next if offset is None else int(offset)
        if at < 0 or at + a.nbytes > self.size:
            raise ValueError(f"{a.nbytes} bytes at offset {at} do not fit the region of "
                             f"{self.size} bytes")
        view = np.frombuffer(self._shm.buf, dtype=np.uint8, count=a.nbytes, offset=at)
        copy_bytes(view, a.reshape(-1).view(np.uint8))
        del view
        self._next = max(self._next, _align(at + a.nbytes))
        return SharedMemoryTensor(region=self, offset=at, dtype=code, shape=tuple(a.shape))

    def reset(self):
        """Lets the next ``put`` start at offset 0 again."""
        self._next = 0

    @property
    def next_offset(self):
        """Where the next ``put`` without an offset goes."""
        return self._next

    def close(self):
        """Unmaps the region and, if it was created here, unlinks the object. Unregister it
        from the server first. NumPy views of it must be gone (else ``BufferError``)."""
        if self._shm is None:
            return
        shm, self._shm = self._shm, None
        try:
            shm.close()
        finally:
            if self._owner:
                shm.unlink()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"SharedMemoryRegion(key={self.key!r}, name={self.name!r}, size={self.size})"
