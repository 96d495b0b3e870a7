"""Peak server memory under hostile requests (a CPU server started here; JSON lines out).

Two cases, each three calls at once: a ~600-byte Periodogram whose 8 series all name the same
two 64 MiB resident tensors (every name would decode the tensor again), and a 900 MiB Echo sent
gzip-compressed (about 1 MB on the wire). Prints each call's status and the server's peak RSS
above its RSS once the two tensors are resident (/proc/PID/status: VmHWM, reset then, - VmRSS).

    PYTHONPATH=build/python /usr/bin/python3 tests/bench/hostile_memory.py \\
        build/server/gpucompute-server
"""
import concurrent.futures
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

import grpc
import numpy as np

import gpucompute
from gpucompute.v1 import compute_pb2, tensor_pb2

CALLS = 3


@contextlib.contextmanager
def cpu_server(binary):
    """A CPU server on a free port: yields (process, "127.0.0.1:PORT")."""
    work = tempfile.mkdtemp()
    port_file = os.path.join(work, "port")
    proc = subprocess.Popen([binary, "--backend=cpu", "--address=127.0.0.1:0",
                             f"--port_file={port_file}", f"--kernel_cache_dir={work}/kc"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            time.sleep(0.05)
        yield proc, "127.0.0.1:" + open(port_file).read().strip()
    finally:
        proc.terminate()
        proc.wait()


def status_mb(pid, field):
    """VmRSS or VmHWM of process `pid`, in MiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) // 1024
    raise KeyError(field)


def reset_peak(pid):
    """Starts VmHWM again from the current RSS (Linux: clear_refs 5)."""
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")


def outcome(call, body, **kwargs):
    try:
        call(body, timeout=120, **kwargs)
        return "OK"
    except grpc.RpcError as e:
        return f"{e.code().name}: {e.details()[:120]}"


def at_once(call, body, **kwargs):
    with concurrent.futures.ThreadPoolExecutor(CALLS) as pool:
        return list(pool.map(lambda _: outcome(call, body, **kwargs), range(CALLS)))


def named_many_times(client):
    """The Periodogram request naming two resident 64 MiB tensors 8 times each."""
    n = 8 << 20
    rng = np.random.default_rng(1)
    t, y = client.put_tensor(np.sort(rng.uniform(0, 1000, n))), client.put_tensor(rng.standard_normal(n))
    request = compute_pb2.PeriodogramRequest(frequency=compute_pb2.FrequencyGrid(
        uniform=compute_pb2.UniformGrid(f0=0.1, df=0.1, n=4)))
    for _ in range(8):
        request.series.add(t=tensor_pb2.Tensor(handle=t.handle), y=tensor_pb2.Tensor(handle=y.handle))
    return request.SerializeToString()


def main(binary):
    with cpu_server(binary) as (proc, target):
        client = gpucompute.Client(target, timeout=120)
        channel = grpc.insecure_channel(target)
        periodogram_body = named_many_times(client)
        idle = status_mb(proc.pid, "VmRSS")
        reset_peak(proc.pid)  # the uploads' own peak is not the attack's
        raw = lambda method: channel.unary_unary(f"/gpucompute.v1.Compute/{method}")
        statuses = at_once(raw("Periodogram"), periodogram_body)
        print(json.dumps({"case": "two resident tensors named 8 times each", "calls": CALLS,
                          "request_bytes": len(periodogram_body), "statuses": statuses,
                          "idle_rss_mb": idle,
                          "peak_above_idle_mb": status_mb(proc.pid, "VmHWM") - idle}))
        echo = compute_pb2.EchoRequest(tensor=tensor_pb2.Tensor(
            dtype=tensor_pb2.FLOAT64, shape=[900 << 17], data=bytes(900 << 20)))
        statuses = at_once(raw("Echo"), echo.SerializeToString(), compression=grpc.Compression.Gzip)
        print(json.dumps({"case": "900 MiB Echo gzip-compressed", "calls": CALLS,
                          "statuses": statuses,
                          "peak_above_idle_mb": status_mb(proc.pid, "VmHWM") - idle}))
        client.close()


if __name__ == "__main__":
    main(sys.argv[1])
