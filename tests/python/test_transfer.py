"""Plain calls with large tensors, through the Python client and a real server: inputs and
outputs over the client's transfer threshold travel as parallel slices (resident tensors made
and deleted by the call) and give what inline calls give; a server whose message limits refuse
them inline still serves them; a failed call leaves nothing behind; a transfer abandoned
mid-way is freed after its own short expiry; outputs can be discarded (peaks and false-alarm
probabilities without the power arrays) or kept above a size (keep_above_bytes)."""

import os
import signal

import grpc
import numpy as np
import pytest

import gpucompute
from conftest import client_of_server, wait_until
from gpucompute.v1 import compute_pb2, tensor_pb2
from rpc_util import expect_rpc_error

LIMIT = 6 << 20  # the server's request and response limit here: 8 MB arrays cannot go inline


@pytest.fixture(scope="module")
def tc(tmp_path_factory):
    """A client (default transfer threshold, 4 MiB) of a server whose messages are limited to
    6 MiB each way."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    with client_of_server(tmp_path_factory.mktemp("transfer"), f"--max_request_bytes={LIMIT}",
                          f"--max_response_bytes={LIMIT}") as c:
        yield c


@pytest.fixture
def inline(tc):
    """A client of the same server that sends everything inline."""
    with gpucompute.Client(tc.target, transfer_threshold=0) as c:
        yield c


def _enkf_reference(X, HX, y, r, E):
    """The stochastic EnKF analysis by NumPy (conventions of docs/python.md "Assimilate": N - 1,
    perturbed y)."""
    N = X.shape[1]
    A = X - X.mean(axis=1, keepdims=True)
    Y = HX - HX.mean(axis=1, keepdims=True)
    C = Y @ Y.T / (N - 1) + np.diag(r)
    return X + A @ (Y.T @ np.linalg.solve(C, y[:, None] + E - HX)) / (N - 1)


def test_assimilate_over_the_message_limit(tc, inline, rng):
    n, m, N = 1100, 40, 1000  # X and Xa: 8.8 MB each
    X, HX = rng.normal(0, 1, (n, N)), rng.normal(0, 1, (m, N))
    y, r, E = rng.normal(0, 1, m), rng.uniform(0.5, 1.5, m), rng.normal(0, 0.7, (m, N))
    Xa = tc.assimilate(X, HX, y, r, method="enkf", perturbations=E)
    assert isinstance(Xa, np.ndarray) and Xa.shape == (n, N) and Xa.flags.writeable
    want = _enkf_reference(X, HX, y, r, E)
    np.testing.assert_allclose(Xa, want, rtol=0, atol=1e-9 * np.abs(want - X).max())
    assert tc.list_tensors() == []  # every tensor the call made is gone
    expect_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                     lambda: inline.assimilate(X, HX, y, r, method="enkf", perturbations=E))


def test_echo_and_dtypes(tc, rng):
    for a in (rng.normal(0, 1, (1200, 1000)),                       # float64, 9.6 MB
              rng.integers(-5, 5, (3, 1 << 20), dtype=np.int32),      # 12 MiB
              rng.normal(0, 1, 5 << 20).astype(np.float16)):         # 10 MiB
        got = tc.echo(a)
        assert got.dtype == a.dtype and got.flags.writeable
        np.testing.assert_array_equal(got, a)
    raw = rng.integers(0, 256, 5 << 20, dtype=np.uint8).tobytes()
    assert tc.echo(raw) == raw
    assert tc.echo(raw, discard=True) is None
    assert tc.list_tensors() == []


def test_dense_rows_in_and_out(tc, inline, rng):
    w = rng.normal(0, 0.1, (64, 160))
    tc.load_model("transfer_mlp", [{"weight": w, "layernorm": True, "activation": "relu"}],
                  dtype="float32")
    try:
        x = rng.normal(0, 1, (16384, 64)).astype(np.float32)  # 4 MiB in, 10 MiB out
        y = tc.dense("transfer_mlp", x)
        assert y.shape == (16384, 160)
        want = np.concatenate([inline.dense("transfer_mlp", x[i:i + 4096])
                               for i in range(0, len(x), 4096)])
        np.testing.assert_array_equal(y, want)
        assert tc.list_tensors() == []
    finally:
        tc.unload_model("transfer_mlp")


def test_periodogram_series_by_transfer(tc, inline, rng):
    with gpucompute.Client(tc.target, transfer_threshold=32 << 10) as small:
        series = []
        for n in (5000, 300, 7000):  # t and y of 40 and 56 KB go as resident tensors
            t = np.sort(rng.uniform(0, 100, n))
            series.append((t, np.sin(2 * np.pi * 0.37 * t) + rng.normal(0, 0.5, n),
                           rng.uniform(0.5, 1.0, n)))
        grid = gpucompute.UniformGrid(0.01, 0.001, 6000)  # 48 KB of power per series: kept
        got = small.periodogram(series, grid, top_k=3)
        want = inline.periodogram(series, grid, top_k=3)
        for g, w in zip(got, want):
            # The same bytes computed twice: equal up to the GPU's summation order.
            np.testing.assert_allclose(g.power, w.power, rtol=0, atol=1e-12 * w.power.max())
            assert [p["index"] for p in g.peaks] == [p["index"] for p in w.peaks]
        assert small.list_tensors() == []


def test_one_series_written_by_hand_is_what_protobuf_writes(rng):
    """A lone series' request (``transfer.SeriesRequest``) parses to the message protobuf
    builds, whatever arrays the caller gave and whichever columns go by reference."""
    from gpucompute import transfer
    n = 301
    t, y, dy = np.sort(rng.uniform(0, 10, n)), rng.normal(size=n), rng.uniform(0.5, 1, n)
    base = compute_pb2.PeriodogramRequest(top_k=2, nterms=3, fit_mean=False)
    base.frequency.uniform.n = 40
    base.output_placement.keep_above_bytes = 1 << 20
    handle = tensor_pb2.Tensor(dtype=tensor_pb2.FLOAT32, shape=[n], handle="resident-y")
    forms = [(t, y, None), (t.astype(np.float32), list(y), dy.astype(">f8")),
             (np.repeat(t, 2)[::2], handle, dy)]
    for columns in forms:
        sent = [None if a is None else gpucompute.to_tensor(a, np.float64, transfer.InlineArray)
                for a in columns]
        want = compute_pb2.PeriodogramRequest()
        want.CopyFrom(base)
        series = want.series.add()
        for name, a in zip(("t", "y", "dy"), columns):
            if a is not None:
                getattr(series, name).CopyFrom(gpucompute.to_tensor(a, np.float64))
        got = transfer.SeriesRequest(base, sent).SerializeToString()
        assert compute_pb2.PeriodogramRequest.FromString(got) == want


def test_one_series_by_transfer_and_by_reference(tc, inline, rng):
    """A lone series whose arrays go as resident tensors (over the threshold), or one of them
    named by the caller's handle, gives what the same series inline gives."""
    n = 6000  # t, y, dy of 48 KB each
    t = np.sort(rng.uniform(0, 100, n))
    y = np.sin(2 * np.pi * 0.37 * t) + rng.normal(0, 0.5, n)
    dy = rng.uniform(0.5, 1.0, n)
    grid = gpucompute.UniformGrid(0.01, 0.001, 2000)
    want = inline.lombscargle(t, y, dy, grid)[1]
    with gpucompute.Client(tc.target, transfer_threshold=32 << 10) as small:
        np.testing.assert_allclose(small.lombscargle(t, y, dy, grid)[1], want, rtol=0,
                                   atol=1e-12 * want.max())
        assert small.list_tensors() == []
        resident = small.put_tensor(y)
        try:
            got = small.lombscargle(t, resident, dy, grid)[1]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * want.max())
        finally:
            small.delete_tensor(resident)


