"""Copies of large arrays on several threads. One core copies ~5-10 GB/s; the memory system
moves several times that, and NumPy lets go of the interpreter lock while it copies, so slices
of one copy on a few threads run at once. Used where the client itself copies a user's array
(into a shared-memory region)."""

import concurrent.futures
import os
import threading

import numpy as np

# Below this a copy stays on the caller's thread; above, pieces of at least PIECE_BYTES.
SERIAL_BYTES = 16 << 20
PIECE_BYTES = 8 << 20
MAX_THREADS = 8

_lock = threading.Lock()
_pool = None


def _forget_pool():
    """In a forked child: the parent's threads are not there, so start a pool of its own."""
    global _lock, _pool
    _lock, _pool = threading.Lock(), None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _threads():
    global _pool
    with _lock:
        if _pool is None:
            _pool = concurrent.futures.ThreadPoolExecutor(
                min(MAX_THREADS, os.cpu_count() or 1), thread_name_prefix="gpucompute-copy")
        return _pool


def copy_bytes(dst, src):
    """``dst[:] = src`` for two contiguous 1-D uint8 arrays of one length, on several threads
    when it is large."""
    n = len(src)
    pieces = min(MAX_THREADS, os.cpu_count() or 1, max(1, n // PIECE_BYTES))
    if n < SERIAL_BYTES or pieces <= 1:
        dst[:] = src
        return
    step = -(-n // pieces)
    step = -(-step // 64) * 64  # cache-line aligned pieces

    def piece(begin):
        dst[begin:begin + step] = src[begin:begin + step]

    for future in [_threads().submit(piece, b) for b in range(0, n, step)]:
        future.result()
