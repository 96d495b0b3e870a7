"""End to end: what a user's own call costs through the Python client, against the same
request through the raw generated stub and the same work done locally.

For each case, one JSON line per path (median, p10, p90 and the count of timed calls, after
a warm-up; the paths to the server are called in turn, call by call, so that drift weighs on
them alike), then a line of ratios:

  python-client  the gpucompute.Client call as a user writes it (encode, RPC, decode);
  raw-stub       the same request built by hand (tensor_pb2.Tensor(data=a.tobytes())), sent
                 through compute_pb2_grpc.ComputeStub on a channel of its own with the client's
                 message limits, the reply decoded with np.frombuffer;
  numpy-host     the same work in NumPy on this host's cores;
  torch-gpu      the same work in PyTorch on the GPU, host arrays in and a host array out
                 (skipped, with the reason, without torch or CUDA).

Cases (--only): enkf (stochastic EnKF n = m = N = 3000, float64, your perturbations; the paths
must agree within 1e-8 of max |Xa - X|; also through a registered shared-memory region when the
server allows it), dense_row (one float32 row through a resident
bfloat16 LayerNorm -> 1024x4096 -> GELU layer, concurrency 1), periodogram (1,000 samples on
1,000 uniform frequencies, float64, with a raw Echo of the same bytes as the transport
ceiling), survey (2,000 light curves of 50-1,000 samples on automatic grids, top 5 peaks and
Baluev false-alarm probabilities, powers returned inline and with output="discard", which
a server or client without it skips with the reason; no local path), echo (a 72 MB and a 4 KiB
float64 array; no local path). Server-side timings (the client's last_timings: queue, compute,
total µs) are medians over the timed calls. --quick (a smoke run, e.g. on the CPU backend):
EnKF 300, 200 small calls, 200 light curves, fewer repeats.

Run (the server's python dir on PYTHONPATH: build/python, or the device bundle's python/):
  PYTHONPATH=build/python python3 tests/bench/e2e_bench.py --target HOST:PORT [--quick]
      [--only enkf,echo] [--repeats N] [--calls N]
On the GPU machine tests/bench/e2e_gpu.sh starts a CUDA server and runs it. A result that
disagrees between paths ends the run with exit status 1 after the other cases.
"""

import argparse
import datetime
import json
import math
import os
import sys
import time
import traceback

import grpc
import numpy as np

import gpucompute
from gpucompute.client import DEFAULT_MAX_MESSAGE_BYTES
from gpucompute.v1 import compute_pb2, compute_pb2_grpc, tensor_pb2

CASES = ("enkf", "dense_row", "periodogram", "survey", "echo")
ENKF_TOLERANCE = 1e-8          # max |difference| / max |Xa - X|, every pair of paths
PERIODOGRAM_TOLERANCE = 1e-9   # max |difference| of standard-normalised power
DENSE_TOLERANCE = 1e-2         # relative l2 of the bfloat16 server against float32 NumPy
TORCH_DENSE_TOLERANCE = 5e-2   # PyTorch bf16 against NumPy: only catches a wrong layer here
CALL_TIMEOUT_S = 600.0
DENSE_MODEL = "e2e_row"
LAYERNORM_EPS = 1e-5


class Mismatch(Exception):
    """Two paths gave different answers."""


# ---------------------------------------------------------------------- output and timing

def emit(**fields):
    print(json.dumps({"bench": "e2e", **fields}), flush=True)


def stats(seconds, unit):
    """Median, p10, p90 of call times in "ms" or "us", and the count."""
    scale = 1e3 if unit == "ms" else 1e6
    p10, p50, p90 = np.percentile(np.asarray(seconds) * scale, [10, 50, 90])
    return {unit: round(float(p50), 3), f"p10_{unit}": round(float(p10), 3),
            f"p90_{unit}": round(float(p90), 3), "n": len(seconds)}


def timed(fn, repeats, warmup=1):
    """Calls fn warmup times, then times repeats calls with perf_counter.
    Returns (seconds, fn's last result, [])."""
    return timed_interleaved({"fn": fn}, repeats, warmup)["fn"]


