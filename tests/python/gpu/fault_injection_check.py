"""Fault injection on the GPU machine: a GPU running out of memory and a sticky device fault.

Run there (tests/bench/production_gpu.sh does) with the device's python3, which has PyTorch:
  PYTHONPATH=<bundle>/python python3 tests/python/gpu/fault_injection_check.py SERVER_BIN OUT.jsonl

1. Out of memory: another tenant (PyTorch in this process) takes all but ~256 MiB of GPU 0; a
   periodogram request that needs more must get RESOURCE_EXHAUSTED, small requests keep working,
   and once the memory is back the same request succeeds. Run on a server with one GPU visible.
2. Sticky fault: the server is started with --inject_sticky_fault_device=D (the last GPU), which
   runs a trapping kernel after that device's 5th batch. The batch caught by it fails with
   UNAVAILABLE; health turns NOT_SERVING; ServerInfo and the gpucompute_gpu_healthy metric show
   the device unhealthy. CUDA loses its state for the whole process on a sticky error (measured
   here: with two GPUs the other one failed too), so every GPU is marked and every later
   request fails fast with UNAVAILABLE until the orchestrator restarts the server. SIGTERM
   still stops the server.
Each check prints one JSON line; the exit status is 1 if any check failed.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import grpc
import numpy as np

import gpucompute

failures = 0
out_lines = []


def record(name, ok, **details):
    global failures
    failures += 0 if ok else 1
    line = json.dumps({"check": name, "ok": bool(ok), **details})
    print(line, flush=True)
    out_lines.append(line)


def start_server(binary, *flags, env=None):
    tmp = tempfile.mkdtemp()
    port_file, metrics_file = os.path.join(tmp, "port"), os.path.join(tmp, "metrics_port")
    log = open(os.path.join(tmp, "server.log"), "w")
    proc = subprocess.Popen([binary, "--address=127.0.0.1:0", f"--port_file={port_file}",
                             "--backend=cuda", "--metrics_port=0",
                             f"--metrics_port_file={metrics_file}", *flags],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    for _ in range(600):
        if os.path.exists(port_file) and os.path.getsize(port_file) > 0:
            break
        if proc.poll() is not None:
            raise RuntimeError(f"server exited: {open(log.name).read()[-2000:]}")
        time.sleep(0.1)
    port = int(open(port_file).read())
    metrics_port = int(open(metrics_file).read())
    return proc, f"127.0.0.1:{port}", metrics_port, log.name


def stop_server(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        return "killed after 60 s"


def health(target, service=""):
    """grpc.health.v1.Health/Check by hand (no health stubs needed): 1 SERVING, 2 NOT_SERVING."""
    channel = grpc.insecure_channel(target)
    name = service.encode()
    request = (b"\n" + bytes([len(name)]) + name) if name else b""
    check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                request_serializer=lambda b: b, response_deserializer=lambda b: b)
    reply = check(request, timeout=10)
    channel.close()
    return reply[1] if len(reply) >= 2 and reply[0] == 0x08 else 0


def metric(metrics_port, family, labels):
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    for line in text.splitlines():
        if line.startswith(family + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def small_request(client, rng):
    t = np.sort(rng.uniform(0, 100, 200))
    y = np.sin(2 * np.pi * 0.37 * t) + 0.1 * rng.standard_normal(200)
    return client.lombscargle(t, y, frequency=gpucompute.grids.UniformGrid(0.01, 0.001, 2000), timeout=30)


def code_of(fn):
    try:
        fn()
        return "OK", ""
    except grpc.RpcError as e:
        return e.code().name, e.details()


def check_out_of_memory(binary):
    import torch  # the device machine's python3 has it

    env = dict(os.environ, CUDA_VISIBLE_DEVICES=os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0])
    proc, target, _, log = start_server(binary, env=env)
    client = gpucompute.Client(target, timeout=60)
    rng = np.random.default_rng(1)
    small_request(client, rng)  # warm
    # The big request: 16 series x 4M frequencies in float64 = 512 MiB of power on the device.
    t = np.sort(rng.uniform(0, 100, 256))
    y = rng.standard_normal(256)
    grid = gpucompute.grids.UniformGrid(0.01, 1e-5, 1 << 22)
    big = lambda: client.periodogram([(t, y)] * 16, frequency=grid, timeout=120)
    device = torch.device("cuda:0")
    free, _ = torch.cuda.mem_get_info(device)
    hog = torch.empty(free - (256 << 20), dtype=torch.uint8, device=device)  # leaves ~256 MiB
    code, details = code_of(big)
    record("oom_big_request_resource_exhausted",
           code == "RESOURCE_EXHAUSTED" and "memory" in details.lower(), code=code,
           details=details[:300])
    code_small, _ = code_of(lambda: small_request(client, rng))
    record("oom_small_request_still_served", code_small == "OK", code=code_small)
    del hog
    torch.cuda.empty_cache()
    code, details = code_of(big)
    record("oom_same_request_after_memory_returns", code == "OK", code=code, details=details[:300])
    client.close()
    record("oom_server_stops_on_sigterm", stop_server(proc) == 0)


def check_sticky_fault(binary):
    gpus = int(subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True).stdout.count("GPU "))
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        gpus = len(visible.split(","))
    faulty = gpus - 1
    proc, target, metrics_port, log = start_server(
        binary, f"--inject_sticky_fault_device={faulty}", "--inject_sticky_fault_after_batches=5")
    client = gpucompute.Client(target, timeout=60)
    rng = np.random.default_rng(2)
    codes = []
    first_failure = None
    for i in range(40):
        code, details = code_of(lambda: small_request(client, rng))
        codes.append(code)
        if code != "OK" and first_failure is None:
            first_failure = (i, code, details)
    after = codes[first_failure[0] + 1:] if first_failure else []
    record("sticky_fault_batch_fails_unavailable",
           first_failure is not None and first_failure[1] == "UNAVAILABLE",
           gpus=gpus, faulty_device=faulty, first_failure=first_failure and list(first_failure),
           codes=codes)
    # A sticky error ends CUDA for the whole process (every GPU of it): later calls fail fast.
    start = time.perf_counter()
    code, details = code_of(lambda: small_request(client, rng))
    record("sticky_fault_later_calls_fail_fast_unavailable",
           code == "UNAVAILABLE" and time.perf_counter() - start < 1.0 and
           all(c == "UNAVAILABLE" for c in after), gpus=gpus, code=code, details=details[:300])
    overall, service = health(target), health(target, "gpucompute.v1.Compute")
    record("sticky_fault_health_not_serving", overall == 2 and service == 2, overall=overall, service=service)
    info = client.server_info()
    devices = {d["index"]: d for d in info["devices"]}
    record("sticky_fault_server_info_marks_devices",
           devices[faulty]["healthy"] is False and "device fault" in devices[faulty]["healthMessage"] and
           all(not d["healthy"] and "whole process" in d["healthMessage"]
               for i, d in devices.items() if i != faulty),
           devices=[{k: d[k] for k in ("index", "healthy", "healthMessage")} for d in devices.values()])
    gauge = metric(metrics_port, "gpucompute_gpu_healthy", f'gpu="{faulty}"')
    record("sticky_fault_metric", gauge == 0.0, gpu_healthy=gauge)
    client.close()
    status = stop_server(proc)
    record("sticky_fault_server_stops_on_sigterm", status == 0, exit=status,
           log_tail=open(log).read()[-1500:] if status != 0 else "")


def check_sticky_fault_workers(binary):
    """Worker mode (--workers=-1, one process per GPU): a sticky fault on the last GPU ends only
    its worker. Its batch fails UNAVAILABLE; every call after that is served by the other GPU
    (health stays SERVING); the front starts the worker again and the GPU serves again."""
    import threading

    gpus = len(os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(","))
    faulty = gpus - 1
    proc, target, metrics_port, log = start_server(
        binary, "--workers=-1", f"--inject_sticky_fault_device={faulty}",
        "--inject_sticky_fault_after_batches=5")
    client = gpucompute.Client(target, timeout=60)
    info = client.server_info()
    record("workers_start", len(info["workers"]) == gpus and
           all(w["state"] == "serving" for w in info["workers"]),
           workers=[{k: w[k] for k in ("index", "state", "device", "pid")} for w in info["workers"]])
    codes, healths, lock = [], [], threading.Lock()
    stop = time.monotonic() + 20

    def caller(seed):
        rng = np.random.default_rng(seed)
        while time.monotonic() < stop:
            code, details = code_of(lambda: small_request(client, rng))
            with lock:
                codes.append((time.monotonic(), code, details[:200]))

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    restarted_at = None
    saw_faulted = False
    while time.monotonic() < stop:
        healths.append(health(target))
        try:
            ws = client.server_info()["workers"]
        except grpc.RpcError as e:
            # With one GPU the front has no serving worker while it restarts the only one.
            if e.code() != grpc.StatusCode.UNAVAILABLE or gpus != 1:
                raise
            saw_faulted = True
            time.sleep(0.05)
            continue
        state = ws[faulty]["state"]
        saw_faulted |= state != "serving"
        if saw_faulted and state == "serving" and ws[faulty]["restarts"] >= 1 and restarted_at is None:
            restarted_at = time.monotonic()
        time.sleep(0.05)
    for th in threads:
        th.join()
    failures = [c for c in codes if c[1] != "OK"]
    record("workers_sticky_fault_fails_only_its_calls_unavailable",
           len(failures) >= 1 and all(c[1] == "UNAVAILABLE" for c in failures) and
           # With one GPU every call fails fast while its only worker restarts.
           (len(failures) <= 16 or gpus == 1), calls=len(codes), failures=len(failures),
           first_failures=[c[1:] for c in failures[:3]])
    last_failure = max((c[0] for c in failures), default=0)
    ok_after = sum(1 for c in codes if c[0] > last_failure and c[1] == "OK")
    record("workers_other_gpu_keeps_serving", ok_after > 100 and gpus >= 2 or gpus == 1,
           calls_ok_after_last_failure=ok_after, gpus=gpus)
    record("workers_health_stays_serving", gpus == 1 or all(h == 1 for h in healths),
           samples=len(healths), not_serving=sum(1 for h in healths if h != 1))
    info = client.server_info()
    w = info["workers"][faulty]
    record("workers_faulty_worker_restarted_and_serving",
           restarted_at is not None and w["state"] == "serving" and w["restarts"] >= 1,
           worker={k: w[k] for k in ("index", "state", "restarts", "device", "pid")},
           devices=[{k: d[k] for k in ("index", "healthy")} for d in info["devices"]])
    rng = np.random.default_rng(9)
    code, details = code_of(lambda: [small_request(client, rng) for _ in range(20)])
    record("workers_all_gpus_serve_after_restart", code == "OK", code=code, details=details[:300])
    up = metric(metrics_port, "gpucompute_worker_restarts_total", f'worker="{faulty}"')
    record("workers_restart_metric", up is not None and up >= 1, restarts=up)
    client.close()
    status = stop_server(proc)
    record("workers_server_stops_on_sigterm", status == 0, exit=status,
           log_tail=open(log).read()[-1500:] if status != 0 else "")


def main():
    binary, out_path = sys.argv[1], sys.argv[2]
    which = sys.argv[3] if len(sys.argv) > 3 else "all"
    if which in ("all", "oom"):
        check_out_of_memory(binary)
    if which in ("all", "sticky"):
        check_sticky_fault(binary)
    if which in ("all", "workers"):
        check_sticky_fault_workers(binary)
    with open(out_path, "a") as f:
        f.write("\n".join(out_lines) + "\n")
    print(f"fault injection: {failures} failed check(s)")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
