"""The gpucompute gRPC client: a channel, deadlines on every call, NumPy in and out.

Threading: a ``Client`` may be shared by many threads (gRPC channels are thread-safe);
``last_timings`` and ``last_trailing_metadata`` are kept per thread. Errors from the server
propagate as ``grpc.RpcError`` (use ``.code()`` and ``.details()``).
"""

import contextlib
import dataclasses
import functools
import gc
import itertools
import math
import os
import threading

import grpc
import numpy as np
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor

from gpucompute import assimilation, models, stream, transfer
from gpucompute.balance import addresses, host_of
from gpucompute.grids import AutoGrid, UniformGrid, set_frequency_grid, uniform_frequencies
from gpucompute.shared_memory import SharedMemoryRegion
from gpucompute.tensor import (TensorHandle, compute_dtype, from_bytes, from_tensor, is_prepared,
                               itemsize, numpy_dtype, to_tensor, wire_dtype)
from gpucompute.v1 import compute_pb2, compute_pb2_grpc, tensor_pb2

_MiB = 1 << 20
DEFAULT_MAX_MESSAGE_BYTES = 1024 * _MiB

NORMALIZATIONS = {
    "standard": compute_pb2.NORMALIZATION_STANDARD,
    "model": compute_pb2.NORMALIZATION_MODEL,
    "log": compute_pb2.NORMALIZATION_LOG,
    "psd": compute_pb2.NORMALIZATION_PSD,
}
_TIMING_PREFIX = "x-gpucompute-"
CLIENT_ID_KEY = "x-gpucompute-client"
AUTHORIZATION_KEY = "authorization"
DEFAULT_TENSOR_CHUNK_BYTES = transfer.CHUNK_BYTES
# Inputs and outputs of at least this many bytes move in parallel (see ``Client``).
DEFAULT_TRANSFER_THRESHOLD_BYTES = 4 * _MiB


@dataclasses.dataclass
class PeriodogramResult:
    """One series' periodogram.

    Attributes:
      frequency: float64 array, cycles per unit of t (the grid the server used; a uniform
        grid's is built on first use, so a survey that reads only peaks never builds it).
      power: array of the request's dtype (float32 or float64), one value per frequency, in
        the request's normalization; None with ``output="discard"``.
      peak_frequency, peak_power, peak_index: the largest power and where it is (server-side).
      grid: the ``UniformGrid`` used, or None for explicit frequencies.
      method: "direct" or "fast", the method the server used.
      peaks: with ``top_k``: dicts ``frequency, power, index, false_alarm_probability`` of the
        highest local maxima, highest first.
      false_alarm: with ``false_alarm``: dict ``peak_probability`` (of ``peak_power``),
        ``probabilities`` (of the requested powers), ``levels`` (of the requested
        probabilities), as float64 arrays.
      model: with ``model``/``model_parameters``: dict ``frequency``, ``parameters``
        (Astropy's ``model_parameters``), ``offset`` and ``y`` (the model at the requested
        times, or None).
      explicit_frequency: the frequencies asked for when they were not a uniform grid.
    """
    power: np.ndarray
    peak_frequency: float
    peak_power: float
    peak_index: int
    grid: UniformGrid = None
    method: str = "direct"
    peaks: list = dataclasses.field(default_factory=list)
    false_alarm: dict = None
    model: dict = None
    explicit_frequency: np.ndarray = None

    @property
    def frequency(self):
        # Built once, on first use. (Not functools.cached_property: before Python 3.12 it takes
        # a lock on every first use, a noticeable part of a small call's client time.)
        frequency = self.__dict__.get("_frequency")
        if frequency is None:
            frequency = (self.explicit_frequency if self.explicit_frequency is not None
                         else uniform_frequencies(self.grid))
            self.__dict__["_frequency"] = frequency
        return frequency

    def __iter__(self):
        """Unpacks as ``frequency, power``, like ``LombScargle.autopower``."""
        return iter((self.frequency, self.power))


def _pem(value):
    """PEM ``bytes`` as given; a ``str`` or path-like names a file to read; None stays None."""
    if value is None or isinstance(value, bytes):
        return value
    with open(value, "rb") as f:
        return f.read()


def health(target, *, service="", timeout=5.0, credentials=None):
    """grpc.health.v1 Check of ``target`` (e.g. the server's plaintext ``--health_port``): the
    status name, "SERVING" or "NOT_SERVING" (errors raise ``grpc.RpcError``). No token needed.
    The messages are encoded by hand: the health service's generated code is not a dependency.
    """
    request = b""
    if service:
        data = service.encode()
        request = b"\x0a" + transfer.encode_varint(len(data)) + data
    channel = (grpc.insecure_channel(target) if credentials is None
               else grpc.secure_channel(target, credentials))
    with channel:
        response = channel.unary_unary("/grpc.health.v1.Health/Check")(request, timeout=timeout)
    status = response[1] if len(response) >= 2 and response[0] == 0x08 else 0
    return {0: "UNKNOWN", 1: "SERVING", 2: "NOT_SERVING", 3: "SERVICE_UNKNOWN"}.get(status, "UNKNOWN")


# A split periodogram's part refused with one of these is sent again whole: the error then
# names the series as the caller numbered them (a part numbers them from its first).
_SPLIT_RETRIED = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                  grpc.StatusCode.FAILED_PRECONDITION)


class _PartRefused(Exception):
    """A part of a split Periodogram call was refused for what it holds (``_SPLIT_RETRIED``):
    the whole request is sent again as one."""


class _SplitResponse:
    """The responses of a split Periodogram call as they come, what ``periodogram``'s decode
    reads of a PeriodogramResponse: ``parts`` yields them in order, each waited for when it is
    reached, so that the first are decoded while the others are still on their way;
    ``results`` joins all of their results. A part that failed raises once every part has
    answered and the outputs the others kept are deleted: ``_PartRefused`` (from its error)
    when it was refused for what it holds, else its error."""

    def __init__(self, client, futures, timeout):
        self._client, self._futures, self._timeout = client, futures, timeout

    @property
    def parts(self):
        for k, future in enumerate(self._futures):
            answer = future.result()
            if isinstance(answer, grpc.RpcError):
                self._fail(answer)
            if k == 0:
                self._client._local.metadata = answer[1]  # the timings are the first part's
            yield answer[0]

    @functools.cached_property
    def results(self):
        return [r for part in self.parts for r in part.results]

    def _fail(self, error):
        answers = [future.result() for future in self._futures]
        kept = [r.power.handle for a in answers if not isinstance(a, grpc.RpcError)
                for r in a[0].results if r.power.WhichOneof("payload") == "handle"]
        for handle in kept:  # some may be gone already (fetched and deleted)
            try:
                self._client.stub.DeleteTensor(compute_pb2.DeleteTensorRequest(handle=handle),
                                               timeout=self._timeout,
                                               metadata=self._client._metadata)
            except grpc.RpcError:
                pass  # gone, or expires on its own
        if error.code() in _SPLIT_RETRIED:
            raise _PartRefused() from error
        raise error


def _handles_in(obj, depth=0):
    """The ``TensorHandle``s in a call's arguments or result: in lists, tuples, dicts and result
    dataclasses, a few levels deep (arrays are not looked into)."""
    if isinstance(obj, TensorHandle):
        yield obj
        return
    if depth >= 4:
        return
    if isinstance(obj, (list, tuple)):
        items = obj
    elif isinstance(obj, dict):
        items = obj.values()
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        items = [getattr(obj, f.name) for f in dataclasses.fields(obj)]
    else:
        return
    for item in items:
        yield from _handles_in(item, depth + 1)


def _on_servers(kind, undo=None):
    """How a method runs on a client of several servers (``balance``): ``"next"``, on the
    server of the tensors it names, else the next server in turn; ``"every"``, on every server
    (models, shared-memory regions), returning the first's result; when one fails,
    ``undo(member, result)`` reverses it on those it reached, so that nothing stays set up on
    some servers only. A client of one server runs it as written."""
    def wrap(method):
        @functools.wraps(method)
        def call(self, *args, **kwargs):
            if self._members is None:
                return method(self, *args, **kwargs)
            return self._on_members(kind, method.__name__, args, kwargs, undo)
        return call
    return wrap