def test_a_failed_call_leaves_nothing_behind(tc, rng):
    n, m, N = 1100, 30, 1000
    X, HX = rng.normal(0, 1, (n, N)), rng.normal(0, 1, (m, N + 1))  # HX has a member too many
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                     lambda: tc.assimilate(X, HX, np.zeros(m), np.ones(m)), r"problems\[0\]\.hx")
    assert tc.list_tensors() == []
    expect_rpc_error(grpc.StatusCode.NOT_FOUND, lambda: tc.dense("no_such_model", X))
    assert tc.list_tensors() == []
    np.testing.assert_array_equal(tc.echo(np.ones(3)), np.ones(3))  # the next call is served


def test_an_abandoned_transfer_expires(tmp_path):
    """A client that reserves a tensor for one call, sends half of it and goes away: the
    tensor holds its quota only for its own short expiry, not the server's 10 minutes."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    with client_of_server(tmp_path, "--tensor_quota_bytes=3000000") as c:
        info = c.stub.CreateTensor(compute_pb2.CreateTensorRequest(
            dtype=tensor_pb2.UINT8, shape=[2_000_000], idle_expiry_ms=3000))
        c.write_tensor(info.handle, b"\1" * 1_000_000)
        assert [t["complete"] for t in c.list_tensors()] == [False]
        expect_rpc_error(grpc.StatusCode.RESOURCE_EXHAUSTED,
                         lambda: c.put_tensor(np.zeros(1_500_000, np.uint8)), "quota")
        wait_until(lambda: c.list_tensors() == [], "the abandoned tensor to expire")
        c.delete_tensor(c.put_tensor(np.zeros(1_500_000, np.uint8)))  # the quota is free again
        expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: c.stub.CreateTensor(
            compute_pb2.CreateTensorRequest(dtype=tensor_pb2.UINT8, shape=[4],
                                            idle_expiry_ms=-1)), "idle_expiry_ms")


def _survey(rng, count):
    """`count` light curves of 50-800 samples over 100 time units."""
    out = []
    for n in rng.integers(50, 800, count):
        t = np.sort(rng.uniform(0, 100, int(n)))
        out.append((t, np.sin(2 * np.pi * rng.uniform(0.1, 2.0) * t) + rng.normal(0, 0.5, int(n))))
    return out


def test_discard_returns_peaks_and_false_alarms_only(client, rng):
    series = _survey(rng, 40)
    full = client.periodogram(series, top_k=4, false_alarm="baluev", model_parameters=True)
    lean = client.periodogram(series, top_k=4, false_alarm="baluev", model_parameters=True,
                              output="discard")
    for f, d in zip(full, lean):
        assert d.power is None
        np.testing.assert_array_equal(d.frequency, f.frequency)
        assert (d.peak_index, d.peak_power, d.peaks) == (f.peak_index, f.peak_power, f.peaks)
        assert d.false_alarm["peak_probability"] == f.false_alarm["peak_probability"]
        np.testing.assert_array_equal(d.model["parameters"], f.model["parameters"])
    res = client.assimilate(rng.normal(0, 1, (8, 5)), rng.normal(0, 1, (3, 5)),
                            np.zeros(3), np.ones(3), output="discard", return_diagnostics=True)
    assert res.analysis is None and res.analysis_spread > 0


def test_keep_above_bytes_keeps_only_the_large(client, rng):
    big, small = rng.normal(0, 1, 1000), rng.normal(0, 1, 10)
    for a, kept in ((big, True), (small, False)):
        response = client.stub.Echo(compute_pb2.EchoRequest(
            tensor=gpucompute.to_tensor(a),
            output_placement=tensor_pb2.OutputPlacement(keep_above_bytes=800,
                                                        idle_expiry_ms=5000)))
        assert response.tensor.WhichOneof("payload") == ("handle" if kept else "data")
        if kept:
            np.testing.assert_array_equal(client.get_tensor(response.tensor.handle), a)
            client.delete_tensor(response.tensor.handle)
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: client.stub.Echo(
        compute_pb2.EchoRequest(tensor=gpucompute.to_tensor(small),
                                output_placement=tensor_pb2.OutputPlacement(
                                    keep_above_bytes=-1))), "keep_above_bytes")


@pytest.mark.parametrize("size", [0, 5, (64 << 10) - 1, 64 << 10, (4 << 20) - 1024])
def test_put_chunk_is_what_protobuf_parses(size, rng):
    """The hand-built PutTensorChunk (small chunks joined, large ones filled outside the
    interpreter lock) parses back through protobuf to the same header, offset and bytes,
    from a view into the middle of an array too."""
    from gpucompute import transfer
    data = rng.integers(0, 256, size + 3, dtype=np.uint8)
    view = memoryview(data)[3:]
    header = compute_pb2.PutTensorHeader(handle="t-1")
    for offset, head in ((0, b""), (123456789, header.SerializeToString())):
        raw = transfer.put_chunk(offset, view, head)
        assert isinstance(raw, bytes)
        chunk = compute_pb2.PutTensorChunk.FromString(raw)
        assert chunk.offset == offset and chunk.data == view.tobytes()
        assert chunk.HasField("header") == bool(head)
        if head:
            assert chunk.header == header


def test_slices_cover_each_range_once_from_multiples_of_64():
    """Every byte of every range is in exactly one slice, slices start at multiples of 64 (no
    element split between streams), and a large range is spread over several."""
    from gpucompute import transfer
    sizes = [0, 1, 1000, 72_000_000, 9_000_001, 3 << 20]
    got = transfer.slices(sizes, 6)
    for i, size in enumerate(sizes):
        mine = sorted((b, e) for j, b, e in got if j == i)
        assert mine[0][0] == 0 and mine[-1][1] == size
        assert all(e0 == b1 for (_, e0), (b1, _) in zip(mine, mine[1:]))
        assert all(b % 64 == 0 and (e > b or size == 0) for b, e in mine)
    assert len([s for s in got if s[0] == 3]) > 1


@pytest.mark.parametrize("form", ["packed", "split"])
def test_many_series_in_one_call(tc, rng, form):
    """A periodogram of many series (here ~2 MB of samples) gives what one request of Series
    gives, in order, for every output placement that allows it, whether the series go packed
    (arrays: PackedSeries, three tensors) or, as dicts, as several requests over the transfer
    connections at once; a bad series still gets the error naming it as the caller numbered
    it."""
    from gpucompute import transfer
    series = _survey(rng, 300)
    items = series if form == "packed" else [dict(t=t, y=y) for t, y in series]
    packed = gpucompute.client._packed_series(items)
    assert (packed is not None) == (form == "packed")
    if packed is not None:
        assert len(packed.ranges(transfer.SPLIT_PARTS)) > 1  # several packed requests
    request = compute_pb2.PeriodogramRequest(
        series=[compute_pb2.Series(t=gpucompute.to_tensor(t), y=gpucompute.to_tensor(y))
                for t, y in series],
        frequency=compute_pb2.FrequencyGrid(uniform=compute_pb2.UniformGrid(f0=0.05, df=0.01, n=200)),
        top_k=3,
        false_alarm=compute_pb2.FalseAlarmSpec(method=compute_pb2.FALSE_ALARM_METHOD_BALUEV))
    assert len(transfer.split_series(request)) > 1  # it is split
    grid = gpucompute.UniformGrid(0.05, 0.01, 200)
    want = tc.stub.Periodogram(request, timeout=60).results
    for output in (None, "discard", "keep"):
        got = tc.periodogram(items, grid, top_k=3, false_alarm="baluev", output=output)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert (g.peak_index, g.peak_power) == (w.peak_index, w.peak_power)
            assert g.false_alarm["peak_probability"] == w.false_alarm.peak_probability
            assert [p["index"] for p in g.peaks] == [p.index for p in w.peaks]
            if output is None:
                np.testing.assert_array_equal(g.power, np.frombuffer(w.power.data, "<f8"))
            elif output == "keep":
                np.testing.assert_array_equal(tc.get_tensor(g.power),
                                              np.frombuffer(w.power.data, "<f8"))
                tc.delete_tensor(g.power)
            else:
                assert g.power is None
    bad = list(items)
    t, y = series[250]
    y = np.where(np.arange(len(y)) == 7, np.nan, y)
    bad[250] = (t, y) if form == "packed" else dict(t=t, y=y)
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT, lambda: tc.periodogram(bad, grid),
                     r"series\[250\]\.y")
    # The parts that succeeded kept their outputs: deleted before the error is raised.
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                     lambda: tc.periodogram(bad, grid, output="keep"), r"series\[250\]\.y")
    assert tc.list_tensors() == []


def test_packed_parts_are_what_protobuf_writes(rng):
    """A packed request's parts cover the series once each, in order, in about equal samples;
    each part's hand-written bytes parse to the request protobuf builds for its series, with
    every other field, whatever float arrays the caller gave (float32, ints, strided views)."""
    from gpucompute import transfer
    series = [(t, y, np.full(len(t), 0.5)) for t, y in _survey(rng, 900)]
    series[3] = (series[3][0].astype(np.float32), series[3][1], series[3][2])
    series[5] = (series[5][0], np.round(series[5][1] * 100).astype(np.int64), series[5][2])
    t, y, dy = series[7]
    series[7] = (np.repeat(t, 2)[::2], y, dy)  # a view with a stride of 16 bytes
    packed = gpucompute.client._packed_series(series)
    ranges = packed.ranges(16)
    assert len(ranges) == 16 and ranges[0][0] == 0 and ranges[-1][1] == len(series)
    assert all(end == begin for (_, end), (begin, _) in zip(ranges, ranges[1:]))
    samples = [sum(packed.lengths[b:e]) for b, e in ranges]
    assert max(samples) < 1.5 * sum(samples) / len(ranges)
    assert packed.ranges(16, max_part_bytes=packed.nbytes // 32) == [(0, len(series))]
    assert gpucompute.client._packed_series(series[:40]).ranges(16) == [(0, 40)]  # small
    base = compute_pb2.PeriodogramRequest(top_k=3, nterms=2, result_columns=True)
    base.output_placement.discard = True
    for begin, end in ranges[:3] + ranges[-1:]:
        part = transfer.PackedPart(base.SerializeToString(), packed, begin, end)
        want = compute_pb2.PeriodogramRequest()
        want.CopyFrom(base)
        for name, column in zip(("t", "y", "dy"), zip(*series[begin:end])):
            getattr(want.packed_series, name).CopyFrom(gpucompute.to_tensor(
                np.concatenate([np.asarray(a, np.float64) for a in column])))
        want.packed_series.lengths.extend(len(s[0]) for s in series[begin:end])
        assert compute_pb2.PeriodogramRequest.FromString(part.SerializeToString()) == want


def test_packed_parts_give_what_one_request_gives(client, rng, monkeypatch):
    """A packed survey with dy cut into parts gives, series by series, what the same survey
    sent as one packed request gives: powers, grids, peaks, false-alarm values and models
    (within rounding: on a GPU the fast method sums with atomics, in no fixed order)."""
    from gpucompute import transfer
    series = [(t, y, np.full(len(t), 0.3)) for t, y in _survey(rng, 500)]
    assert len(gpucompute.client._packed_series(series).ranges(transfer.SPLIT_PARTS)) > 1
    options = dict(top_k=3, false_alarm="baluev", model_parameters=True, samples_per_peak=2)
    cut = client.periodogram(series, **options)
    monkeypatch.setattr(transfer, "SPLIT_PARTS", 1)
    whole = client.periodogram(series, **options)
    assert len(cut) == len(whole) == len(series)
    close = dict(rtol=1e-9, atol=1e-12)
    for a, b in zip(cut, whole):
        assert (a.grid, a.peak_index, a.method) == (b.grid, b.peak_index, b.method)
        np.testing.assert_allclose(a.power, b.power, **close)
        assert [p["index"] for p in a.peaks] == [p["index"] for p in b.peaks]
        np.testing.assert_allclose(a.false_alarm["peak_probability"],
                                   b.false_alarm["peak_probability"], **close)
        np.testing.assert_allclose(a.model["parameters"], b.model["parameters"], **close)
    assert client.list_tensors() == []


def test_a_refused_packed_part_is_sent_again_whole(tc, rng):
    """When one part of a packed survey is refused, the whole survey goes again as one request
    (its tensors, larger than the server's message limit, uploaded), so that the error names
    the series as the caller numbered it; nothing is left on the server."""
    from gpucompute import transfer
    series = _survey(rng, 1300)
    packed = gpucompute.client._packed_series(series)
    assert packed.nbytes > LIMIT and len(packed.ranges(transfer.SPLIT_PARTS, 4 << 20)) > 1
    t, y = series[1234]
    series[1234] = (t, np.where(np.arange(len(y)) == 9, np.inf, y))
    expect_rpc_error(grpc.StatusCode.INVALID_ARGUMENT,
                     lambda: tc.periodogram(series, gpucompute.UniformGrid(0.05, 0.01, 50),
                                            output="discard"),
                     r"series\[1234\]\.y: values must be finite \(index 9 ")
    assert tc.list_tensors() == []


def test_split_series_keeps_order_fields_and_what_must_stay_whole(rng):
    """Parts hold consecutive series, each exactly once, in about equal bytes, with every
    other field; small requests, outputs in shared memory and bootstrap stay one request."""
    from gpucompute import transfer
    series = [compute_pb2.Series(t=gpucompute.to_tensor(t), y=gpucompute.to_tensor(y))
              for t, y in _survey(rng, 400)]
    request = compute_pb2.PeriodogramRequest(series=series, top_k=5, nterms=2)
    parts = transfer.split_series(request, parts=16)
    assert 2 <= len(parts) <= 16
    assert [s for p in parts for s in p.series] == list(request.series)
    sizes = [p.ByteSize() for p in parts]
    assert max(sizes) < 2 * request.ByteSize() / len(parts)
    assert all(p.top_k == 5 and p.nterms == 2 for p in parts)
    assert transfer.split_series(compute_pb2.PeriodogramRequest(series=series[:3])) == \
        [compute_pb2.PeriodogramRequest(series=series[:3])]
    shm = compute_pb2.PeriodogramRequest(series=series)
    shm.output_placement.shared_memory.region = "r"
    assert len(transfer.split_series(shm)) == 1
    boot = compute_pb2.PeriodogramRequest(series=series)
    boot.false_alarm.method = compute_pb2.FALSE_ALARM_METHOD_BOOTSTRAP
    assert len(transfer.split_series(boot)) == 1


def test_parallel_copies_work_in_a_forked_child():
    """The copy threads are the process's own: a child forked after a parallel copy starts its
    own instead of waiting on its parent's."""
    from gpucompute import parallel_copy
    src = np.arange(40 << 20, dtype=np.uint8)
    dst = np.empty_like(src)
    parallel_copy.copy_bytes(dst, src)  # the parent's pool exists now
    pid = os.fork()
    if pid == 0:
        signal.alarm(30)  # a child waiting on threads it does not have dies, not hangs
        try:
            out = np.empty_like(src)
            parallel_copy.copy_bytes(out, src)
            os._exit(0 if np.array_equal(out, src) else 1)
        except BaseException:  # noqa: BLE001 (the child reports by its exit status)
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert np.array_equal(dst, src)
