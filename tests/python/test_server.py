"""ServerInfo, timing metadata, and many concurrent clients (dynamic batching)."""

import concurrent.futures
import os
import threading

import numpy as np

from series_util import assert_power_close, astropy_power, frequency_grid, make_series


def test_server_info(client):
    info = client.server_info()
    expected = os.environ.get("GPUCOMPUTE_BACKEND", "cpu")
    assert info["backend"] == expected if expected != "auto" else info["backend"] in ("cpu", "cuda")
    assert info["version"]
    limits = info["limits"]
    for key in ["maxRequestBytes", "maxSeriesPerRequest", "maxSamplesPerSeries",
                "maxFrequenciesPerSeries", "maxPairsPerRequest", "maxBatchSize",
                "maxQueueDepth"]:
        assert isinstance(limits[key], int) and limits[key] > 0, (key, limits)
    assert limits["maxQueueDelayUs"] >= 0
    assert {"requests", "batches", "largestBatch"} <= set(info["periodogramBatching"])
    assert "kernelCache" in info
    if info["backend"] == "cuda":
        assert info["devices"], info
        d = info["devices"][0]
        assert d["name"] and d["totalMemoryBytes"] > 0 and d["computeCapabilityMajor"] >= 7
        assert info["nvrtcVersion"]


def test_timings_in_trailing_metadata(client, rng):
    t, y, dy, f_signal = make_series(rng)
    client.lombscargle(t, y, dy, frequency_grid(rng, t, f_signal))
    timings = client.last_timings
    for key in ["decode_us", "queue_us", "compute_us", "total_us", "batch_requests"]:
        assert isinstance(timings.get(key), int) and timings[key] >= 0, (key, timings)
    assert timings["batch_requests"] >= 1
    # Consecutive stages of one call: their sum fits in the total (each is rounded down).
    stages = timings["decode_us"] + timings["queue_us"] + timings["compute_us"]
    assert timings["total_us"] + 2 >= stages, timings


def test_concurrent_requests_are_batched(client, rng):
    """64 threads, each with its own random series, released at once; every answer is its
    own series' (Astropy), and the server coalesced some of them."""
    threads = 64
    seeds = rng.integers(0, 2**63, size=threads)
    barrier = threading.Barrier(threads)

    def work(seed):
        r = np.random.default_rng(seed)
        t, y, dy, f_signal = make_series(r, int(r.integers(50, 150)))
        f = frequency_grid(r, t, f_signal, m=int(r.integers(200, 400)))
        barrier.wait()
        _, power = client.lombscargle(t, y, dy, f)
        timings = client.last_timings  # this thread's own call
        assert_power_close(power, astropy_power(t, y, dy, f), rtol_of_max=1e-9,
                           context=f"thread seed {seed}")
        return timings

    before = client.server_info()["periodogramBatching"]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        timings = list(pool.map(work, seeds))
    after = client.server_info()["periodogramBatching"]

    assert after["requests"] - before["requests"] >= threads, (before, after)
    assert after["batches"] <= after["requests"]
    assert after["largestBatch"] > 1, after
    assert max(t["batch_requests"] for t in timings) > 1, timings