def timed_interleaved(paths, repeats, warmup=1):
    """Times several paths to the server call by call in turn (the order rotating each round),
    so that drift and order weigh on all alike. ``paths``: ``{name: fn}`` or
    ``{name: (fn, after)}``. Returns ``{name: (seconds, last result, afters)}``."""
    paths = {name: p if isinstance(p, tuple) else (p, None) for name, p in paths.items()}
    names = list(paths)
    seconds = {name: [] for name in names}
    afters = {name: [] for name in names}
    last = {}
    for round_ in range(warmup + repeats):
        k = round_ % len(names)
        for name in names[k:] + names[:k]:
            fn, after = paths[name]
            start = time.perf_counter()
            last[name] = fn()
            elapsed = time.perf_counter() - start
            if round_ >= warmup:
                seconds[name].append(elapsed)
                if after is not None:
                    afters[name].append(after())
    return {name: (seconds[name], last[name], afters[name]) for name in names}


def server_medians(timings):
    """Median of each numeric key of the client's last_timings (queue_us, compute_us, total_us,
    batch_requests) over the timed calls."""
    keys = sorted({k for t in timings for k, v in t.items() if isinstance(v, int)})
    return {k: int(np.median([t[k] for t in timings if k in t])) for k in keys}


def median(seconds):
    return float(np.median(seconds))


def ratio(num, den):
    return round(median(num) / median(den), 4)


def check(what, value, tolerance):
    if not value <= tolerance:  # NaN fails too
        raise Mismatch(f"{what}: {value:.3e} > {tolerance:.0e}")


# ---------------------------------------------------------------------- connections

