#!/usr/bin/env python3
"""The seed EnKF (n = m = N = 3000, float64) from the Python client against a running server:
the call's round trip, the server's own timings and where its GPU batches spent their time.

Usage: enkf_stages.py --target HOST:PORT --metrics-port PORT [--label TEXT] [--calls 9]
Prints one JSON line: the median round trip, the median server timings of the calls
(``Client.last_timings``, ms) and the mean of the assimilate batch stages over the timed calls
(``gpucompute_batch_stage_duration_seconds``: launch, device, finish; ms). Run it against two
servers in turn (tests/bench/enkf_stages_gpu.sh) to compare them on one host."""
import argparse
import json
import statistics
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import e2e_bench  # noqa: E402
import gpucompute  # noqa: E402

STAGES = ("launch", "device", "finish")


def stage_sums(metrics_port):
    """(sum, count) of each assimilate batch stage, from the metrics endpoint."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics").read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("gpucompute_batch_stage_duration_seconds_") and 'op="assimilate"' in line:
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--metrics-port", required=True)
    parser.add_argument("--label", default="")
    parser.add_argument("--calls", type=int, default=9)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    client = gpucompute.Client(args.target, timeout=120)
    problem = e2e_bench.enkf_problem(np.random.default_rng(1), 3000)
    for _ in range(args.warmup):
        e2e_bench.enkf_client(client, problem)
    before = stage_sums(args.metrics_port)
    round_trips, server = [], []
    for _ in range(args.calls):
        start = time.perf_counter()
        e2e_bench.enkf_client(client, problem)
        round_trips.append((time.perf_counter() - start) * 1e3)
        server.append(client.last_timings)
    after = stage_sums(args.metrics_port)
    stages = {}
    for stage in STAGES:
        total = f'gpucompute_batch_stage_duration_seconds_sum{{op="assimilate",stage="{stage}"}}'
        count = f'gpucompute_batch_stage_duration_seconds_count{{op="assimilate",stage="{stage}"}}'
        calls = max(1.0, after[count] - before[count])
        stages[stage] = round((after[total] - before[total]) / calls * 1e3, 2)
    print(json.dumps({
        "label": args.label,
        "median_ms": round(statistics.median(round_trips), 1),
        "server_ms": {k.replace("_us", "_ms"): round(statistics.median(t[k] for t in server) / 1e3, 2)
                      for k in ("compute_us", "total_us", "decode_us")},
        "stage_mean_ms": stages}), flush=True)


if __name__ == "__main__":
    main()