class Client:
    """A connection to a gpucompute server, or to several (round robin).

    Args:
      target: ``"host:port"`` (any gRPC target string). A target of several servers
        (``"ipv4:10.0.0.1:50051,10.0.0.2:50051"``, or a name with several addresses such as
        ``"dns:///gpucompute-headless:50051"``) is balanced: see ``balance``.
      timeout: deadline of each call in seconds, unless a call overrides it.
      options: extra gRPC channel options ``[(key, value), ...]``; they override the defaults,
        which raise the send/receive message limits to 1 GiB.
      credentials: ``grpc.ChannelCredentials`` for TLS; when None, TLS is made from the three
        PEM arguments below if any is given, else the channel is plaintext.
      client_id: sent as ``x-gpucompute-client`` metadata on every call: the owner of this
        client's resident tensors and shared-memory regions (default: the server sees the
        connection's address without its port). A server with tokens ignores it: there the
        token's name is the owner.
      root_certificates: CA certificates (PEM) the server's certificate must chain to (None:
        gRPC's default roots). Like ``private_key`` and ``certificate_chain``: ``bytes`` are
        the PEM data itself, a ``str`` or ``os.PathLike`` is the path of a PEM file.
      private_key, certificate_chain: the client's key and certificate, for mutual TLS.
      server_name: the name the server's certificate must carry, when it is not the target's
        host (e.g. a target given as an IP address).
      token: bearer token of a server run with ``--auth_token_file``, sent as
        ``authorization: Bearer <token>`` on every call (None: $GPUCOMPUTE_TOKEN, if set; ""
        sends none).
      transfer_threshold: plain calls move every input array and every output of at least
        this many bytes (default 4 MiB) as slices over several connections at once (one
        connection moves ~0.5 GB/s, several move GB/s): inputs are uploaded into resident
        tensors and outputs kept and fetched, all deleted when the call ends. Invisible to the
        caller but for the speed; 0 sends everything inline. See ``gpucompute.transfer``.
      balance: with a target of several addresses (resolved now), each call goes to the next
        server in turn, with all the messages it sends; calls naming a resident tensor go to
        the server that holds it; models and shared-memory regions are set up on every
        server. False: gRPC's pick_first, every call to one server. ``pin()`` gives a client
        of one of them. See ``gpucompute.balance``.
    """

    def __init__(self, target, *, timeout=60.0, options=None, credentials=None, client_id=None,
                 root_certificates=None, private_key=None, certificate_chain=None,
                 server_name=None, token=None,
                 transfer_threshold=DEFAULT_TRANSFER_THRESHOLD_BYTES, balance=True):
        if credentials is None and any(x is not None for x in
                                       (root_certificates, private_key, certificate_chain)):
            credentials = grpc.ssl_channel_credentials(
                root_certificates=_pem(root_certificates), private_key=_pem(private_key),
                certificate_chain=_pem(certificate_chain))
        merged = {
            "grpc.max_send_message_length": DEFAULT_MAX_MESSAGE_BYTES,
            "grpc.max_receive_message_length": DEFAULT_MAX_MESSAGE_BYTES,
        }
        if server_name:
            merged["grpc.ssl_target_name_override"] = server_name
        merged.update(dict(options or ()))
        servers = addresses(target) if balance else [target]
        if len(servers) > 1:
            merged.setdefault("grpc.lb_policy_name", "round_robin")
        opts = list(merged.items())
        self._channel_options, self._credentials = opts, credentials
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=opts)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=opts)
        self.target = target
        self.timeout = timeout
        self.stub = compute_pb2_grpc.ComputeStub(self._channel)
        self._periodogram = transfer.periodogram_stub(self._channel)
        self._local = threading.local()
        if token is None:
            token = os.environ.get("GPUCOMPUTE_TOKEN", "").strip()
        self._auth_metadata = ((AUTHORIZATION_KEY, f"Bearer {token}"),) if token else ()
        self._metadata = (self._auth_metadata
                          + (((CLIENT_ID_KEY, str(client_id)),) if client_id else ())) or None
        self._transfers = transfer.Transfers(self._channel, self._transfer_channel,
                                             self._metadata)
        self.transfer_threshold = int(transfer_threshold or 0)
        self._regions = {}  # registered name -> SharedMemoryRegion (to decode outputs there)
        # Several servers: a client of one per address, the next in turn, and the server of
        # each resident tensor made through this client (handle -> member).
        self._members, self._turn, self._homes = None, itertools.count(), {}
        if len(servers) > 1:
            member_options = dict(merged)
            del member_options["grpc.lb_policy_name"]
            host = host_of(target)
            if credentials is not None and host:  # TLS checks the name asked for, not the IP
                member_options.setdefault("grpc.ssl_target_name_override", host)
            self._members = [
                Client(address, timeout=timeout, options=list(member_options.items()),
                       credentials=credentials, client_id=client_id, token=token,
                       transfer_threshold=transfer_threshold, balance=False)
                for address in servers]

    # ------------------------------------------------------------------ lifecycle

    def close(self):
        """Closes the channel; calls in flight are cancelled."""
        self._channel.close()
        self._transfers.close()
        for member in self._members or ():
            member.close()

    @property
    def servers(self):
        """The targets this client calls: its target, or each address of it when balanced."""
        return [m.target for m in self._members] if self._members else [self.target]

    def pin(self):
        """A client of one server, for work that must stay there: this client when it has one
        server, else the next in turn (closed with this client; do not close it)."""
        if self._members is None:
            return self
        return self._members[next(self._turn) % len(self._members)]

    def _on_members(self, kind, name, args, kwargs, undo=None):
        """Runs method ``name`` on the members ``kind`` says (``_on_servers``)."""
        if kind == "every":
            done = []
            try:
                for member in self._members:
                    done.append((member, getattr(member, name)(*args, **kwargs)))
            except Exception:
                for member, result in done if undo else ():
                    with contextlib.suppress(Exception):  # gone already, or its server is
                        undo(member, result)              # unreachable: nothing more to do
                raise
            return done[0][1]
        named = {h.handle for h in _handles_in((args, kwargs))}
        handle = kwargs.get("handle", args[0] if args else None)
        if name in ("write_tensor", "get_tensor", "get_tensor_bytes", "delete_tensor") \
                and isinstance(handle, str):
            named.add(handle)
        unknown = sorted(named - self._homes.keys())
        if unknown:
            raise ValueError(f"tensor {unknown[0]!r} was not made through this client, which "
                             f"balances over {len(self._members)} servers: use the client "
                             "that made it (client.pin() gives a client of one server)")
        homes = {id(self._homes[h]): self._homes[h] for h in named}
        if len(homes) > 1:
            raise ValueError("the call names resident tensors of different servers; make them "
                             "through one client.pin()")
        member = (next(iter(homes.values())) if homes
                  else self._members[next(self._turn) % len(self._members)])
        try:
            result = getattr(member, name)(*args, **kwargs)
        finally:
            self._local.metadata = getattr(member._local, "metadata", ())
        for h in _handles_in(result):
            self._homes[h.handle] = member
        if name == "delete_tensor":
            self._homes.pop(handle.handle if isinstance(handle, TensorHandle) else handle, None)
        return result

    def _transfer_channel(self, i):
        """Extra connection ``i`` (1, 2, ...) for parallel transfers: a channel of its own with a
        local subchannel pool and an option of its own, so a separate TCP connection."""
        opts = self._channel_options + [("grpc.use_local_subchannel_pool", 1),
                                        ("gpucompute.transfer_channel", i)]
        if self._credentials is None:
            return grpc.insecure_channel(self.target, options=opts)
        return grpc.secure_channel(self.target, self._credentials, options=opts)

    def _operation(self, method, build, output, timeout, decode, split=None):
        """One operation call as every plain call makes it: ``build(encode)`` makes the request
        (large arrays reserved as resident tensors by ``encode``), the output placement is the
        caller's (``output``) or the automatic one, the large inputs are uploaded in parallel,
        the call is made, and ``decode(response, output_of)`` builds the result, where
        ``output_of(tensor)`` gives each output as the caller gets it (large ones fetched in
        parallel). Whatever was moved is deleted before this returns or raises.

        ``split(request)``, for periodograms: the request as several, sent at once over the
        transfer connections, their responses decoded as they come (``_split_call``)."""
        with transfer.CallTensors(self.stub, self._transfers, self._metadata,
                                  self.transfer_threshold,
                                  self.timeout if timeout is None else timeout) as moved:
            request = build(moved.encode)
            placement = moved.placement(None if output is None else self._placement(output))
            if placement is not None:
                request.output_placement.CopyFrom(placement)
            moved.send()
            output_of = functools.partial(self._output, moved=moved)
            parts = [request] if split is None else split(request)
            if len(parts) == 1:
                response = self._call(method, parts[0], timeout)
                moved.release_inputs()
                return decode(response, output_of)
            try:
                return decode(self._split_call(parts, timeout), output_of)
            except _PartRefused:
                whole = transfer.whole_request(request, parts, moved.encode)
                moved.send()
                return decode(self._call(method, whole, timeout), output_of)

    def _split_call(self, parts, timeout):
        """A Periodogram request as ``parts`` (``transfer.split_series`` or
        ``transfer.PackedPart``s), each sent on a transfer connection of its own, all at once:
        a ``_SplitResponse``. A part refused for what it holds makes ``_operation`` send the
        whole request as one, so that the error names its series as the caller numbered them;
        any other failure is raised as it is."""
        timeout = self.timeout if timeout is None else timeout

        def send(conn, part):
            try:
                return self._transfers.periodogram(conn, part, timeout)
            except grpc.RpcError as e:
                return e

        return _SplitResponse(self, self._transfers.submit(send, parts), timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def wait_for_ready(self, timeout=None):
        """Blocks until the channel is connected (``grpc.FutureTimeoutError`` after timeout s)."""
        grpc.channel_ready_future(self._channel).result(
            timeout=self.timeout if timeout is None else timeout)

    # ------------------------------------------------------------------ timings

    @property
    def last_trailing_metadata(self):
        """Trailing metadata ``((key, value), ...)`` of this thread's last successful call."""
        metadata = getattr(self._local, "metadata", ())
        if not isinstance(metadata, tuple):  # the call, kept: read on demand
            metadata = self._local.metadata = tuple(metadata.trailing_metadata() or ())
        return metadata

    @property
    def last_timings(self):
        """Server-side timings of this thread's last successful call, from trailing metadata.

        A dict with ints, e.g. ``{"decode_us", "queue_us", "compute_us", "total_us",
        "batch_requests"}``: microseconds parsing and decoding the request, queued before
        dispatch, in compute, in the server in total (the rest: building the response), and
        the number of requests coalesced into the batch that carried this call.
        """
        timings = {}
        for key, value in self.last_trailing_metadata:
            if key.startswith(_TIMING_PREFIX):
                name = key[len(_TIMING_PREFIX):].replace("-", "_")
                try:
                    timings[name] = int(value)
                except (TypeError, ValueError):
                    timings[name] = value
        return timings

    def _call(self, method, request, timeout):
        response, call = method.with_call(
            request, timeout=self.timeout if timeout is None else timeout,
            metadata=self._metadata)
        self._local.metadata = call  # its trailing metadata is read when asked for
        return response

    # ------------------------------------------------------------------ tensor placement

    def _placement(self, output):
        """``output`` argument -> ``OutputPlacement`` (None: inline)."""
        if output is None:
            return None
        if isinstance(output, str):
            if output == "keep":
                return tensor_pb2.OutputPlacement(keep=True)
            if output == "discard":
                return tensor_pb2.OutputPlacement(discard=True)
            raise ValueError(f"output {output!r}: expected None, 'keep', 'discard', a "
                             "SharedMemoryRegion or (region, offset[, length])")
        region, offset, length = output, 0, 0
        if isinstance(output, tuple):
            region, offset = output[0], int(output[1])
            length = int(output[2]) if len(output) > 2 else 0
        if not isinstance(region, SharedMemoryRegion) or region.name is None:
            raise ValueError("output must be 'keep' or a registered SharedMemoryRegion "
                             "(Client.register_shared_memory)")
        return tensor_pb2.OutputPlacement(shared_memory=tensor_pb2.SharedMemoryRef(
            region=region.name, offset=offset, length=length))

    def _output(self, tensor, moved):
        """An output Tensor as the caller gets it: inline -> a new array; kept -> a
        ``TensorHandle``, or a new array when the call's ``moved`` (``transfer.CallTensors``)
        kept it; in shared memory -> a NumPy view of the region's bytes; discarded -> None."""
        kind = tensor.WhichOneof("payload")
        if kind == "data":
            return from_tensor(tensor)
        if kind is None and math.prod(tensor.shape) != 0:
            return None  # output="discard"
        if kind == "handle" and moved.keeps_outputs:
            return moved.fetch(tensor)
        if kind == "handle":
            shape = tuple(int(s) for s in tensor.shape)
            return TensorHandle(handle=tensor.handle, dtype=tensor.dtype, shape=shape,
                                nbytes=itemsize(tensor.dtype) * int(np.prod(shape, dtype=np.int64)))
        if kind == "shared_memory":
            ref = tensor.shared_memory
            region = self._regions.get(ref.region)
            if region is None:
                raise RuntimeError(f"output in shared-memory region {ref.region!r}, which this "
                                   "client did not register")
            return region.ndarray(tuple(tensor.shape), tensor.dtype, ref.offset)
        return from_tensor(tensor)

    # ------------------------------------------------------------------ periodograms

    @_on_servers("next")
    def periodogram(self, series, frequency=None, *, fit_mean=True, center_data=True,
                    normalization="standard", dtype="float64", samples_per_peak=5,
                    nyquist_factor=5, minimum_frequency=None, maximum_frequency=None,
                    method="auto", nterms=1, top_k=0, false_alarm=None,
                    model_parameters=False, output=None, timeout=None):
        """Lomb-Scargle periodograms of many series in one RPC; returns ``PeriodogramResult``s.

        Args:
          series: a list whose items are ``(t, y)``, ``(t, y, dy)`` or a dict with keys
            ``t``, ``y`` and optionally ``dy`` and ``frequency`` (a per-series grid that
            overrides ``frequency``). t, y, dy are 1-D array-likes of one length, sent as
            float64, or ``TensorHandle``/``SharedMemoryTensor`` references (float32 or
            float64); series may differ in length.
          frequency: the grid for every series; see ``gpucompute.grids``. None: Astropy's
            autofrequency per series, from ``samples_per_peak``, ``nyquist_factor``,
            ``minimum_frequency``, ``maximum_frequency`` (ignored for other grids).
            A dict item may also have ``model``: ``{"frequency": f, "t": times}`` (either
            optional) for that series' best-fit model.
          method: "auto" (default), "direct" or "fast" (NUFFT, uniform grids; Astropy's
            names "slow"/"cython"/"chi2" mean direct and "fastchi2" fast).
          nterms: Fourier terms of the model (1 .. 8), Astropy's ``nterms``.
          top_k: return the k highest local maxima per series (``PeriodogramResult.peaks``).
          false_alarm: None, a method name ("baluev", "davies", "naive", "bootstrap") or a
            dict with ``method``, ``probabilities`` (levels wanted), ``powers``
            (probabilities wanted), ``n_bootstraps``, ``seed``.
          model_parameters: return every series' best-fit model at its peak frequency.
          output: None (powers inline), ``"keep"`` (each power stays on the server: a
            ``TensorHandle``), ``"discard"`` (no powers come back: ``power`` is None, peaks,
            false-alarm probabilities and models as usual) or a registered
            ``SharedMemoryRegion`` / ``(region, offset[, length])`` (powers written there,
            returned as views).
          Other arguments: as ``lombscargle``.

        Returns:
          A list of ``PeriodogramResult``, in the order of ``series``.

        One series given as ``(t, y)`` or ``(t, y, dy)`` goes as a request written by hand, its
        arrays copied once, straight into the request's bytes (``transfer.SeriesRequest``).
        Two or more series given as ``(t, y)`` or ``(t, y, dy)`` arrays (all or none with dy)
        travel packed: each array's series end to end in one tensor (``PackedSeries``) instead
        of a message per series, and their results come back as columns. More than ~256 KiB
        of them go as up to 16 requests of consecutive series at once, each over a connection
        of its own, the samples copied once, from the caller's arrays straight into each
        request's bytes (``transfer.PackedPart``); past 16 times ``transfer_threshold`` as one
        request whose tensors are uploaded over several connections. Other lists (per-series
        grids or models, references) of more than ~256 KiB go as up to 16 requests of
        consecutive series (``transfer.split_series``). Neither is cut when the powers go to
        shared memory or the false-alarm method is bootstrap, where the answer would change.
        Either way the results and errors are the same, series numbered as given.
        """
        if frequency is None:
            frequency = AutoGrid(samples_per_peak, nyquist_factor,
                                 minimum_frequency, maximum_frequency)
        settings = (frequency, fit_mean, center_data, normalization, dtype, method, nterms,
                    top_k, model_parameters, false_alarm)
        request = compute_pb2.PeriodogramRequest()
        explicit = None
        if isinstance(frequency, (UniformGrid, AutoGrid)):
            try:
                request.CopyFrom(_settings_template(*settings))
            except TypeError:  # an unhashable argument (e.g. a false-alarm dict)
                explicit = _set_settings(request, *settings)
        else:
            explicit = _set_settings(request, *settings)
        grid_msg = request.frequency
        shared_grid = (grid_msg, explicit)
        grids = []  # (FrequencyGrid in effect, explicit frequencies or None) per series
        packed = _packed_series(series)
        packed_ranges = [None]  # series ranges of the packed requests; one: the whole
        lone = _lone_series(series)
        lone_columns = []  # its t, y, dy as they go (transfer.SeriesRequest)

        def build(encode):
            if lone is not None:
                inline = functools.partial(encode, inline=transfer.InlineArray)
                lone_columns[:] = [None if a is None else to_tensor(a, _FLOAT64, inline)
                                   for a in lone]
                grids.append(shared_grid)
                return request
            if packed is None:
                series_field = request.series
                for item in series:
                    own_grid = _add_series(series_field, item, encode)
                    grids.append(shared_grid if own_grid is None else own_grid)
                return request
            grids.extend([shared_grid] * len(packed.lengths))
            request.result_columns = True  # many results: a few arrays to decode
            if transfer.splittable(request, None if output is None else self._placement(output)):
                packed_ranges[:] = packed.ranges(transfer.SPLIT_PARTS, self.transfer_threshold)
            if len(packed_ranges) == 1:
                packed.fill(request.packed_series, encode)
            return request

        def split(request):
            if lone is not None:
                return [transfer.SeriesRequest(request, lone_columns)]
            if packed is None:
                return transfer.split_series(request)
            if len(packed_ranges) == 1:
                return [request]
            base = request.SerializeToString()
            return [transfer.PackedPart(base, packed, b, e) for b, e in packed_ranges]

        # Whether a result may hold more than its power and peak (a lone series: only if asked).
        extras = lone is None or bool(top_k or false_alarm is not None or model_parameters)

        def decode(response, output_of):
            if not request.result_columns:
                results = response.results
                if len(results) != len(grids):
                    raise RuntimeError(f"server returned {len(results)} results for "
                                       f"{len(grids)} series")
                return [_result(r, *g, output_of, extras) for r, g in zip(results, grids)]
            out = []
            for part in getattr(response, "parts", [response]):  # as they come when split
                out += _results_from_columns(part, grids[len(out):len(out) + len(part.results)],
                                             output_of, discarded=output == "discard",
                                             with_models=request.model_parameters)
            if len(out) != len(grids):
                raise RuntimeError(f"server returned {len(out)} results for {len(grids)} series")
            return out

        return self._operation(self._periodogram, build, output, timeout, decode, split)

    def lombscargle(self, t, y, dy=None, frequency=None, *, fit_mean=True, center_data=True,
                    normalization="standard", dtype="float64", samples_per_peak=5,
                    nyquist_factor=5, minimum_frequency=None, maximum_frequency=None,
                    method="auto", nterms=1, output=None, timeout=None):
        """Lomb-Scargle periodogram of one series, with Astropy ``LombScargle`` semantics.

        ``client.lombscargle(t, y, dy, f, fit_mean=a, center_data=b, normalization=n)`` equals
        ``LombScargle(t, y, dy, fit_mean=a, center_data=b, normalization=n).power(f)``, and with
        ``frequency=None`` it equals ``LombScargle(...).autopower(samples_per_peak=...,
        nyquist_factor=..., minimum_frequency=..., maximum_frequency=...)``.

        SciPy: ``scipy.signal.lombscargle(t, y - y.mean(), 2 * np.pi * f)`` (angular
        frequencies, no weights, no floating mean) equals
        ``lombscargle(t, y, None, f, fit_mean=False, center_data=True, normalization="psd")``.

        Args:
          t: observation times (any unit; frequencies are cycles per that unit).
          y: observations, same length as t.
          dy: measurement errors (> 0), same length; None means unweighted.
          frequency: None (automatic grid), ``UniformGrid(f0, df, n)``, ``AutoGrid(...)``, a
            ``{"f0", "df", "n"}`` dict, or explicit frequencies (array-like, > 0).
          fit_mean: fit a floating mean with the sinusoid (generalised Lomb-Scargle).
          center_data: subtract the (weighted) mean of y first.
          normalization: "standard", "model", "log" or "psd".
          dtype: "float64" or "float32": the server's compute type and the power's dtype.
          samples_per_peak, nyquist_factor, minimum_frequency, maximum_frequency: the
            automatic grid's parameters, used only when frequency is None.
          output: where the power goes (see ``periodogram``); default inline.
          timeout: this call's deadline in seconds (default: the client's).

        Returns:
          ``(frequency, power)``: float64 frequencies and the power at each.
        """
        series = (t, y) if dy is None else (t, y, dy)
        (result,) = self.periodogram(
            [series], frequency, fit_mean=fit_mean, center_data=center_data,
            normalization=normalization, dtype=dtype, samples_per_peak=samples_per_peak,
            nyquist_factor=nyquist_factor, minimum_frequency=minimum_frequency,
            maximum_frequency=maximum_frequency, method=method, nterms=nterms, output=output,
            timeout=timeout)
        return result.frequency, result.power

    def lomb_scargle(self, t, y, dy=None, **kwargs):
        """A ``gpucompute.LombScargle``: Astropy's ``LombScargle`` interface, on this server."""
        from gpucompute.lombscargle import LombScargle
        return LombScargle(t, y, dy, client=self, **kwargs)

    def lombscargle_batch(self, series, frequency=None, *, return_peaks=False, **kwargs):
        """``lombscargle`` of many series in one RPC.

        ``series`` is as in ``periodogram``; keyword arguments are those of ``lombscargle``.
        Returns a list of ``(frequency, power)``, or of ``PeriodogramResult`` (which also
        unpacks as ``frequency, power``) when ``return_peaks`` is true.
        """
        results = self.periodogram(series, frequency, **kwargs)
        if return_peaks:
            return results
        return [(r.frequency, r.power) for r in results]

    # ------------------------------------------------------------------ dense models

    @_on_servers("every", undo=lambda member, info: member.unload_model(info["name"]))
    def load_model(self, name, layers, dtype="bfloat16", allow_tf32=False,
                   chunk_bytes=models.DEFAULT_CHUNK_BYTES, *, timeout=None):
        """Uploads a stack of dense layers and keeps it resident on the server's GPU(s).

        Each layer computes ``y = activation(LayerNorm(x) @ weight + bias)``.

        Args:
          name: the model's name, 1-128 characters of ``[A-Za-z0-9_.-]``.
          layers: a list of dicts, one per layer, with keys
            ``weight`` (required): array of shape ``(in_features, out_features)``;
            ``bias``: ``(out_features,)``, omitted or None for none;
            ``layernorm``: ``True``/``False`` (default), or a dict with optional ``eps``
            (default 1e-5), ``gamma`` and ``beta`` (``(in_features,)``; default 1 and 0);
            ``activation``: ``"gelu_tanh"``, ``"gelu_erf"``, ``"relu"``, ``"silu"`` or
            ``"none"`` (default).
            Arrays travel as they are if float16/float32/float64 (or ml_dtypes bfloat16),
            else as float32; the server converts them to ``dtype``.
          dtype: storage and compute type: ``"bfloat16"``, ``"float16"`` or ``"float32"``.
          allow_tf32: float32 only: let the matrix products use TF32 tensor cores.
          chunk_bytes: tensor bytes per streamed message; the default keeps every message under
            gRPC's default 4 MiB limit, so models of any size load.
          timeout: this call's deadline in seconds (large models need more than the default).

        Returns:
          The loaded model as a dict (see ``list_models``).

        Raises:
          ValueError/TypeError for malformed ``layers`` (before anything is sent);
          ``grpc.RpcError``: INVALID_ARGUMENT with a field path (e.g. shapes that do not
          chain: ``header.layers[1].weight.shape``), ALREADY_EXISTS for a loaded name,
          RESOURCE_EXHAUSTED beyond the server's limits or memory. Nothing stays loaded after
          an error.
        """
        if int(chunk_bytes) <= 0:
            raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
        header, tensors = models.build_model(name, layers, dtype, allow_tf32)
        info = self._call(self.stub.LoadModel, models.chunks(header, tensors, chunk_bytes),
                          timeout)
        return models.model_info_to_dict(info)

    @_on_servers("every")
    def unload_model(self, name, *, timeout=None):
        """Removes a resident model (``grpc.RpcError`` NOT_FOUND when there is none)."""
        self._call(self.stub.UnloadModel, compute_pb2.UnloadModelRequest(name=str(name)),
                   timeout)

    @_on_servers("next")
    def list_models(self, *, timeout=None):
        """The resident models, each a dict::

            {"name", "dtype" ("bfloat16"/"float16"/"float32"), "allow_tf32", "device_bytes",
             "load_ms", "layers": [{"in_features", "out_features", "layernorm", "eps",
             "activation"}, ...]}
        """
        response = self._call(self.stub.ListModels, compute_pb2.ListModelsRequest(), timeout)
        return [models.model_info_to_dict(m) for m in response.models]

    @_on_servers("next")
    def dense(self, name, x, *, output=None, timeout=None):
        """Runs rows through a resident model; returns a NumPy array.

        Args:
          name: the model.
          x: ``(rows, in_features)``; a 1-D array is one row (and gives a 1-D result), more
            dimensions are flattened into rows (``(..., in_features) -> (..., out_features)``).
            float16/float32/float64 arrays are sent as they are (the server converts them),
            other dtypes as float32. Or a 2-D ``TensorHandle``/``SharedMemoryTensor``: the
            rows are read on the server (e.g. the kept output of a previous call: chaining).
          output: None (inline), ``"keep"`` (returns a ``TensorHandle`` to pass on) or a
            registered ``SharedMemoryRegion`` / ``(region, offset[, length])`` (returns a view).
          timeout: this call's deadline in seconds.

        Returns:
          ``(rows, out_features)`` in the model's dtype: float32, float16, or for bfloat16
          models float32 holding the bfloat16 values exactly (NumPy has no bfloat16).

        Raises:
          ``grpc.RpcError``: NOT_FOUND for an unknown model or handle, INVALID_ARGUMENT for a
          wrong feature count (naming both sizes).
        """
        lead = None
        if not is_prepared(x):
            x = np.asarray(x)
            if x.ndim == 0:
                raise ValueError("x must have at least one dimension (in_features)")
            lead = x.shape[:-1]

        def build(encode):
            if lead is None:
                return compute_pb2.DenseRequest(model=str(name), input=to_tensor(x))
            return compute_pb2.DenseRequest(
                model=str(name), input=encode(*models.wire_array(x.reshape(-1, x.shape[-1]))))

        def decode(response, output_of):
            y = output_of(response.output)
            if (lead is not None and isinstance(y, np.ndarray) and y.ndim == 2
                    and y.shape[0] == math.prod(lead)):
                y = y.reshape(lead + (y.shape[1],))
            return y

        return self._operation(self.stub.Dense, build, output, timeout, decode)

    # ------------------------------------------------------------------ data assimilation

    def assimilate(self, X, HX, y, obs_error, method="etkf", inflation=1.0, perturbations=None,
                   seed=None, dtype="float64", *, rtpp=None, rtps=None, form="auto",
                   state_coords=None, obs_coords=None, localization=None,
                   return_diagnostics=False, output=None, timeout=None):
        """The analysis step of an ensemble Kalman filter; returns the analysis ensemble.

        Conventions (docs/python.md "Assimilate"): sample covariances with N - 1; ``inflation``
        multiplies the forecast anomalies (of ``X`` and ``HX``) before the update; a full R is
        whitened with its Cholesky factor; the ETKF uses the symmetric square root, so the
        analysis mean and covariance are the Kalman update of the (inflated) prior sample
        covariance.

        Args:
          X: ``(n, N)`` forecast ensemble, one column per member (N >= 2).
          HX: ``(m, N)`` the ensemble in observation space (your observation operator applied).
          y: ``(m,)`` observations.
          obs_error: ``(m,)`` observation-error variances (diagonal R), an ``(m, m)``
            covariance (symmetric positive definite), or a scalar variance for all.
          method: ``"etkf"``, ``"enkf"`` (stochastic, perturbed observations) or ``"letkf"``
            (the local ETKF: needs ``state_coords``, ``obs_coords``, ``localization`` and
            variances for ``obs_error``; CPU backend in this version).
          inflation: multiplicative inflation of the forecast anomalies (> 0).
          perturbations: ``"enkf"`` only: ``(m, N)`` observation perturbations, member j is
            updated with ``y + perturbations[:, j]``; used as given (not centred or scaled).
          seed: ``"enkf"`` only, instead of perturbations: the server draws them (Philox4x32-10,
            centred across members, scaled to R), reproducibly for the same seed and problem
            position. Neither given: a random seed is drawn here.
          dtype: ``"float64"`` or ``"float32"``: the server's compute type and the result's.
          rtpp, rtps: relaxation to prior perturbations / spread with this factor in [0, 1].
          form: ``"auto"`` (the cheaper per problem), ``"observation_space"`` or
            ``"ensemble_space"`` (same result up to rounding).
          state_coords, obs_coords: ``"letkf"`` only: ``(n, d)`` and ``(m, d)`` coordinates of
            the state variables and observations (1-D arrays: one coordinate each).
          localization: ``"letkf"`` only: ``dict(radius=..., taper="gaspari_cohn" | "gaussian"
            | "step", metric="euclidean" | "periodic" | "great_circle", domain=[lengths]
            (periodic), earth_radius=... (great circle))``. ``radius`` is DAPPER's ``loc_rad``
            (docs/python.md "Localised analysis").
          return_diagnostics: return an ``AssimilationResult`` (analysis, innovation_mean,
            analysis_spread, form) instead of the bare array.
          output: None (inline), ``"keep"`` (``TensorHandle``s) or a registered
            ``SharedMemoryRegion`` / ``(region, offset[, length])`` (views).
          timeout: this call's deadline in seconds.

        X, HX, y, obs_error and perturbations may also be ``TensorHandle``s or
        ``SharedMemoryTensor``s (their bytes are read on the server).

        Raises:
          ``grpc.RpcError``: INVALID_ARGUMENT naming the field and rule (e.g.
          ``problems[0].hx.shape[1] is 9 but x.shape[1] (members) is 10``, a non-finite value,
          an R that is not positive definite), RESOURCE_EXHAUSTED over a server limit.
        """
        (result,) = self.assimilate_batch(
            [dict(X=X, HX=HX, y=y, obs_error=obs_error, method=method, inflation=inflation,
                  perturbations=perturbations, seed=seed, rtpp=rtpp, rtps=rtps, form=form,
                  state_coords=state_coords, obs_coords=obs_coords, localization=localization)],
            dtype=dtype, return_diagnostics=return_diagnostics, output=output, timeout=timeout)
        return result

    @_on_servers("next")
    def assimilate_batch(self, problems, dtype="float64", *, return_diagnostics=False,
                         output=None, timeout=None):
        """Many independent analyses in one RPC (the server may batch them further).

        Args:
          problems: a list of dicts with the keyword names of ``assimilate`` (``X``, ``HX``,
            ``y``, ``obs_error`` required; ``method``, ``inflation``, ``perturbations``,
            ``seed``, ``rtpp``, ``rtps``, ``form`` optional), or of tuples
            ``(X, HX, y, obs_error)`` (ETKF, no inflation). Problems may differ in n, m and N.
            Server-drawn perturbations are keyed by the seed and the problem's position here.
          dtype, return_diagnostics, output, timeout: as ``assimilate``; dtype applies to every
            problem.

        Returns:
          A list, in order, of ``(n, N)`` analysis arrays (or ``AssimilationResult``s).
          An error in any problem fails the whole call, naming ``problems[i]``.
        """
        request = compute_pb2.AssimilateRequest(dtype=compute_dtype(dtype))

        def build(encode):
            for item in problems:
                request.problems.append(assimilation.problem_from_item(item, encode))
            return request

        def decode(response, output_of):
            if len(response.results) != len(request.problems):
                raise RuntimeError(f"server returned {len(response.results)} results for "
                                   f"{len(request.problems)} problems")
            results = [assimilation.result_from_proto(r, output_of) for r in response.results]
            return results if return_diagnostics else [r.analysis for r in results]

        return self._operation(self.stub.Assimilate, build, output, timeout, decode)

    # ------------------------------------------------------------------ streaming, transport

    @_on_servers("next")
    def stream(self, *, timeout=None, metadata=None):
        """Opens a Submit stream (``gpucompute.stream.JobStream``): submit jobs of any
        operation, read results as they finish. ``timeout`` (s) bounds the whole stream
        (default: none)."""
        if metadata is not None:
            metadata = self._auth_metadata + tuple(metadata)
        return stream.JobStream(self.stub, timeout=timeout,
                                metadata=metadata if metadata is not None else self._metadata)

    @_on_servers("next")
    def echo(self, data, *, discard=False, output=None, timeout=None):
        """Sends ``data`` through the Echo RPC and returns what came back.

        ``data``: bytes (returned as bytes), a NumPy array (returned as a new array), or a
        ``TensorHandle``/``SharedMemoryTensor`` (read on the server). ``output``: None
        (inline), ``"keep"`` (a ``TensorHandle``) or a registered ``SharedMemoryRegion`` /
        ``(region, offset[, length])`` (a view of the region). With ``discard`` the server
        replies without the tensor (one direction only) and this returns None.
        """
        raw = isinstance(data, (bytes, bytearray, memoryview))
        if raw:
            data = np.frombuffer(data, np.uint8)

        def build(encode):
            return compute_pb2.EchoRequest(tensor=to_tensor(data, encode=encode),
                                           discard=discard)

        def decode(response, output_of):
            if discard:
                return None
            if raw and response.tensor.WhichOneof("payload") == "data":
                return response.tensor.data
            out = output_of(response.tensor)
            return out.tobytes() if raw and isinstance(out, np.ndarray) else out

        return self._operation(self.stub.Echo, build, output, timeout, decode)

    # ------------------------------------------------------------------ resident tensors

    @_on_servers("next")
    def put_tensor(self, array, dtype=None, *, chunk_bytes=DEFAULT_TENSOR_CHUNK_BYTES,
                   streams=1, timeout=None):
        """Uploads an array to the server's memory; returns its ``TensorHandle``.

        The handle stands in for the array as any operation's input (only the handle travels),
        until ``delete_tensor`` or the server's idle expiry (``server_info()["tensorLimits"]``).
        Resident tensors count against this client's quota (RESOURCE_EXHAUSTED beyond it).

        Args:
          array: anything ``np.asarray`` takes (float16/32/64, int32/64 or uint8), cast to
            ``dtype`` first if given.
          chunk_bytes: bytes per streamed message.
          streams: upload over this many PutTensor streams in parallel, each on its own
            connection (after reserving the tensor with CreateTensor); 1: one stream.
        """
        a = np.asarray(array) if dtype is None else np.asarray(array, dtype=dtype)
        code = wire_dtype(a.dtype)
        a = np.ascontiguousarray(a, dtype=numpy_dtype(code))
        data = memoryview(a).cast("B")
        chunk_bytes, streams = int(chunk_bytes), int(streams)
        if chunk_bytes <= 0 or streams <= 0:
            raise ValueError("chunk_bytes and streams must be positive")
        timeout = self.timeout if timeout is None else timeout
        streams = max(1, min(streams, -(-len(data) // chunk_bytes)))
        if streams == 1:
            header = compute_pb2.PutTensorHeader(dtype=code, shape=a.shape)
            info = self._transfers.put(0, data, 0, len(data), timeout, header, chunk_bytes)
            return TensorHandle.from_info(info)
        reserved = self._call(self.stub.CreateTensor, compute_pb2.CreateTensorRequest(
            dtype=code, shape=a.shape), timeout)
        header = compute_pb2.PutTensorHeader(handle=reserved.handle)
        pieces = transfer.slices([len(data)], streams, min_slice=1)
        infos = self._transfers.map(
            lambda conn, s: self._transfers.put(conn, data, s[1], s[2], timeout, header,
                                                chunk_bytes),
            pieces)
        done = [i for i in infos if i.complete] or infos
        return TensorHandle.from_info(done[0])

    @_on_servers("next")
    def create_tensor(self, shape, dtype, *, timeout=None):
        """Reserves an empty resident tensor; ``write_tensor`` fills it (several writers may
        fill disjoint ranges at once) and it can be used once every byte has arrived."""
        info = self._call(self.stub.CreateTensor, compute_pb2.CreateTensorRequest(
            dtype=wire_dtype(dtype), shape=[int(s) for s in shape]), timeout)
        return TensorHandle.from_info(info)

    @_on_servers("next")
    def write_tensor(self, handle, data, offset=0, *, chunk_bytes=DEFAULT_TENSOR_CHUNK_BYTES,
                     timeout=None):
        """Writes raw bytes at byte ``offset`` of a tensor reserved by ``create_tensor``;
        returns its state as a dict (see ``list_tensors``)."""
        data = memoryview(data).cast("B")
        header = compute_pb2.PutTensorHeader(handle=_handle(handle))
        info = self._transfers.put(0, data, 0, len(data),
                                   self.timeout if timeout is None else timeout, header,
                                   int(chunk_bytes), base=int(offset))
        return _tensor_info(info)

    @_on_servers("next")
    def get_tensor(self, handle, *, streams=1, timeout=None):
        """A resident tensor as a new NumPy array of its dtype and shape (bfloat16 widened to
        float32). NOT_FOUND for an unknown or another client's handle. ``streams`` > 1 fetches
        slices in parallel, each on its own connection (as ``put_tensor``)."""
        info, data = self._get(handle, 0, 0, 0, streams, timeout)
        return from_bytes(data, info.dtype, tuple(info.shape))

    @_on_servers("next")
    def get_tensor_bytes(self, handle, offset=0, length=0, *, chunk_bytes=0, streams=1,
                         timeout=None):
        """Bytes ``[offset, offset + length)`` of a resident tensor (``length`` 0: to the end),
        streamed in messages of ``chunk_bytes`` (0: the server's default), over ``streams``
        parallel GetTensor calls."""
        return bytes(self._get(handle, offset, length, chunk_bytes, streams, timeout)[1])

    def _get(self, handle, offset, length, chunk_bytes, streams, timeout):
        """``(TensorInfo, writable byte view)`` of bytes ``[offset, offset + length)``."""
        handle, offset, length = _handle(handle), int(offset), int(length)
        timeout = self.timeout if timeout is None else timeout
        streams = int(streams)
        if streams <= 0:
            raise ValueError("streams must be positive")
        if streams > 1 and length == 0:
            # Slicing needs the range's length: the tensor's size, from its description.
            # Not listed: one stream, which gets the server's own answer (NOT_FOUND).
            sizes = {t["handle"]: t["bytes"] for t in self.list_tensors(timeout=timeout)}
            length = max(0, sizes.get(handle, offset) - offset)
        chunk = int(chunk_bytes) or DEFAULT_TENSOR_CHUNK_BYTES
        streams = max(1, min(streams, -(-length // chunk)))
        if streams == 1:
            info, out, metadata = self._transfers.get(0, handle, offset, length, None, offset,
                                                      timeout, chunk_bytes)
            self._local.metadata = metadata
            return info, out
        out = memoryview(bytearray(length))
        pieces = transfer.slices([length], streams, min_slice=1)
        results = self._transfers.map(
            lambda conn, s: self._transfers.get(conn, handle, offset + s[1], s[2] - s[1], out,
                                                offset, timeout, chunk_bytes),
            pieces)
        self._local.metadata = results[0][2]
        return results[0][0], out

    @_on_servers("next")
    def delete_tensor(self, handle, *, timeout=None):
        """Frees a resident tensor now (NOT_FOUND if it is not there). Calls already using it
        finish with it."""
        self._call(self.stub.DeleteTensor, compute_pb2.DeleteTensorRequest(
            handle=_handle(handle)), timeout)

    def list_tensors(self, *, timeout=None):
        """This client's resident tensors: dicts ``{"handle", "dtype", "shape", "bytes",
        "complete", "owner", "idle_ms"}`` (of every server, when balanced)."""
        if self._members is not None:
            return [t for m in self._members for t in m.list_tensors(timeout=timeout)]
        response = self._call(self.stub.ListTensors, compute_pb2.ListTensorsRequest(), timeout)
        return [_tensor_info(t) for t in response.tensors]

    # ------------------------------------------------------------------ shared memory

    @_on_servers("every", undo=lambda member, region: member.unregister_shared_memory(region.name))
    def register_shared_memory(self, region, name=None, *, timeout=None):
        """Registers a ``SharedMemoryRegion`` (all of it) with the server, which must run with
        ``--allow_shared_memory``, as ``name`` (default: derived from its key); returns it.
        Tensors put in it (``region.put``) and outputs placed in it then skip the wire.

        The server registers only objects the caller can write: this writes the proof the
        server gives (``SharedMemoryProof``, 56 bytes) at the start of the region for as long
        as the registration takes, and puts the bytes it covered back after."""
        name = name or region.key.lstrip("/").replace("/", "_")[:128]
        proof = self._call(self.stub.SharedMemoryProof, compute_pb2.SharedMemoryProofRequest(
            key=region.key, offset=0), timeout).proof
        if region.size < len(proof):
            raise ValueError(f"a region of {region.size} bytes cannot hold the server's "
                             f"{len(proof)}-byte registration proof")
        covered = bytes(region.buf[:len(proof)])
        region.buf[:len(proof)] = proof
        try:
            self._call(self.stub.RegisterSharedMemory, compute_pb2.RegisterSharedMemoryRequest(
                name=name, key=region.key, offset=0, byte_size=int(region.size), proof=proof),
                timeout)
        finally:
            region.buf[:len(proof)] = covered
        region.name = name
        self._regions[name] = region
        return region

    def create_shared_memory(self, size, name=None, *, timeout=None):
        """Creates a ``SharedMemoryRegion`` of ``size`` bytes and registers it."""
        region = SharedMemoryRegion(size)
        try:
            return self.register_shared_memory(region, name, timeout=timeout)
        except Exception:
            region.close()
            raise

    def unregister_shared_memory(self, region=None, *, timeout=None):
        """Unregisters a region (a ``SharedMemoryRegion`` or its name), or all of this
        client's when None (on every server, when balanced). The region itself stays mapped
        here until its ``close``."""
        name = "" if region is None else (region if isinstance(region, str) else region.name)
        if self._members is not None:
            for member in self._members:
                member.unregister_shared_memory(name or None, timeout=timeout)
            return
        self._call(self.stub.UnregisterSharedMemory,
                   compute_pb2.UnregisterSharedMemoryRequest(name=name or ""), timeout)
        for n in (list(self._regions) if not name else [name]):
            r = self._regions.pop(n, None)
            if r is not None:
                r.name = None

    # ------------------------------------------------------------------ server info

    @_on_servers("next")
    def server_info(self, timeout=None):
        """Server version, backend ("cuda"/"cpu"), devices, limits, kernel cache and batching.

        Returns the ``ServerInfoResponse`` as ``json_format.MessageToDict`` does (lowerCamelCase
        keys, e.g. ``info["periodogramBatching"]["largestBatch"]``), with every field present
        and 64-bit integers as Python ints rather than strings.
        """
        response = self._call(self.stub.ServerInfo, compute_pb2.ServerInfoRequest(), timeout)
        return message_to_dict(response)


# ---------------------------------------------------------------------- helpers

def _normalization(name):
    try:
        return NORMALIZATIONS[str(name).lower()]
    except KeyError:
        raise ValueError(
            f"normalization {name!r}: expected one of {sorted(NORMALIZATIONS)}") from None


_METHODS = {
    "auto": compute_pb2.PERIODOGRAM_METHOD_AUTO,
    "direct": compute_pb2.PERIODOGRAM_METHOD_DIRECT,
    "slow": compute_pb2.PERIODOGRAM_METHOD_DIRECT,
    "cython": compute_pb2.PERIODOGRAM_METHOD_DIRECT,
    "chi2": compute_pb2.PERIODOGRAM_METHOD_DIRECT,
    "fast": compute_pb2.PERIODOGRAM_METHOD_FAST,
    "fastchi2": compute_pb2.PERIODOGRAM_METHOD_FAST,
}
_FALSE_ALARM_METHODS = {
    "baluev": compute_pb2.FALSE_ALARM_METHOD_BALUEV,
    "davies": compute_pb2.FALSE_ALARM_METHOD_DAVIES,
    "naive": compute_pb2.FALSE_ALARM_METHOD_NAIVE,
    "bootstrap": compute_pb2.FALSE_ALARM_METHOD_BOOTSTRAP,
}


def _method(name):
    try:
        return _METHODS[str(name).lower()]
    except KeyError:
        raise ValueError(f"method {name!r}: expected one of {sorted(_METHODS)}") from None


def _false_alarm_proto(spec):
    """A FalseAlarmSpec from a method name or a dict (see ``Client.periodogram``)."""
    if isinstance(spec, str):
        spec = {"method": spec}
    spec = dict(spec)
    name = str(spec.pop("method", "baluev")).lower()
    if name not in _FALSE_ALARM_METHODS:
        raise ValueError(f"false-alarm method {name!r}: expected one of "
                         f"{sorted(_FALSE_ALARM_METHODS)}")
    msg = compute_pb2.FalseAlarmSpec(method=_FALSE_ALARM_METHODS[name])
    msg.probabilities.extend(np.asarray(spec.pop("probabilities", []), np.float64).ravel())
    msg.powers.extend(np.asarray(spec.pop("powers", []), np.float64).ravel())
    msg.n_bootstraps = int(spec.pop("n_bootstraps", 0))
    seed = spec.pop("seed", spec.pop("random_seed", None))
    if seed is not None:
        msg.seed = int(seed) & ((1 << 64) - 1)
    if spec:
        raise ValueError(f"false_alarm: unknown keys {sorted(spec)}")
    return msg


_FLOAT64 = np.dtype("<f8")


def _add_series(series_field, item, encode):
    """Adds the ``Series`` of ``item`` (see ``Client.periodogram``) to ``series_field``, the
    request's repeated field, as a new element made there (not a message built apart and
    copied in); ``encode`` makes each array's Tensor (see ``gpucompute.tensor.inline_tensor``).
    Returns None, or for a series with a grid of its own ``(its FrequencyGrid, its explicit
    frequencies or None)``."""
    model = None
    if isinstance(item, dict):
        t, y, dy, freq = item["t"], item["y"], item.get("dy"), item.get("frequency")
        model = item.get("model")
    else:
        size = len(item)
        if size not in (2, 3):
            raise ValueError("each series must be (t, y) or (t, y, dy)")
        t, y = item[0], item[1]
        dy = item[2] if size == 3 else None
        freq = None
    msg = series_field.add(t=to_tensor(t, _FLOAT64, encode), y=to_tensor(y, _FLOAT64, encode))
    if dy is not None:
        msg.dy.CopyFrom(to_tensor(dy, _FLOAT64, encode))
    own_grid = None
    if freq is not None:
        own_grid = (msg.frequency, set_frequency_grid(msg.frequency, freq))
    if model is not None:
        if model.get("frequency") is not None:
            msg.model.frequency = float(model["frequency"])
        if model.get("t") is not None:
            msg.model.t.CopyFrom(to_tensor(np.asarray(model["t"], np.float64).ravel(), _FLOAT64))
        msg.model.SetInParent()
    return own_grid


def _set_settings(request, frequency, fit_mean, center_data, normalization, dtype, method,
                  nterms, top_k, model_parameters, false_alarm):
    """Sets every field of the PeriodogramRequest ``request`` but its series and output
    placement from ``Client.periodogram``'s arguments; returns the explicit frequencies, or
    None for the other grid forms."""
    explicit = set_frequency_grid(request.frequency, frequency)  # its errors come first
    request.fit_mean = bool(fit_mean)
    request.center_data = bool(center_data)
    request.normalization = _normalization(normalization)
    request.dtype = compute_dtype(dtype)
    request.method = _method(method)
    request.nterms = int(nterms)
    request.top_k = int(top_k)
    request.model_parameters = bool(model_parameters)
    if false_alarm is not None:
        request.false_alarm.CopyFrom(_false_alarm_proto(false_alarm))
    return explicit


@functools.lru_cache(maxsize=32)
def _settings_template(*settings):
    """A PeriodogramRequest with ``_set_settings(request, *settings)`` (a grid that is not
    explicit frequencies), built once per distinct settings and only copied from: a program
    calls with the same settings again and again, and setting the fields one by one is a
    noticeable part of a small call's time in the client."""
    request = compute_pb2.PeriodogramRequest()
    _set_settings(request, *settings)
    return request


def _lone_series(series):
    """``(t, y, dy or None)`` when ``series`` is one ``(t, y)`` or ``(t, y, dy)``: the plain
    call of one series, whose request is written by hand (``transfer.SeriesRequest``); else
    None."""
    if len(series) != 1 or isinstance(series[0], dict) or len(series[0]) not in (2, 3):
        return None
    item = series[0]
    return item[0], item[1], item[2] if len(item) == 3 else None


def _packed_series(series):
    """``transfer.PackedColumns`` of ``series`` when there are at least two and each is a
    ``(t, y)`` or ``(t, y, dy)`` of 1-D host arrays of one length (all or none with dy); else
    None, and they go one ``Series`` each (where the server names whatever is wrong with one).
    A survey has thousands: plain loops, float64 NumPy arrays taken as they are (not copied)."""
    if len(series) < 2:
        return None
    columns = None
    for item in series:
        if isinstance(item, dict):
            return None
        if columns is None:
            if len(item) not in (2, 3):
                return None
            columns = tuple([] for _ in item)
        if len(item) != len(columns):
            return None
        size = -1
        for column, a in zip(columns, item):
            if type(a) is not np.ndarray:
                if is_prepared(a):
                    return None
                a = np.asarray(a)
            if a.ndim != 1 or a.dtype.kind not in "fiu" or (size >= 0 and a.size != size):
                return None
            if a.dtype is not _FLOAT64 or a.strides[0] != 8:
                a = np.ascontiguousarray(a, _FLOAT64)
            size = a.size
            column.append(a)
    return transfer.PackedColumns(list(columns), [a.size for a in columns[0]])


def _handle(handle):
    return handle.handle if isinstance(handle, TensorHandle) else str(handle)


def _tensor_info(info):
    return {"handle": info.handle, "dtype": tensor_pb2.DType.Name(info.dtype).lower(),
            "shape": tuple(int(s) for s in info.shape), "bytes": int(info.bytes),
            "complete": bool(info.complete), "owner": info.owner, "idle_ms": int(info.idle_ms)}


def _float64_array(values):
    """A new float64 array of a repeated double field (``np.fromiter`` with its length: several
    times faster than ``np.array``, which tries the field as a nested sequence first)."""
    return np.fromiter(values, np.float64, len(values))


_NO_VALUES = ()  # an empty repeated field's values
_NO_GRID = (math.nan, math.nan, math.nan)  # a result without a grid of its own


def _model(m):
    """A ``ModelResult`` as ``PeriodogramResult.model``'s dict."""
    return {"frequency": m.frequency, "parameters": _float64_array(m.parameters),
            "offset": m.offset, "y": from_tensor(m.y) if m.HasField("y") else None}


def _grid_used(row, grid_msg, explicit):
    """The ``UniformGrid`` a result's power belongs to: ``row`` (f0, df, n as the server sent
    them; NaN for explicit frequencies), else the uniform grid asked for; None with explicit
    frequencies."""
    f0, df, n = row
    if f0 == f0:  # not NaN
        return UniformGrid(f0, df, int(n))
    if explicit is not None:
        return None
    if grid_msg.WhichOneof("kind") == "uniform":
        return UniformGrid(grid_msg.uniform.f0, grid_msg.uniform.df, int(grid_msg.uniform.n))
    raise RuntimeError("server did not return the automatic grid it used")


@contextlib.contextmanager
def _collector_paused():
    """Pauses Python's cyclic garbage collector while thousands of result objects are made:
    each allocation would otherwise count toward a collection that traverses everything the
    program holds, ~30% of a survey's result building. Nothing made there is cyclic."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _peak_rows(c, n):
    """Each series' ``peaks`` (dicts, highest first) from the response's peak columns: one
    flat pass over all of them, each row then a slice (a row's missing peaks, index -1, are
    at its end)."""
    if len(c.peaks_index.shape) != 2:  # no top_k
        return [[] for _ in range(n)]
    index = from_tensor(c.peaks_index)
    k = index.shape[1]
    counts = (index >= 0).sum(axis=1).tolist()
    frequency, power, probability = (from_tensor(t).ravel().tolist() for t in (
        c.peaks_frequency, c.peaks_power, c.peaks_false_alarm_probability))
    peaks = [{"frequency": f, "power": p, "index": i, "false_alarm_probability": q}
             for f, p, i, q in zip(frequency, power, index.ravel().tolist(), probability)]
    return [peaks[start:start + count] for start, count in zip(range(0, n * k, k), counts)]


def _results_from_columns(response, grids, output_of, discarded, with_models):
    """``PeriodogramResult``s of a response with ``result_columns``: each field's column decoded
    once, the results made from its rows; each ``SeriesResult`` read only for its power (not
    at all when the powers were discarded) and model."""
    c = response.columns
    n = len(grids)
    if tuple(c.peak_index.shape) != (n,):
        raise RuntimeError(f"server returned columns of {tuple(c.peak_index.shape)} results "
                           f"for {n} series")
    with _collector_paused():
        peak_frequency = from_tensor(c.peak_frequency).tolist()
        peak_power = from_tensor(c.peak_power).tolist()
        peak_index = from_tensor(c.peak_index).tolist()
        fast = (from_tensor(c.method) == compute_pb2.PERIODOGRAM_METHOD_FAST).tolist()
        grid_rows = from_tensor(c.grid).tolist()
        peak_rows = _peak_rows(c, n)
        false_alarms = [None] * n
        if c.HasField("false_alarm_peak_probability"):
            probabilities = from_tensor(c.false_alarm_probabilities)
            levels = from_tensor(c.false_alarm_levels)
            false_alarms = [
                {"peak_probability": p, "probabilities": probabilities[i], "levels": levels[i]}
                for i, p in enumerate(from_tensor(c.false_alarm_peak_probability).tolist())]
        used = [UniformGrid(row[0], row[1], int(row[2])) if row[0] == row[0]  # not NaN
                else _grid_used(row, *asked) for row, asked in zip(grid_rows, grids)]
        explicit = [None if grid is not None else asked[1] for grid, asked in zip(used, grids)]
        powers = models_ = [None] * n
        if with_models or not discarded:
            results = response.results
            if not discarded:
                powers = [output_of(result.power) for result in results]
            if with_models:
                models_ = [_model(result.model) if result.HasField("model") else None
                           for result in results]
        methods = ["fast" if f else "direct" for f in fast]
        return [PeriodogramResult(*fields) for fields in zip(
            powers, peak_frequency, peak_power, peak_index, used, methods, peak_rows,
            false_alarms, models_, explicit)]


def _result(result, grid_msg, explicit, decode=from_tensor, extras=True):
    """Builds a ``PeriodogramResult`` from a ``SeriesResult`` and the grid that was asked for;
    ``extras``: whether it may hold peaks, false-alarm probabilities or a model (False: not
    looked for). A survey decodes thousands: each sub-message is read once, and empty parts
    cost nothing."""
    power = decode(result.power)
    if result.HasField("grid"):
        returned = result.grid
        grid = UniformGrid(returned.f0, returned.df, int(returned.n))
    else:
        grid = _grid_used(_NO_GRID, grid_msg, explicit)
    method = "fast" if result.method == compute_pb2.PERIODOGRAM_METHOD_FAST else "direct"
    if not extras:
        return PeriodogramResult(power, result.peak_frequency, result.peak_power,
                                 int(result.peak_index), grid, method,
                                 explicit_frequency=None if grid is not None else explicit)
    false_alarm = None
    if result.HasField("false_alarm"):
        f = result.false_alarm
        probabilities, levels = f.probabilities, f.levels
        false_alarm = {"peak_probability": f.peak_probability,
                       "probabilities": _float64_array(probabilities or _NO_VALUES),
                       "levels": _float64_array(levels or _NO_VALUES)}
    model = _model(result.model) if result.HasField("model") else None
    peaks = [{"frequency": p.frequency, "power": p.power, "index": p.index,
              "false_alarm_probability": p.false_alarm_probability} for p in result.peaks]
    return PeriodogramResult(power, result.peak_frequency, result.peak_power,
                             int(result.peak_index), grid, method, peaks, false_alarm, model,
                             None if grid is not None else explicit)


_INT64_TYPES = (FieldDescriptor.CPPTYPE_INT64, FieldDescriptor.CPPTYPE_UINT64)


def message_to_dict(message):
    """``json_format.MessageToDict`` with all fields present and int64 fields as ints."""
    try:
        d = json_format.MessageToDict(message, including_default_value_fields=True)
    except TypeError:  # protobuf >= 5.26 renamed the flag
        d = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    _int64_to_int(message, d)
    return d


def _int64_to_int(message, d):
    for field in message.DESCRIPTOR.fields:
        key = field.json_name
        if key not in d:
            continue
        # From the JSON value itself: FieldDescriptor.label is gone in newer protobuf (upb).
        repeated = isinstance(d[key], list)
        if field.cpp_type in _INT64_TYPES:
            d[key] = [int(v) for v in d[key]] if repeated else int(d[key])
        elif field.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE and not (
                field.message_type.GetOptions().map_entry):
            value = getattr(message, field.name)
            if repeated:
                for sub, sub_d in zip(value, d[key]):
                    _int64_to_int(sub, sub_d)
            else:
                _int64_to_int(value, d[key])
