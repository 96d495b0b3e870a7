"""Moving large tensors: slices over several connections at once, each byte copied once here.

One gRPC connection moves a large message at ~0.5 GB/s whatever its HTTP/2 settings; slices of
it over several connections (separate TCP connections, so separate gRPC threads on both sides)
move several times that. ``Transfers`` holds those connections and moves byte ranges of
resident tensors over them: ``put`` writes ranges of a tensor reserved by ``CreateTensor`` with
PutTensor streams, ``get`` reads ranges with GetTensor calls into a buffer of the caller's.

Copies. The ``PutTensorChunk`` and ``TensorData`` messages are encoded and decoded here by hand
(the protobuf wire format: a few tag and length bytes before the raw bytes), so that a chunk is
built by one copy from a view of the caller's array, and a received chunk is copied once from
the bytes gRPC hands over into the destination array. Through generated messages each would be
copied two or three times more (``bytes(view)``, into the message, out of it again). Both of
our copies run outside the interpreter lock (``ctypes.memmove`` and NumPy let go of it), so the
connections' threads copy at once; gRPC's own copy of each message (into its buffer on the
way out, into a ``bytes`` on the way in) holds the lock.

Memory. Every chunk is a fresh 4 MiB buffer, here and in gRPC. Under glibc's default settings
each is mapped from the kernel and unmapped when freed, so every copy into one first faults in
its pages: ~3 GB/s instead of ~10. The first transfer (``put`` or ``get``) therefore sets glibc to serve blocks up to
32 MiB from its heap and to keep up to 512 MiB of freed memory for reuse
(``tune_allocator``); set ``GPUCOMPUTE_KEEP_MALLOC=1`` to leave the allocator as it is.
"""

import concurrent.futures
import ctypes
import dataclasses
import functools
import os
import sys
import threading

import grpc
import numpy as np
from google.protobuf import message

from gpucompute.tensor import from_bytes, inline_tensor, numpy_dtype
from gpucompute.v1 import compute_pb2, tensor_pb2

_PUT_TENSOR = "/gpucompute.v1.Compute/PutTensor"
_GET_TENSOR = "/gpucompute.v1.Compute/GetTensor"
_PERIODOGRAM = "/gpucompute.v1.Compute/Periodogram"
# Bytes per PutTensor message: 4 MiB less 1 KiB, under gRPC's default 4 MiB message limit.
CHUNK_BYTES = (4 << 20) - 1024
# Slices smaller than this are not worth a connection of their own.
MIN_SLICE_BYTES = 2 << 20
MAX_CONNECTIONS = 16
# Streams one call's tensors spread over. On the H100 machine's host the seed EnKF (216 MB up,
# 72 MB down) took 127 / 117 / 123 / 131 ms over 6 / 8 / 12 / 16 streams, within the run's noise
# (tests/bench/results/2026-11-27-nvidia-h100-python-transfer-streams.jsonl).
CALL_STREAMS = 6


# ---------------------------------------------------------------------- wire format