def raw_stub(target):
    """A ComputeStub on a channel of its own with the client's message limits."""
    channel = grpc.insecure_channel(target, options=[
        ("grpc.max_send_message_length", DEFAULT_MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", DEFAULT_MAX_MESSAGE_BYTES)])
    grpc.channel_ready_future(channel).result(timeout=60)
    return channel, compute_pb2_grpc.ComputeStub(channel)


def raw_tensor(a, dtype=tensor_pb2.FLOAT64):
    return tensor_pb2.Tensor(dtype=dtype, shape=list(a.shape), data=a.tobytes())


def load_torch():
    """(torch, None), or (None, why the torch-gpu lines are skipped)."""
    try:
        import torch
    except ImportError as e:
        return None, f"torch not importable: {e}"
    if not torch.cuda.is_available():
        return None, f"torch {torch.__version__} sees no CUDA device"
    return torch, None


def torch_fields(torch):
    return {"device": torch.cuda.get_device_name(), "torch": torch.__version__}


def emit_torch_skipped(case, reason):
    emit(case=case, path="torch-gpu", skipped=reason)


def setup_line(args, client, torch, torch_reason):
    info = client.server_info()
    try:
        import scipy
        scipy_version = scipy.__version__
    except ImportError:
        scipy_version = None
    emit(what="setup", target=args.target, quick=args.quick,
         server_info={"backend": info.get("backend"), "version": info.get("version"),
                      "devices": [d.get("name") for d in info.get("devices", [])]},
         python=sys.version, grpcio=grpc.__version__, numpy=np.__version__, scipy=scipy_version,
         torch=torch.__version__ if torch else torch_reason,
         date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
         host_cores=os.cpu_count())


# ---------------------------------------------------------------------- enkf

def enkf_problem(rng, size):
    """n = m = N = size; H observes the state directly plus noise; R diagonal."""
    X = rng.standard_normal((size, size))
    HX = X + 0.3 * rng.standard_normal((size, size))
    r = rng.uniform(0.5, 1.5, size)
    y = rng.standard_normal(size)
    E = rng.standard_normal((size, size)) * np.sqrt(r)[:, None]
    return {"X": X, "HX": HX, "y": y, "r": r, "E": E}


def enkf_client(client, p):
    return client.assimilate(p["X"], p["HX"], p["y"], p["r"], method="enkf",
                             perturbations=p["E"], timeout=CALL_TIMEOUT_S)


def enkf_raw(stub, p):
    problem = compute_pb2.AssimilationProblem(
        x=raw_tensor(p["X"]), hx=raw_tensor(p["HX"]), y=raw_tensor(p["y"]),
        obs_error_variance=raw_tensor(p["r"]), method=compute_pb2.ASSIMILATION_METHOD_ENKF,
        perturbations=raw_tensor(p["E"]))
    request = compute_pb2.AssimilateRequest(problems=[problem], dtype=tensor_pb2.FLOAT64)
    analysis = stub.Assimilate(request, timeout=CALL_TIMEOUT_S).results[0].analysis
    return np.frombuffer(analysis.data, dtype="<f8").reshape(tuple(analysis.shape))


def enkf_shared_memory(client, region, p):
    """The call with X, HX and E put into a registered shared-memory region and the analysis
    written there (a client on the server's node), the copies in and out of the region timed
    with it."""
    region.reset()
    X, HX, E = (region.put(p[k]) for k in ("X", "HX", "E"))
    Xa = client.assimilate(X, HX, p["y"], p["r"], method="enkf", perturbations=E,
                           output=(region, region.next_offset), timeout=CALL_TIMEOUT_S)
    return np.array(Xa)  # the caller's own copy


def shared_memory_region(client, p):
    """A registered region for enkf_shared_memory, or (None, why not)."""
    need = sum(p[k].nbytes for k in ("X", "HX", "E")) + p["X"].nbytes + (1 << 20)
    try:
        return client.create_shared_memory(need), None
    except grpc.RpcError as e:
        return None, f"{e.code().name}: {e.details()}"


def cholesky_solver():
    """(name, solve(C, B)) for a symmetric positive definite C: SciPy's Cholesky if present."""
    try:
        from scipy.linalg import cho_factor, cho_solve
    except ImportError:
        return "numpy.linalg.solve", np.linalg.solve
    return "scipy.linalg.cho_solve", lambda C, B: cho_solve(cho_factor(C, overwrite_a=True), B)


def enkf_numpy(p, solve):
    """Xa = X + A Yᵀ/(N-1) C⁻¹ (y + E - HX), C = Y Yᵀ/(N-1) + diag(r): the server's convention."""
    X, HX = p["X"], p["HX"]
    N = X.shape[1]
    A = X - X.mean(axis=1, keepdims=True)
    Y = HX - HX.mean(axis=1, keepdims=True)
    C = Y @ Y.T / (N - 1)
    C[np.diag_indices_from(C)] += p["r"]
    S = solve(C, p["y"][:, None] + p["E"] - HX)
    return X + A @ (Y.T @ S / (N - 1))


def enkf_torch(torch, p):
    """enkf_numpy on the GPU in float64, from host arrays to a host array."""
    X, HX, y, r, E = (torch.from_numpy(p[k]).cuda() for k in ("X", "HX", "y", "r", "E"))
    N = X.shape[1]
    A = X - X.mean(dim=1, keepdim=True)
    Y = HX - HX.mean(dim=1, keepdim=True)
    C = Y @ Y.T / (N - 1) + torch.diag(r)
    S = torch.cholesky_solve(y[:, None] + E - HX, torch.linalg.cholesky(C))
    Xa = (X + A @ (Y.T @ S / (N - 1))).cpu().numpy()
    torch.cuda.synchronize()
    return Xa


def run_enkf(args, client, stub, torch, torch_reason):
    size = 300 if args.quick else 3000
    repeats = args.repeats or (3 if args.quick else 7)
    p = enkf_problem(np.random.default_rng(), size)
    shape = {"problem": {"n": size, "m": size, "N": size}, "dtype": "float64"}

    timings = timed_interleaved({
        "client": (lambda: enkf_client(client, p), lambda: client.last_timings),
        "raw": lambda: enkf_raw(stub, p)}, repeats)
    (c_s, c_xa, c_timings), (r_s, r_xa, _) = timings["client"], timings["raw"]
    solver, solve = cholesky_solver()
    n_s, n_xa, _ = timed(lambda: enkf_numpy(p, solve), repeats)
    t_s = t_xa = None
    if torch is not None:
        t_s, t_xa, _ = timed(lambda: enkf_torch(torch, p), repeats)
    region, shm_reason = shared_memory_region(client, p)
    s_s = s_xa = None
    if region is not None:
        try:
            s_s, s_xa, s_timings = timed_interleaved({"shm": (
                lambda: enkf_shared_memory(client, region, p), lambda: client.last_timings)},
                repeats)["shm"]
        finally:
            client.unregister_shared_memory(region)
            region.close()

    scale = float(np.max(np.abs(n_xa - p["X"])))
    diff = {"client_vs_numpy": float(np.max(np.abs(c_xa - n_xa))) / scale,
            "raw_vs_client": float(np.max(np.abs(r_xa - c_xa))) / scale}
    if t_xa is not None:
        diff["torch_vs_numpy"] = float(np.max(np.abs(t_xa - n_xa))) / scale
    if s_xa is not None:
        diff["shared_memory_vs_client"] = float(np.max(np.abs(s_xa - c_xa))) / scale
    emit(case="enkf", path="python-client", **shape, **stats(c_s, "ms"),
         max_rel_diff_vs_numpy=diff["client_vs_numpy"], server=server_medians(c_timings))
    if s_s is None:
        emit(case="enkf", path="python-client-shared-memory", skipped=shm_reason)
    else:
        emit(case="enkf", path="python-client-shared-memory", **shape, **stats(s_s, "ms"),
             max_rel_diff_vs_client=diff["shared_memory_vs_client"],
             server=server_medians(s_timings))
    emit(case="enkf", path="raw-stub", **shape, **stats(r_s, "ms"),
         max_rel_diff_vs_client=diff["raw_vs_client"])
    emit(case="enkf", path="numpy-host", **shape, **stats(n_s, "ms"), cores=os.cpu_count(),
         solver=solver)
    ratios = {"client_over_raw": ratio(c_s, r_s), "numpy_over_client": ratio(n_s, c_s)}
    if s_s is not None:
        ratios["numpy_over_shared_memory"] = ratio(n_s, s_s)
    if t_s is None:
        emit_torch_skipped("enkf", torch_reason)
    else:
        emit(case="enkf", path="torch-gpu", **shape, **stats(t_s, "ms"), **torch_fields(torch),
             solver="torch.linalg.cholesky + cholesky_solve",
             max_rel_diff_vs_numpy=diff["torch_vs_numpy"])
        ratios["torch_over_client"] = ratio(t_s, c_s)
    emit(case="enkf", ratio=ratios)
    for what, value in diff.items():
        check(f"enkf {what} (relative to max |Xa - X| = {scale:.3g})", value, ENKF_TOLERANCE)


# ---------------------------------------------------------------------- dense_row

def dense_layer(rng, n_in=1024, n_out=4096):
    weight = (rng.standard_normal((n_in, n_out)) / math.sqrt(n_in)).astype(np.float32)
    bias = (0.1 * rng.standard_normal(n_out)).astype(np.float32)
    return {"weight": weight, "bias": bias, "layernorm": True, "activation": "gelu_tanh"}


def gelu_tanh(z):
    return 0.5 * z * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (z + 0.044715 * z ** 3)))


def dense_numpy(layer, x):
    """LayerNorm (biased variance, eps 1e-5) -> x W + b -> GELU(tanh), float32."""
    mean = x.mean(axis=-1, keepdims=True)
    h = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=-1, keepdims=True) + LAYERNORM_EPS)
    return gelu_tanh(h @ layer["weight"] + layer["bias"])


