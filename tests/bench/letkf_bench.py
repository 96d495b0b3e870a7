#!/usr/bin/env python3
"""The LETKF at scale: a periodic 1,000 x 1,000 grid (n = 10^6 state variables), m = 10^5
observations at random points, N = 50 members, a Gaspari-Cohn radius leaving ~100 observations
in each local domain; float64 and float32.

For each dtype, in one run on one machine (JSON lines on stdout):
- ``gpucompute``: the Python client's round trip to the server given by --target, and the
  server's device time for the batch (the assimilate batch stage ``device`` of its metrics);
- ``pytorch``: the same analysis written plainly in PyTorch on the GPU (the local observations
  of every variable from scipy's cKDTree on the host, untimed; then in chunks of variables:
  gather the tapered local rows, batched products, ``torch.linalg.eigh``, the update), timed
  with CUDA events over --torch-points variables and scaled to n (stated in the line);
- ``cpu``: the server's CPU backend (--cpu-target, the host's cores) on the same problem, its
  round trip and server compute time;
plus the largest difference between the GPU's analysis and the CPU backend's, and between the
GPU's and PyTorch's on the variables PyTorch analysed.

Usage: letkf_bench.py --target HOST:PORT --metrics-port PORT [--cpu-target HOST:PORT]
                      [--side 1000] [--obs 100000] [--members 50] [--torch-points 20000]
"""
import argparse
import json
import math
import sys
import time
import urllib.request

from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
import gpucompute  # noqa: E402
from letkf_numpy import taper  # noqa: E402

CUTOFF = 1e-3  # an observation enters when its taper coefficient exceeds this (DAPPER's)


def reach_factor():
    """Distance / radius at which the Gaspari-Cohn coefficient falls to the cut-off."""
    x = np.linspace(0, 3.64, 200001)
    return float(x[np.nonzero(taper(x, 1.0, "gaspari_cohn") > CUTOFF)[0][-1]])


def problem(rng, side, m, N, local):
    grid = np.stack(np.meshgrid(np.arange(side, dtype=float), np.arange(side, dtype=float), indexing="ij"),
                    axis=-1).reshape(-1, 2)
    obs = rng.uniform(0, side, (m, 2))
    density = m / side ** 2
    radius = math.sqrt(local / (density * math.pi)) / reach_factor()
    X = rng.normal(0, 1, (len(grid), N))
    HX = rng.normal(0, 1, (m, N))
    y = rng.normal(0, 1, m)
    r = np.ones(m)
    return dict(X=X, HX=HX, y=y, r=r, state=grid, obs=obs, radius=radius, domain=np.array([side, side], float))