def encode_varint(n):
    """The protobuf wire format's varint of ``n`` >= 0."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def periodogram_stub(channel):
    """The Periodogram method on ``channel``, taking a request message or a request written by
    hand (``SeriesRequest``, ``PackedPart``): anything with ``SerializeToString``."""
    return channel.unary_unary(
        _PERIODOGRAM, request_serializer=lambda request: request.SerializeToString(),
        response_deserializer=compute_pb2.PeriodogramResponse.FromString)


def _read_varint(buf, at):
    value = shift = 0
    while True:
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


_new_bytes = ctypes.pythonapi.PyBytes_FromStringAndSize
_new_bytes.restype = ctypes.py_object
_new_bytes.argtypes = (ctypes.c_void_p, ctypes.c_ssize_t)


# PutTensorChunk: header = 1 (message), offset = 2 (varint), data = 3 (bytes).
def put_chunk(offset, data, header=b""):
    """A serialized ``PutTensorChunk``: ``header`` (serialized ``PutTensorHeader``, or empty),
    ``offset`` and ``data`` (any contiguous bytes-like view; copied once, here, outside the
    interpreter lock)."""
    parts = []
    if header:
        parts += [b"\x0a", encode_varint(len(header)), header]
    if offset:
        parts += [b"\x10", encode_varint(offset)]
    parts += [b"\x1a", encode_varint(len(data))]
    prefix = b"".join(parts)
    if len(data) < (64 << 10):
        return prefix + bytes(data)
    # A new bytes object, filled before anyone else sees it (the C API's way of building one).
    out = _new_bytes(None, len(prefix) + len(data))
    at = ctypes.cast(ctypes.c_char_p(out), ctypes.c_void_p).value
    ctypes.memmove(at, prefix, len(prefix))
    source = np.frombuffer(data, np.uint8)
    ctypes.memmove(at + len(prefix), source.ctypes.data, len(data))  # lets go of the lock
    return out


# TensorData: offset = 1 (varint), data = 2 (bytes), info = 3 (TensorInfo).
def parse_tensor_data(raw):
    """``(offset, data view, TensorInfo or None)`` of a serialized ``TensorData``."""
    view = memoryview(raw)
    offset, data, info, at = 0, view[0:0], None, 0
    while at < len(view):
        tag, at = _read_varint(view, at)
        field, kind = tag >> 3, tag & 7
        if kind == 0:
            value, at = _read_varint(view, at)
            if field == 1:
                offset = value
        elif kind == 2:
            length, at = _read_varint(view, at)
            if field == 2:
                data = view[at:at + length]
            elif field == 3:
                info = compute_pb2.TensorInfo.FromString(view[at:at + length].tobytes())
            at += length
        elif kind == 1:
            at += 8
        elif kind == 5:
            at += 4
        else:
            raise ValueError(f"TensorData: unexpected wire type {kind}")
    return offset, data, info


# ---------------------------------------------------------------------- allocator

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters
_tuned = False


def tune_allocator():
    """Once per process, on Linux with glibc: serve blocks up to 32 MiB from the heap and keep
    up to 512 MiB of freed memory (see module doc). Unless ``GPUCOMPUTE_KEEP_MALLOC`` is set."""
    global _tuned
    if _tuned:
        return
    _tuned = True
    if os.environ.get("GPUCOMPUTE_KEEP_MALLOC") or not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return  # not glibc (musl has no mallopt)
    mallopt(_M_MMAP_THRESHOLD, 32 << 20)
    mallopt(_M_TRIM_THRESHOLD, 512 << 20)


# ---------------------------------------------------------------------- slicing

def slices(sizes, connections=MAX_CONNECTIONS, min_slice=MIN_SLICE_BYTES):
    """Splits byte ranges of the given sizes over about ``connections`` streams: a list of
    ``(index into sizes, begin, end)``, each range cut into pieces in proportion to its size,
    none smaller than ``min_slice`` unless the whole range is. Pieces start at multiples of 64
    bytes, so that no element is split between two streams (the server checks the values of
    whole elements as they arrive)."""
    total = sum(sizes)
    out = []
    for i, size in enumerate(sizes):
        pieces = max(1, min(connections * size // max(total, 1), size // min_slice))
        step = -(-size // pieces) if size else 0
        step = -(-step // 64) * 64
        out += [(i, b, min(size, b + step)) for b in range(0, size, step or 1)] or [(i, 0, 0)]
    return out


# ---------------------------------------------------------------------- connections

class Transfers:
    """Connections for parallel transfers (made on first use and kept) and the threads that
    drive them. Thread-safe; one per ``Client``.

    Args:
      main_channel: the client's own channel (the first slice travels on it).
      make_channel: ``make_channel(i)`` opens extra connection ``i`` (1, 2, ...).
      metadata: sent with every call (authorization, client id), or None.
    """

    def __init__(self, main_channel, make_channel, metadata):
        self._make_channel = make_channel
        self._metadata = metadata
        self._lock = threading.Lock()
        self._owned = []  # the extra channels, closed by close()
        self._stubs = [self._raw_stubs(main_channel)]
        self._pool = None

    @staticmethod
    def _raw_stubs(channel):
        # Requests of PutTensor and responses of GetTensor travel as raw bytes (see module doc).
        put = channel.stream_unary(_PUT_TENSOR, request_serializer=None,
                                   response_deserializer=compute_pb2.TensorInfo.FromString)
        get = channel.unary_stream(
            _GET_TENSOR, request_serializer=compute_pb2.GetTensorRequest.SerializeToString,
            response_deserializer=None)
        return put, get, periodogram_stub(channel)

    def close(self):
        with self._lock:
            for channel in self._owned:
                channel.close()
            self._owned, self._stubs = [], self._stubs[:1]
            if self._pool is not None:
                self._pool.shutdown(wait=False)
                self._pool = None

    def _stub(self, i):
        """The (put, get, periodogram) stubs of connection ``i`` modulo MAX_CONNECTIONS."""
        i %= MAX_CONNECTIONS
        with self._lock:
            while len(self._stubs) <= i:
                channel = self._make_channel(len(self._stubs))
                self._owned.append(channel)
                self._stubs.append(self._raw_stubs(channel))
            return self._stubs[i]

    def map(self, fn, items):
        """``[fn(connection index, item) ...]`` with item k on connection k, in parallel."""
        items = list(items)
        if len(items) <= 1:
            return [fn(0, item) for item in items]
        return [f.result() for f in self.submit(fn, items)]

    def submit(self, fn, items):
        """Futures of ``fn(connection index, item)``, item k on connection k, all started."""
        tune_allocator()  # the items' messages are put together on the pool's threads
        with self._lock:
            if self._pool is None:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    MAX_CONNECTIONS, thread_name_prefix="gpucompute-transfer")
            pool = self._pool
        return [pool.submit(fn, k, item) for k, item in enumerate(items)]

    # ------------------------------------------------------------------ one stream

    def put(self, connection, data, begin, end, timeout, header, chunk_bytes=CHUNK_BYTES,
            base=0):
        """One PutTensor stream on ``connection``: ``header`` (a ``PutTensorHeader``) with the
        first chunk, then ``data[begin:end]`` (a byte view) written at ``base + begin``
        onwards. Returns the ``TensorInfo``."""
        tune_allocator()
        header_bytes = header.SerializeToString()

        def messages():
            at, first = begin, True
            while first or at < end:
                n = min(chunk_bytes, end - at)
                yield put_chunk(base + at, data[at:at + n], header_bytes if first else b"")
                first = False
                at += n

        put = self._stub(connection)[0]
        return put(messages(), timeout=timeout, metadata=self._metadata)

    def get(self, connection, handle, offset, length, out, base, timeout, chunk_bytes=0):
        """One GetTensor call on ``connection`` for bytes ``[offset, offset + length)`` of
        ``handle`` (``length`` 0: to the end), written into the writable byte view ``out`` at
        ``offset - base``; ``out`` None: a new ``bytearray`` of the range. Returns ``(TensorInfo
        or None, out, trailing metadata)``."""
        tune_allocator()
        get = self._stub(connection)[1]
        request = compute_pb2.GetTensorRequest(handle=handle, offset=offset, length=length,
                                               chunk_bytes=int(chunk_bytes))
        call = get(request, timeout=timeout, metadata=self._metadata)
        info, into = None, None if out is None else np.frombuffer(out, np.uint8)
        for raw in call:
            at, data, message_info = parse_tensor_data(raw)
            if message_info is not None:
                info = message_info
                if out is None:
                    out = memoryview(bytearray(length or max(0, int(info.bytes) - offset)))
                    into, base = np.frombuffer(out, np.uint8), offset
            # A NumPy copy: it lets go of the GIL, so the other connections' threads run on.
            into[at - base:at - base + len(data)] = np.frombuffer(data, np.uint8)
        if out is None:
            out = memoryview(bytearray())
        return info, out, tuple(call.trailing_metadata() or ())


    def periodogram(self, connection, request, timeout):
        """One Periodogram call on ``connection``: ``(response, call)``."""
        return self._stub(connection)[2].with_call(request, timeout=timeout,
                                                   metadata=self._metadata)


# ---------------------------------------------------------------------- split requests

# A Periodogram request of many series is cut into this many requests at most, each on its own
# connection: one connection moves a large message at ~0.5 GB/s, and one server thread decodes
# it. On the H100 machine's host 2,000 light curves (17 MB) took 205 / 171 / 132 / 136 / 105 ms
# as 1 / 2 / 4 / 8 / 16 requests of Series (tests/bench/results/2026-11-27-nvidia-h100-survey-
# split.jsonl) and, packed, 64 / 36 / 42 / 33-35 ms as 1 / 4 / 8 / 16 requests, powers
# discarded (2026-11-27-nvidia-h100-survey-packed-parts.jsonl).
SPLIT_PARTS = MAX_CONNECTIONS
# Below this a request goes whole; a part is never smaller.
MIN_SPLIT_BYTES = 256 << 10


def split_series(request, parts=SPLIT_PARTS, min_bytes=MIN_SPLIT_BYTES):
    """``request`` (a PeriodogramRequest) as requests of consecutive runs of its series, of
    about equal bytes, each with every other field of the request; ``[request]`` when it is too
    small to be worth cutting, or when cutting would change the answer (``splittable``)."""
    n = len(request.series)
    if n < 2 or not splittable(request):
        return [request]
    sizes = [s.ByteSize() for s in request.series]
    total = sum(sizes)
    parts = max(1, min(parts, n, total // max(1, min_bytes)))
    if parts <= 1:
        return [request]
    base = compute_pb2.PeriodogramRequest()  # every field but the series (copying those is slow)
    for field, value in request.ListFields():
        if field.name == "series":
            continue
        if isinstance(value, message.Message):
            getattr(base, field.name).CopyFrom(value)
        elif isinstance(value, (str, bytes, int, float, bool)):
            setattr(base, field.name, value)
        else:  # a repeated field
            getattr(base, field.name).extend(value)
    out, begin, done = [], 0, 0
    for k in range(1, parts + 1):
        end, goal = begin, total * k // parts
        while end < n and (done + sizes[end] <= goal or end == begin or k == parts):
            done += sizes[end]
            end += 1
        part = compute_pb2.PeriodogramRequest()
        part.CopyFrom(base)
        part.series.extend(request.series[begin:end])
        out.append(part)
        begin = end
        if begin == n:
            break
    return out


def splittable(request, placement=None):
    """Whether a PeriodogramRequest may be cut into parts without changing its answer: not
    when its outputs go to shared memory (each part would place its outputs from the same
    offset) or its false-alarm probabilities are bootstrapped (drawn per request).
    ``placement``: the OutputPlacement it will have, if not yet set."""
    placement = request.output_placement if placement is None else placement
    return (placement.WhichOneof("target") != "shared_memory"
            and request.false_alarm.method != compute_pb2.FALSE_ALARM_METHOD_BOOTSTRAP)


@dataclasses.dataclass
class PackedColumns:
    """Many series' samples as the caller gave them, not yet copied: ``columns`` holds t, y and
    optionally dy, each a list of 1-D little-endian float64 arrays (series i's at position i),
    ``lengths`` each series' samples."""
    columns: list
    lengths: list

    @property
    def nbytes(self):
        return 8 * sum(self.lengths) * len(self.columns)

    def joined(self):
        """``(t, y, dy or None)``: each column end to end in one new array."""
        t, y, *dy = (np.concatenate(column) for column in self.columns)
        return t, y, dy[0] if dy else None

    def fill(self, field, encode):
        """Fills the PackedSeries message ``field`` with all of the series; ``encode(dtype
        code, array)`` makes each column's Tensor (see ``gpucompute.tensor.inline_tensor``)."""
        for name, column in zip(("t", "y", "dy"), self.joined()):
            if column is not None:
                getattr(field, name).CopyFrom(encode(tensor_pb2.FLOAT64, column))
        field.lengths.extend(self.lengths)

    def ranges(self, parts, max_part_bytes=0):
        """``[(begin, end)]``: consecutive runs of series of about equal bytes, at most
        ``parts`` of them and none under MIN_SPLIT_BYTES; one run of all when that is all
        there is room for, or when a part would exceed ``max_part_bytes`` (> 0)."""
        n, total = len(self.lengths), self.nbytes
        parts = max(1, min(parts, n, total // MIN_SPLIT_BYTES))
        if parts <= 1 or (max_part_bytes > 0 and total > parts * max_part_bytes):
            return [(0, n)]
        filled = np.cumsum(self.lengths)  # samples up to and including each series
        goals = np.arange(1, parts) * (filled[-1] / parts)
        cuts = sorted({int(i) + 1 for i in np.searchsorted(filled, goals)} - {0, n})
        bounds = [0, *cuts, n]
        return list(zip(bounds, bounds[1:]))


# PeriodogramRequest: series = 1, packed_series = 13; Series and PackedSeries alike: t = 1,
# y = 2, dy = 3; Tensor.data = 3.
_SERIES_TAG = b"\x0a"
_PACKED_SERIES_TAG = b"\x6a"
_SERIES_ARRAY_TAGS = (b"\x0a", b"\x12", b"\x1a")
_TENSOR_DATA_TAG = b"\x1a"


@functools.lru_cache(maxsize=64)
def _tensor_header(code, shape, nbytes):
    """A Tensor's bytes up to its data: dtype, shape (a tuple), and the data's tag and length.
    Followed by the ``nbytes`` bytes of the data, the whole Tensor. Kept for the shapes last
    seen: a program sends arrays of a few shapes again and again."""
    return (tensor_pb2.Tensor(dtype=code, shape=shape).SerializeToString()
            + _TENSOR_DATA_TAG + encode_varint(nbytes))


class InlineArray:
    """A wire-ready array (see ``gpucompute.tensor.inline_tensor``) that a request written by
    hand (``SeriesRequest``) carries inline: its bytes are copied once, straight into the
    request's bytes, when gRPC serializes it."""
    __slots__ = ("code", "array")

    def __init__(self, code, array):
        self.code, self.array = code, array


class SeriesRequest:
    """A Periodogram request of one series, written by hand: ``request`` (the message without
    its series) serialized, followed by the ``Series`` of ``columns`` (t, y, dy; None where
    absent), each an ``InlineArray`` or a Tensor message (a reference, or an uploaded input's
    handle). What a plain call of one series sends: most of its client time is Python's work
    around the RPC, and a Series message would copy each array twice more on the way."""

    def __init__(self, request, columns):
        self.request, self._columns = request, columns

    def SerializeToString(self):  # noqa: N802 (gRPC's serializer protocol, as a message's)
        pieces = [self.request.SerializeToString(), _SERIES_TAG, b""]  # [2]: the Series' size
        size = 0
        for tag, column in zip(_SERIES_ARRAY_TAGS, self._columns):
            if column is None:
                continue
            if type(column) is InlineArray:
                a = column.array
                body = (_tensor_header(column.code, a.shape, a.nbytes), a)
                length = len(body[0]) + a.nbytes
            else:
                body = (column.SerializeToString(),)
                length = len(body[0])
            prefix = encode_varint(length)
            pieces += (tag, prefix, *body)
            size += 1 + len(prefix) + length
        pieces[2] = encode_varint(size)
        return b"".join(pieces)


def _total_bytes(pieces):
    """Bytes in ``pieces`` (bytes and arrays)."""
    return sum(p.nbytes if isinstance(p, np.ndarray) else len(p) for p in pieces)


class PackedPart:
    """Series ``[begin, end)`` of ``packed`` as one Periodogram request: ``base`` (the
    serialized request without series) followed by its ``packed_series`` field, written by
    hand so that the samples are copied once, straight from the caller's arrays into the
    message's bytes (``SerializeToString``, called by gRPC on the connection's own thread:
    the parts of one call are put together one after another, each sent as soon as it is)."""

    def __init__(self, base, packed, begin, end):
        self._base, self._packed, self._begin, self._end = base, packed, begin, end

    def SerializeToString(self):  # noqa: N802 (gRPC's serializer protocol, as a message's)
        lengths = self._packed.lengths[self._begin:self._end]
        count = sum(lengths)
        header = _tensor_header(tensor_pb2.FLOAT64, (count,), 8 * count)
        pieces = []
        for tag, column in zip(_SERIES_ARRAY_TAGS, self._packed.columns):
            pieces += [tag, encode_varint(len(header) + 8 * count), header]
            pieces += column[self._begin:self._end]
        pieces.append(compute_pb2.PackedSeries(lengths=lengths).SerializeToString())
        return b"".join([self._base, _PACKED_SERIES_TAG, encode_varint(_total_bytes(pieces)),
                         *pieces])

    def whole(self, request, encode):
        """``request`` (the parts' base) with all of the packed series, ``encode`` making each
        column's Tensor: sent as one when a part was refused, so that the error numbers the
        series as the caller did."""
        whole = compute_pb2.PeriodogramRequest()
        whole.CopyFrom(request)
        self._packed.fill(whole.packed_series, encode)
        return whole


def whole_request(request, parts, encode):
    """The request ``parts`` were cut from, to send as one: ``request`` itself, or for
    ``PackedPart``s their base with the packed series put back (``encode``: as in ``fill``)."""
    return parts[0].whole(request, encode) if isinstance(parts[0], PackedPart) else request


# ---------------------------------------------------------------------- one call's tensors

# Idle expiry of the tensors a call moves: a client that dies mid-call leaves them for this long.
CALL_TENSOR_EXPIRY_MS = 60_000


@functools.lru_cache(maxsize=8)
def _auto_placement(threshold):
    return tensor_pb2.OutputPlacement(keep_above_bytes=threshold,
                                      idle_expiry_ms=CALL_TENSOR_EXPIRY_MS)


class CallTensors:
    """The large tensors of one plain call, moved in parallel without the caller asking.

    Inputs of at least ``threshold`` bytes become resident tensors (``encode`` reserves each
    with CreateTensor and puts its handle in the request; ``send`` uploads all of them at once
    over the transfer connections); outputs over ``threshold`` bytes stay on the server
    (``placement``: ``keep_above_bytes``) and ``fetch`` gets each the same way into a new
    array. All of them are deleted when the call ends, whatever happened (``close``); while in
    flight they count against the caller's quota, and a client that dies leaves them for
    ``CALL_TENSOR_EXPIRY_MS`` at most.

    Args:
      stub: the client's ComputeStub; transfers: its ``Transfers``; metadata: per call.
      threshold: bytes from which a tensor moves in parallel (0: never).
      timeout: each RPC's deadline in seconds.
    """

    def __init__(self, stub, transfers, metadata, threshold, timeout):
        self._stub, self._transfers, self._metadata = stub, transfers, metadata
        self._threshold, self._timeout = int(threshold or 0), timeout
        self._pending = []   # (handle, byte view) to upload
        self._inputs = []    # handles of uploaded inputs, deleted after the call
        self._outputs = []   # handles of kept outputs, deleted once fetched
        self._auto_placement = False
        self._deleting = []  # DeleteTensor futures

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def encode(self, code, a, inline=inline_tensor):
        """The ``encode`` of ``gpucompute.tensor``: large arrays by handle, others as
        ``inline(code, a)`` (a Tensor carrying them; ``InlineArray`` for a request written by
        hand)."""
        if self._threshold <= 0 or a.nbytes < self._threshold:
            return inline(code, a)
        info = self._stub.CreateTensor(
            compute_pb2.CreateTensorRequest(dtype=code, shape=a.shape,
                                            idle_expiry_ms=CALL_TENSOR_EXPIRY_MS),
            timeout=self._timeout, metadata=self._metadata)
        self._inputs.append(info.handle)
        self._pending.append((info.handle, memoryview(a).cast("B")))
        return tensor_pb2.Tensor(dtype=code, shape=a.shape, handle=info.handle)

    def placement(self, placement):
        """The request's OutputPlacement: the caller's own, else ``keep_above_bytes``."""
        if placement is not None or self._threshold <= 0:
            return placement
        self._auto_placement = True
        return _auto_placement(self._threshold)

    def send(self):
        """Uploads every reserved input, all slices of all of them at once."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        views = [view for _, view in pending]
        headers = [compute_pb2.PutTensorHeader(handle=h) for h, _ in pending]
        self._transfers.map(
            lambda conn, s: self._transfers.put(conn, views[s[0]], s[1], s[2], self._timeout,
                                                headers[s[0]]),
            slices([len(v) for v in views], CALL_STREAMS))

    def release_inputs(self):
        """Deletes the uploaded inputs (once the call has answered), without waiting."""
        if self._inputs:
            self._delete(self._inputs)
            self._inputs = []

    @property
    def keeps_outputs(self):
        """True when this call placed the outputs (``placement``): a handle among them is
        one it kept, for ``fetch``."""
        return self._auto_placement

    def fetch(self, tensor):
        """An output this call kept (a Tensor naming its handle) fetched into a new array, and
        deleted on the server."""
        self._outputs.append(tensor.handle)
        shape = tuple(int(s) for s in tensor.shape)
        count = int(np.prod(shape, dtype=np.int64))
        wide = tensor.dtype == tensor_pb2.BFLOAT16  # fetched as bits, widened after
        out = np.empty(count, np.dtype("<u2") if wide else numpy_dtype(tensor.dtype))
        view = memoryview(out).cast("B")
        self._transfers.map(
            lambda conn, s: self._transfers.get(conn, tensor.handle, s[1], s[2] - s[1],
                                                view, 0, self._timeout),
            slices([len(view)], CALL_STREAMS))
        self._delete([tensor.handle])
        self._outputs.remove(tensor.handle)
        if wide:
            return from_bytes(out, tensor.dtype, shape)
        return out.reshape(shape)

    def close(self):
        """Deletes whatever this call still holds on the server and waits for the deletes."""
        if not (self._inputs or self._outputs or self._deleting):
            return
        self._delete(self._inputs + self._outputs)
        self._inputs, self._outputs, self._pending = [], [], []
        for future in self._deleting:
            try:
                future.result()
            except grpc.RpcError:
                pass  # gone already (expired, or the server restarted): nothing left behind
        self._deleting = []

    def _delete(self, handles):
        for h in handles:
            self._deleting.append(self._stub.DeleteTensor.future(
                compute_pb2.DeleteTensorRequest(handle=h), timeout=self._timeout,
                metadata=self._metadata))
