"""Server limits: a second server with small limits, so that each one is cheap to exceed.

Every limit answers RESOURCE_EXHAUSTED; a request just under the limits still succeeds.
"""

import concurrent.futures
import os
import subprocess
import threading

import grpc
import numpy as np
import pytest

import gpucompute
from conftest import STARTUP_TIMEOUT_S, _server_binary, client_of_server
from series_util import assert_power_close, astropy_power, make_series

LIMITS = {
    "max_series_per_request": 8,
    "max_samples_per_series": 1000,
    "max_frequencies_per_series": 5000,
    "max_pairs_per_request": 2_000_000,
    "max_request_bytes": 1 << 20,
    "max_queue_depth": 2,
}


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """A client of a server started with LIMITS."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    flags = [f"--{k}={v}" for k, v in LIMITS.items()]
    with client_of_server(tmp_path_factory.mktemp("limited"), *flags) as c:
        yield c


def _exhausted(fn, pattern=None):
    with pytest.raises(grpc.RpcError) as e:
        fn()
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (
        e.value.code(), e.value.details())
    if pattern:
        assert pattern in (e.value.details() or ""), e.value.details()


def _series(n):
    t = np.linspace(0.0, 100.0, n)
    return t, np.sin(t)


def test_limits_are_reported(limited):
    limits = limited.server_info()["limits"]
    for key, value in LIMITS.items():
        camel = key.split("_")[0] + "".join(w.title() for w in key.split("_")[1:])
        assert limits[camel] == value, (camel, limits)


def test_at_the_limits_succeeds(limited, rng):
    # 2 series x 1000 samples x 1000 frequencies = the pair limit; 32 kB of data.
    data = [make_series(rng, 1000, baseline=100.0) for _ in range(2)]
    f = np.linspace(0.01, 2.0, 1000)
    out = limited.lombscargle_batch([(t, y, dy) for t, y, dy, _ in data], f)
    for (_, power), (t, y, dy, _) in zip(out, data):
        assert_power_close(power, astropy_power(t, y, dy, f), rtol_of_max=1e-9)
    _, power = limited.lombscargle(*_series(10), None, gpucompute.UniformGrid(0.1, 0.01, 5000))
    assert power.shape == (5000,)


def test_too_many_series(limited):
    _exhausted(lambda: limited.lombscargle_batch([_series(5)] * 9, [0.5]), "series")


def test_too_many_samples(limited):
    _exhausted(lambda: limited.lombscargle(*_series(1001), None, [0.5]), "series[0]")


def test_too_many_frequencies(limited):
    _exhausted(lambda: limited.lombscargle(*_series(10), None,
                                           gpucompute.UniformGrid(0.1, 0.01, 5001)))
    _exhausted(lambda: limited.lombscargle(*_series(10), None, np.linspace(0.1, 1, 5001)))


def test_too_many_pairs(limited):
    # 3 x 1000 x 1000 = 3e6 pairs > 2e6, each series within its own limits.
    grid = gpucompute.UniformGrid(0.01, 0.001, 1000)
    _exhausted(lambda: limited.lombscargle_batch([_series(1000)] * 3, grid))


def test_request_too_large(limited):
    # 8 series x 2 x 1000 float64 = 128 kB: under; 64k explicit frequencies ~ 512 kB x 3.
    series = [_series(1000)] * 3
    per_series = [{"t": t, "y": y, "frequency": np.linspace(0.1, 1.0, 50_000)}
                  for t, y in series]
    _exhausted(lambda: limited.lombscargle_batch(per_series, [0.5]))


def test_queue_overflow_is_rejected_not_queued(limited, rng):
    """With a queue of 2, a burst of 32 requests: each one succeeds (and is right) or gets
    RESOURCE_EXHAUSTED, and the server counts the rejections."""
    threads = 32
    barrier = threading.Barrier(threads)
    data = [make_series(rng, 400, baseline=100.0) for _ in range(threads)]
    f = np.linspace(0.01, 2.0, 2000)

    def work(i):
        t, y, dy, _ = data[i]
        barrier.wait()
        try:
            _, power = limited.lombscargle(t, y, dy, f)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, (e.code(), e.details())
            return False
        assert_power_close(power, astropy_power(t, y, dy, f), rtol_of_max=1e-9)
        return True

    before = limited.server_info()["periodogramBatching"]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        ok = list(pool.map(work, range(threads)))
    after = limited.server_info()["periodogramBatching"]
    rejected = after["rejectedQueueFull"] - before["rejectedQueueFull"]
    assert rejected == ok.count(False), (rejected, ok.count(False), after)
    print("rejected", rejected, after)


def test_resident_tensors_and_work_share_the_servers_memory(tmp_path):
    """--server_memory_bytes bounds resident tensors and the work in progress together: with
    a 40 MiB tensor held, a second one and a call whose decoded inputs would pass the rest are
    RESOURCE_EXHAUSTED naming the flag, though each fits its own limit; once the tensor is
    deleted both go through."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    mib = 1 << 20
    flags = [f"--server_memory_bytes={64 * mib}", f"--memory_budget_bytes={48 * mib}",
             f"--tensor_store_bytes={1 << 30}", "--workers=0"]  # one process (see the next test)
    with client_of_server(tmp_path, *flags) as c:
        held = c.create_tensor((40 * mib // 8,), "float64")
        _exhausted(lambda: c.create_tensor((32 * mib // 8,), "float64"), "(--server_memory_bytes)")
        t, y = _series(1_000_000)  # 16 MB of samples; decoding holds twice that
        grid = gpucompute.UniformGrid(0.1, 0.1, 4)
        _exhausted(lambda: c.lombscargle(t, y, frequency=grid), "(--server_memory_bytes)")
        c.delete_tensor(held)
        second = c.create_tensor((32 * mib // 8,), "float64")
        c.delete_tensor(second)
        _, power = c.lombscargle(t, y, frequency=grid)
        assert power.shape == (4,)


def test_workers_share_the_servers_memory(tmp_path):
    """In worker mode --server_memory_bytes is the whole server's: each of two workers holds
    half of it, so a tensor over half is refused naming the flag, and one under half fits."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    mib = 1 << 20
    with client_of_server(tmp_path, "--workers=2", "--backend=cpu", "--cpu_threads=1",
                          f"--server_memory_bytes={64 * mib}") as c:
        _exhausted(lambda: c.create_tensor((40 * mib // 8,), "float64"), "(--server_memory_bytes)")
        c.delete_tensor(c.create_tensor((24 * mib // 8,), "float64"))


@pytest.mark.parametrize("value", ["1", str(65 << 30)])
def test_staging_bytes_out_of_range_stops_the_server(value):
    proc = subprocess.run([_server_binary(), f"--staging_bytes={value}"], capture_output=True,
                          text=True, timeout=STARTUP_TIMEOUT_S)
    assert proc.returncode == 2
    assert f"--staging_bytes={value}: must be between 1 MiB and 64 GiB" in proc.stdout + proc.stderr


def test_a_server_with_its_own_staging_size_serves(tmp_path, rng):
    with client_of_server(tmp_path, f"--staging_bytes={2 << 20}") as c:
        t = np.sort(rng.uniform(0, 10, 200))
        freq, power = c.lombscargle(t, np.sin(t), frequency=np.linspace(0.05, 1, 100))
        assert power.shape == (100,) and np.all(np.isfinite(power))