def stage_device_ms(metrics_port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics").read().decode()
    total = count = 0.0
    for line in text.splitlines():
        if 'op="assimilate"' in line and 'stage="device"' in line:
            if line.startswith("gpucompute_batch_stage_duration_seconds_sum"):
                total = float(line.rsplit(" ", 1)[1])
            elif line.startswith("gpucompute_batch_stage_duration_seconds_count"):
                count = float(line.rsplit(" ", 1)[1])
    return total * 1e3, count


def server_call(client, p, dtype):
    start = time.perf_counter()
    result = client.assimilate(p["X"], p["HX"], p["y"], p["r"], method="letkf", dtype=dtype,
                               state_coords=p["state"], obs_coords=p["obs"],
                               localization=dict(radius=p["radius"], metric="periodic", domain=p["domain"]),
                               return_diagnostics=True)
    return result, (time.perf_counter() - start) * 1e3


def neighbours(p, points):
    """The observations within the taper's support (3.64 radius) of the first `points`
    variables, and the mean count of those whose coefficient exceeds the cut-off."""
    from scipy.spatial import cKDTree
    tree = cKDTree(p["obs"], boxsize=p["domain"])
    lists = tree.query_ball_point(p["state"][:points], p["radius"] * 2 * 1.82)
    local = tree.query_ball_point(p["state"][:points], p["radius"] * reach_factor(), return_length=True)
    return lists, float(np.mean(local))


def torch_letkf(p, lists, dtype, chunk=4096):
    """The plain PyTorch LETKF of the first len(lists) variables: (analysis, ms on the GPU)."""
    import torch
    dev = torch.device("cuda")
    tdt = torch.float64 if dtype == "float64" else torch.float32
    N = p["X"].shape[1]
    X = torch.as_tensor(p["X"][:len(lists)], device=dev, dtype=tdt)
    HX = torch.as_tensor(p["HX"], device=dev, dtype=tdt)
    y = torch.as_tensor(p["y"], device=dev, dtype=tdt)
    rinv = torch.as_tensor(1 / p["r"], device=dev, dtype=tdt)
    obs = torch.as_tensor(p["obs"], device=dev, dtype=tdt)
    state = torch.as_tensor(p["state"][:len(lists)], device=dev, dtype=tdt)
    domain = torch.as_tensor(p["domain"], device=dev, dtype=tdt)
    K = max(len(l) for l in lists)
    index = np.zeros((len(lists), K), dtype=np.int64)
    valid = np.zeros((len(lists), K), dtype=bool)
    for i, l in enumerate(lists):
        index[i, :len(l)] = l
        valid[i, :len(l)] = True
    index = torch.as_tensor(index, device=dev)
    valid = torch.as_tensor(valid, device=dev)
    out = torch.empty_like(X)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    ybar = HX.mean(dim=1, keepdim=True)
    Y = HX - ybar
    d = y - ybar[:, 0]
    xbar = X.mean(dim=1, keepdim=True)
    A = X - xbar
    eye = torch.eye(N, device=dev, dtype=tdt)
    for s in range(0, len(lists), chunk):
        e = min(len(lists), s + chunk)
        idx, ok = index[s:e], valid[s:e]
        diff = torch.abs(obs[idx] - state[s:e, None, :])
        diff = torch.minimum(diff, domain - diff)
        dist = torch.sqrt((diff ** 2).sum(-1))
        r = dist / (1.82 * p["radius"])
        c1 = 1 - 5 / 3 * r ** 2 + 5 / 8 * r ** 3 + 1 / 2 * r ** 4 - 1 / 4 * r ** 5
        c2 = r ** 5 / 12 - r ** 4 / 2 + 5 / 8 * r ** 3 + 5 / 3 * r ** 2 - 5 * r + 4 - 2 / (3 * r)
        coeff = torch.where(r <= 1, c1, torch.where(r < 2, c2, torch.zeros_like(r)))
        coeff = torch.where(ok & (coeff > CUTOFF), coeff, torch.zeros_like(coeff)) * rinv[idx]
        Yl = Y[idx]                                         # P x K x N
        G = (N - 1) * eye + Yl.transpose(1, 2) @ (coeff[..., None] * Yl)
        b = (Yl.transpose(1, 2) @ (coeff * d[idx])[..., None])[..., 0]
        g, V = torch.linalg.eigh(G)
        wbar = (V @ ((V.transpose(1, 2) @ b[..., None])[..., 0] / g)[..., None])[..., 0]
        W = V @ (torch.sqrt((N - 1) / g)[..., None] * V.transpose(1, 2))
        a = A[s:e]
        out[s:e] = xbar[s:e] + (a * wbar).sum(-1, keepdim=True) + (W @ a[..., None])[..., 0]
    stop.record()
    torch.cuda.synchronize()
    return out.cpu().numpy(), start.elapsed_time(stop)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True)
    parser.add_argument("--metrics-port", required=True)
    parser.add_argument("--cpu-target", default="")
    parser.add_argument("--side", type=int, default=1000)
    parser.add_argument("--obs", type=int, default=100000)
    parser.add_argument("--members", type=int, default=50)
    parser.add_argument("--local", type=float, default=100.0)
    parser.add_argument("--torch-points", type=int, default=20000)
    parser.add_argument("--calls", type=int, default=3)
    parser.add_argument("--dtypes", default="float64,float32")
    args = parser.parse_args()
    p = problem(np.random.default_rng(7), args.side, args.obs, args.members, args.local)
    n = len(p["state"])
    lists, local = neighbours(p, max(args.torch_points, 2000))
    lists = lists[:args.torch_points]
    common = dict(n=n, m=args.obs, N=args.members, radius=round(p["radius"], 4), local_obs_mean=round(local, 1))
    client = gpucompute.Client(args.target, timeout=600)
    cpu = gpucompute.Client(args.cpu_target, timeout=1800) if args.cpu_target else None
    for dtype in args.dtypes.split(","):
        server_call(client, p, dtype)  # warm-up
        times, device = [], []
        for _ in range(args.calls):
            before = stage_device_ms(args.metrics_port)
            gpu, ms = server_call(client, p, dtype)
            after = stage_device_ms(args.metrics_port)
            times.append(ms)
            device.append((after[0] - before[0]) / max(1.0, after[1] - before[1]))
        line = dict(common, impl="gpucompute", dtype=dtype, round_trip_ms=round(float(np.median(times)), 2),
                    device_ms=round(float(np.median(device)), 2), calls=args.calls, timings=client.last_timings)
        print(json.dumps(line), flush=True)
        if args.torch_points > 0:
            torch_a, torch_ms = torch_letkf(p, lists, dtype)
            scale = n / len(lists)
            print(json.dumps(dict(common, impl="pytorch", dtype=dtype, points=len(lists),
                                  device_ms_measured=round(torch_ms, 2),
                                  device_ms_scaled_to_n=round(torch_ms * scale, 1),
                                  ratio_vs_gpucompute_device=round(torch_ms * scale / float(np.median(device)), 1),
                                  max_abs_diff_vs_gpucompute=float(np.abs(torch_a - gpu.analysis[:len(lists)]).max()))),
                  flush=True)
        if cpu is not None:
            cpu_result, cpu_ms = server_call(cpu, p, dtype)
            print(json.dumps(dict(common, impl="cpu", dtype=dtype, round_trip_ms=round(cpu_ms, 1),
                                  timings=cpu.last_timings,
                                  max_abs_diff_vs_gpucompute=float(np.abs(cpu_result.analysis - gpu.analysis).max()),
                                  spread_rel_diff=abs(cpu_result.analysis_spread / gpu.analysis_spread - 1))),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