def dense_raw(stub, x):
    request = compute_pb2.DenseRequest(model=DENSE_MODEL,
                                       input=raw_tensor(x, tensor_pb2.FLOAT32))
    out = stub.Dense(request, timeout=CALL_TIMEOUT_S).output
    bits = np.frombuffer(out.data, dtype="<u2").astype(np.uint32) << 16  # bfloat16 -> float32
    return bits.view(np.float32).reshape(tuple(out.shape))


def dense_torch_fn(torch, layer):
    """A function of a host row: PyTorch eager bf16 on the GPU, the row copied in and the
    result copied out (the weights stay resident, as the server's do)."""
    import torch.nn.functional as F
    w = torch.from_numpy(layer["weight"].T.copy()).to("cuda", torch.bfloat16)
    b = torch.from_numpy(layer["bias"]).to("cuda", torch.bfloat16)
    n_in = w.shape[1]

    def run(x):
        xg = torch.from_numpy(x).cuda().to(torch.bfloat16)
        y = F.gelu(F.linear(F.layer_norm(xg, (n_in,), eps=LAYERNORM_EPS), w, b),
                   approximate="tanh")
        return y.float().cpu().numpy()  # .cpu() waits for the GPU
    return run


def rel_l2(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def replace_model(client, layer):
    """Loads the bench model, unloading one left behind by an earlier run first."""
    try:
        client.unload_model(DENSE_MODEL)
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.NOT_FOUND:
            raise
    client.load_model(DENSE_MODEL, [layer], dtype="bfloat16", timeout=CALL_TIMEOUT_S)


def run_dense_row(args, client, stub, torch, torch_reason):
    calls = args.calls or (200 if args.quick else 2000)
    rng = np.random.default_rng()
    layer = dense_layer(rng)
    x = rng.standard_normal((1, 1024)).astype(np.float32)
    shape = {"rows": 1, "in": 1024, "out": 4096, "model_dtype": "bfloat16", "input": "float32"}
    replace_model(client, layer)
    try:
        timings = timed_interleaved({
            "client": (lambda: client.dense(DENSE_MODEL, x), lambda: client.last_timings),
            "raw": lambda: dense_raw(stub, x)}, calls, warmup=20)
        (c_s, c_y, c_timings), (r_s, r_y, _) = timings["client"], timings["raw"]
    finally:
        client.unload_model(DENSE_MODEL)
    n_s, n_y, _ = timed(lambda: dense_numpy(layer, x), calls, warmup=20)
    err = {"client_vs_numpy": rel_l2(c_y, n_y), "raw_vs_client": rel_l2(r_y, c_y)}
    emit(case="dense_row", path="python-client", **shape, **stats(c_s, "us"),
         rel_l2_vs_numpy=err["client_vs_numpy"], server=server_medians(c_timings))
    emit(case="dense_row", path="raw-stub", **shape, **stats(r_s, "us"),
         rel_l2_vs_client=err["raw_vs_client"])
    emit(case="dense_row", path="numpy-host", **{**shape, "model_dtype": "float32"},
         **stats(n_s, "us"), cores=os.cpu_count())
    ratios = {"client_over_raw": ratio(c_s, r_s), "numpy_over_client": ratio(n_s, c_s)}
    if torch is None:
        emit_torch_skipped("dense_row", torch_reason)
    else:
        torch_dense = dense_torch_fn(torch, layer)
        t_s, t_y, _ = timed(lambda: torch_dense(x), calls, warmup=20)
        err["torch_vs_numpy"] = rel_l2(t_y, n_y)
        emit(case="dense_row", path="torch-gpu", **shape, **stats(t_s, "us"),
             **torch_fields(torch), rel_l2_vs_numpy=err["torch_vs_numpy"])
        ratios["torch_over_client"] = ratio(t_s, c_s)
    emit(case="dense_row", ratio=ratios)
    check("dense_row client vs numpy (relative l2)", err["client_vs_numpy"], DENSE_TOLERANCE)
    check("dense_row raw stub vs client (relative l2)", err["raw_vs_client"], 0.0)
    if "torch_vs_numpy" in err:
        check("dense_row torch vs numpy (relative l2)", err["torch_vs_numpy"],
              TORCH_DENSE_TOLERANCE)


# ---------------------------------------------------------------------- periodogram

def light_curve(rng, n, baseline):
    t = np.sort(rng.uniform(0.0, baseline, n))
    f = rng.uniform(0.05, 2.0)
    return t, np.sin(2 * np.pi * f * t) + 0.5 * rng.standard_normal(n)


def ls_power(lib, t, y, f):
    """Standard-normalised Lomb-Scargle with a floating mean, y centred, no dy, by its
    least-squares definition: the share of y·y that the fit of 1, sin, cos explains (the mean
    eliminated by centring sin and cos). ``lib`` is numpy or torch."""
    y = y - y.mean()
    phase = (2 * math.pi) * lib.outer(f, t)
    s, c = lib.sin(phase), lib.cos(phase)
    n = t.shape[0]
    s1, c1 = s.sum(1), c.sum(1)
    ss = (s * s).sum(1) - s1 * s1 / n
    cc = (c * c).sum(1) - c1 * c1 / n
    sc = (s * c).sum(1) - s1 * c1 / n
    ys, yc = s @ y, c @ y
    explained = (ys * ys * cc - 2 * ys * yc * sc + yc * yc * ss) / (ss * cc - sc * sc)
    return explained / (y @ y)


def periodogram_torch(torch, t, y, f):
    tg, yg, fg = (torch.from_numpy(a).cuda() for a in (t, y, f))
    power = ls_power(torch, tg, yg, fg).cpu().numpy()
    torch.cuda.synchronize()
    return power


def periodogram_raw(stub, t, y, grid):
    request = compute_pb2.PeriodogramRequest(
        series=[compute_pb2.Series(t=raw_tensor(t), y=raw_tensor(y))],
        frequency=compute_pb2.FrequencyGrid(uniform=compute_pb2.UniformGrid(
            f0=grid.f0, df=grid.df, n=grid.n)),
        dtype=tensor_pb2.FLOAT64)
    power = stub.Periodogram(request, timeout=CALL_TIMEOUT_S).results[0].power
    return np.frombuffer(power.data, dtype="<f8")


def echo_raw(stub, a):
    """Echo of an ndarray by hand: Tensor(data=a.tobytes()) out, np.frombuffer back."""
    tensor = stub.Echo(compute_pb2.EchoRequest(tensor=raw_tensor(a)),
                       timeout=CALL_TIMEOUT_S).tensor
    return np.frombuffer(tensor.data, dtype="<f8").reshape(tuple(tensor.shape))


def run_periodogram(args, client, stub, torch, torch_reason):
    calls = args.calls or (200 if args.quick else 2000)
    rng = np.random.default_rng()
    t, y = light_curve(rng, 1000, 100.0)
    grid = gpucompute.UniformGrid(0.005, 0.005, 1000)
    f = grid.f0 + grid.df * np.arange(grid.n)
    shape = {"samples": 1000, "frequencies": 1000, "dtype": "float64"}
    ty = np.stack([t, y])  # the request's input bytes, 16 KB
    timings = timed_interleaved({
        "client": (lambda: client.lombscargle(t, y, frequency=grid)[1],
                   lambda: client.last_timings),
        "raw": lambda: periodogram_raw(stub, t, y, grid),
        "echo": lambda: echo_raw(stub, ty)}, calls, warmup=20)
    (c_s, c_p, c_timings), (r_s, r_p, _) = timings["client"], timings["raw"]
    e_s, e_out, _ = timings["echo"]
    n_s, n_p, _ = timed(lambda: ls_power(np, t, y, f), max(10, calls // 20), warmup=2)
    diff = {"client_vs_numpy": float(np.max(np.abs(c_p - n_p))),
            "raw_vs_client": float(np.max(np.abs(r_p - c_p)))}
    emit(case="periodogram", path="python-client", **shape, **stats(c_s, "us"),
         max_abs_diff_vs_numpy=diff["client_vs_numpy"], server=server_medians(c_timings))
    emit(case="periodogram", path="raw-stub", **shape, **stats(r_s, "us"),
         max_abs_diff_vs_client=diff["raw_vs_client"])
    emit(case="periodogram", path="raw-stub-echo", bytes=ty.nbytes, **stats(e_s, "us"),
         round_trip_equal=bool(np.array_equal(e_out, ty)))
    emit(case="periodogram", path="numpy-host", **shape, **stats(n_s, "us"),
         cores=os.cpu_count())
    ratios = {"client_over_raw": ratio(c_s, r_s), "client_over_echo": ratio(c_s, e_s),
              "raw_over_echo": ratio(r_s, e_s), "numpy_over_client": ratio(n_s, c_s)}
    if torch is None:
        emit_torch_skipped("periodogram", torch_reason)
    else:
        t_s, t_p, _ = timed(lambda: periodogram_torch(torch, t, y, f), calls, warmup=20)
        diff["torch_vs_numpy"] = float(np.max(np.abs(t_p - n_p)))
        emit(case="periodogram", path="torch-gpu", **shape, **stats(t_s, "us"),
             **torch_fields(torch), max_abs_diff_vs_numpy=diff["torch_vs_numpy"])
        ratios["torch_over_client"] = ratio(t_s, c_s)
    emit(case="periodogram", ratio=ratios)
    if not np.array_equal(e_out, ty):
        raise Mismatch("periodogram: the raw Echo did not return the bytes sent")
    for what, value in diff.items():
        check(f"periodogram {what} (max |power difference|)", value, PERIODOGRAM_TOLERANCE)


# ---------------------------------------------------------------------- survey

def survey_series(rng, count):
    lengths = rng.integers(50, 1001, count)
    return [light_curve(rng, int(n), float(rng.uniform(50.0, 500.0))) for n in lengths]


def survey_call(client, series, output):
    return client.periodogram(series, top_k=5, false_alarm="baluev", output=output,
                              timeout=CALL_TIMEOUT_S)


def survey_raw(stub, series, discard):
    """The survey request by hand; returns (power arrays or None, peaks as peaks_of gives)."""
    request = compute_pb2.PeriodogramRequest(
        series=[compute_pb2.Series(t=raw_tensor(t), y=raw_tensor(y)) for t, y in series],
        frequency=compute_pb2.FrequencyGrid(auto=compute_pb2.AutoGrid(
            samples_per_peak=5, nyquist_factor=5)),
        dtype=tensor_pb2.FLOAT64, top_k=5,
        false_alarm=compute_pb2.FalseAlarmSpec(method=compute_pb2.FALSE_ALARM_METHOD_BALUEV))
    if discard:
        request.output_placement.discard = True
    results = stub.Periodogram(request, timeout=CALL_TIMEOUT_S).results
    powers = [None if discard else np.frombuffer(r.power.data, dtype="<f8") for r in results]
    peaks = [(r.peak_frequency, r.peak_power, r.peak_index, r.false_alarm.peak_probability,
              tuple((p.frequency, p.power, p.index, p.false_alarm_probability)
                    for p in r.peaks)) for r in results]
    return powers, peaks


def peaks_of(results):
    return [(r.peak_frequency, r.peak_power, r.peak_index,
             r.false_alarm["peak_probability"] if r.false_alarm else None,
             tuple((p["frequency"], p["power"], p["index"], p["false_alarm_probability"])
                   for p in r.peaks)) for r in results]


def power_values(powers):
    return sum(0 if p is None else int(np.size(p)) for p in powers)


def survey_fields(results, timings, output):
    """What the client's survey line reports beyond its times."""
    returned = power_values([r.power for r in results])
    fields = {"frequencies": int(sum(len(r.frequency) for r in results)),
              "power_values_returned": returned, "server": server_medians(timings)}
    if output == "discard":
        fields["discard_honoured"] = returned == 0
    return fields


def discard_unsupported(client, series):
    """None if the server and client take output="discard", else why not."""
    try:
        survey_call(client, series[:1], "discard")
    except (grpc.RpcError, ValueError, TypeError) as e:
        return f"{e.code().name}: {e.details()}" if isinstance(e, grpc.RpcError) else repr(e)
    return None


def time_survey(client, stub, series, output, repeats):
    """The client's and the raw stub's survey calls in turn with one output ("inline" or
    "discard"): ((seconds, results, last_timings), (seconds, (powers, peaks), _))."""
    placement = None if output == "inline" else output
    timings = timed_interleaved({
        "client": (lambda: survey_call(client, series, placement), lambda: client.last_timings),
        "raw": lambda: survey_raw(stub, series, output == "discard")}, repeats)
    return timings["client"], timings["raw"]


def run_survey(args, client, stub, torch, torch_reason):
    count = 200 if args.quick else 2000
    repeats = args.repeats or (2 if args.quick else 5)
    series = survey_series(np.random.default_rng(), count)
    shape = {"series": count, "samples": int(sum(len(t) for t, _ in series)),
             "grid": "auto", "top_k": 5, "false_alarm": "baluev", "dtype": "float64"}
    unsupported = discard_unsupported(client, series)
    outputs = ("inline",) if unsupported else ("inline", "discard")
    seconds, peaks, mismatches = {}, {}, []
    for output in outputs:
        (c_s, results, c_timings), (r_s, (r_powers, r_peaks), _) = time_survey(
            client, stub, series, output, repeats)
        fields, peaks[output] = survey_fields(results, c_timings, output), peaks_of(results)
        seconds[output] = (c_s, r_s)
        same = r_peaks == peaks["inline"]
        mismatches += [] if same else [f"raw-stub {output}"]
        mismatches += [] if peaks[output] == peaks["inline"] else [f"python-client {output}"]
        emit(case="survey", path="python-client", output=output, **shape, **stats(c_s, "ms"),
             **fields, peaks_identical_to_inline=peaks[output] == peaks["inline"])
        emit(case="survey", path="raw-stub", output=output, **shape, **stats(r_s, "ms"),
             power_values_returned=power_values(r_powers), peaks_identical_to_inline=same)
    if unsupported:
        emit(case="survey", path="python-client", output="discard", skipped=unsupported)
    for path in ("numpy-host", "torch-gpu"):
        emit(case="survey", path=path, skipped=f"no local survey: top-k peaks and Baluev "
             f"false-alarm probabilities of {count} automatic grids are not reimplemented here")
    ratios = {f"client_over_raw_{o}": ratio(*seconds[o]) for o in outputs}
    if "discard" in seconds:
        ratios["client_inline_over_discard"] = ratio(seconds["inline"][0], seconds["discard"][0])
        ratios["raw_inline_over_discard"] = ratio(seconds["inline"][1], seconds["discard"][1])
    emit(case="survey", ratio=ratios)
    if mismatches:
        raise Mismatch(f"survey: peaks differ from the client's inline ones: {mismatches}")


# ---------------------------------------------------------------------- echo

def run_echo(args, client, stub, torch, torch_reason):
    rng = np.random.default_rng()
    big_repeats = args.repeats or (3 if args.quick else 7)
    small_calls = args.calls or (200 if args.quick else 2000)
    failures = []
    for label, a, repeats, unit, warmup in (
            ("72MB", rng.standard_normal(9_000_000), big_repeats, "ms", 1),
            ("4KiB", rng.standard_normal(512), small_calls, "us", 20)):
        timings = timed_interleaved({
            "client": lambda: client.echo(a, timeout=CALL_TIMEOUT_S),
            "raw": lambda: echo_raw(stub, a)}, repeats, warmup)
        (c_s, c_out, _), (r_s, r_out, _) = timings["client"], timings["raw"]
        equal = {"python-client": c_out.tobytes() == a.tobytes(),
                 "raw-stub": r_out.tobytes() == a.tobytes()}
        for path, s in (("python-client", c_s), ("raw-stub", r_s)):
            emit(case="echo", size=label, path=path, bytes=a.nbytes, **stats(s, unit),
                 gb_per_s=round(a.nbytes / median(s) / 1e9, 3), round_trip_equal=equal[path])
            if not equal[path]:
                failures.append(f"echo {label} {path}: bytes differ after the round trip")
        emit(case="echo", size=label, ratio={"client_over_raw": ratio(c_s, r_s)})
    if failures:
        raise Mismatch("; ".join(failures))


RUNNERS = {"enkf": run_enkf, "dense_row": run_dense_row, "periodogram": run_periodogram,
           "survey": run_survey, "echo": run_echo}


# ---------------------------------------------------------------------- main

def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="HOST:PORT of a gpucompute server")
    parser.add_argument("--quick", action="store_true",
                        help="smaller sizes and counts (a smoke run)")
    parser.add_argument("--only", default=",".join(CASES),
                        help=f"comma-separated cases of {','.join(CASES)}")
    parser.add_argument("--repeats", type=int, default=0,
                        help="timed calls of the large cases (enkf, survey, 72 MB echo)")
    parser.add_argument("--calls", type=int, default=0,
                        help="timed calls of the small ones (dense_row, periodogram, 4 KiB echo)")
    args = parser.parse_args(argv)
    args.cases = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}; expected some of {list(CASES)}")
    return args


def run_case(name, args, client, stub, torch, torch_reason):
    """Runs one case; returns False (after an error line) if it failed."""
    try:
        RUNNERS[name](args, client, stub, torch, torch_reason)
        return True
    except Mismatch as e:
        emit(case=name, error=f"mismatch: {e}")
        print(f"e2e_bench: {name}: MISMATCH: {e}", file=sys.stderr)
    except Exception as e:  # noqa: BLE001: report, go on with the other cases, exit 1
        emit(case=name, error=repr(e))
        traceback.print_exc()
    return False


def main(argv=None):
    args = parse_args(argv)
    torch, torch_reason = load_torch()
    client = gpucompute.Client(args.target, timeout=CALL_TIMEOUT_S)
    client.wait_for_ready(timeout=60)
    channel, stub = raw_stub(args.target)
    try:
        setup_line(args, client, torch, torch_reason)
        ok = [run_case(name, args, client, stub, torch, torch_reason) for name in args.cases]
    finally:
        channel.close()
        client.close()
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
