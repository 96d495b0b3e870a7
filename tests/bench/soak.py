"""Soak: a CUDA server under mixed load with random client cancellations, memory sampled.

Run on the GPU machine (tests/bench/production_gpu.sh soak):
  PYTHONPATH=<bundle>/python python3 tests/bench/soak.py SERVER LOAD SECONDS OUT_DIR

- Load: two gpucompute-load processes for SECONDS, one unary and one on Submit streams, each
  a mix of periodogram, dense, assimilate and echo (inputs inline and by handle).
- Cancellations: threads that start calls of every op and cancel each after a random 0-20 ms
  (or close a Submit stream with jobs in flight). A cancelled call must end CANCELLED (or OK,
  when it finished first); anything else counts as an error.
- Every 5 s one JSON line in OUT_DIR/soak_samples.jsonl: the server's resident set (VmRSS),
  GPU memory used and the pool's reserved/used bytes (from /metrics), requests pending.
- At the end, SIGTERM while the load still runs: every call the server had accepted must
  finish OK (calls refused after the signal get UNAVAILABLE), and the server must exit 0.
- Verdict in OUT_DIR/soak_summary.json: no error beyond the injected cancellations and the
  UNAVAILABLE of the shutdown; host and device memory flat: the largest sample of the last
  third within 5 % + 64 MiB of the largest of the middle third (the first third is warm-up).
Exit status 1 when the verdict fails.
"""
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import grpc
import numpy as np

import gpucompute
from gpucompute.v1 import compute_pb2


def scrape(port):
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        values[name] = float(value)
    return values


def rss_bytes(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def sum_family(values, family):
    return sum(v for k, v in values.items() if k == family or k.startswith(family + "{"))


class Canceller:
    """Threads that start calls and cancel them at random times."""

    def __init__(self, target, threads=4, seed=7):
        self.target, self.threads, self.seed = target, threads, seed
        self.stop = threading.Event()
        self.counts = {}
        self.lock = threading.Lock()

    def count(self, key):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + 1

    @staticmethod
    def periodogram_request(rng, samples, frequencies):
        t = np.sort(rng.np.uniform(0, 100, samples))
        request = compute_pb2.PeriodogramRequest(series=[compute_pb2.Series(
            t=gpucompute.to_tensor(t), y=gpucompute.to_tensor(np.sin(t)))])
        request.frequency.uniform.f0 = 0.01
        request.frequency.uniform.df = 1e-4
        request.frequency.uniform.n = frequencies
        return request

    def run_one(self, client, rng):
        kind = rng.choice(["periodogram", "dense", "assimilate", "stream"])
        delay = rng.uniform(0, 0.02)
        if kind == "stream":
            stream = client.stream(timeout=30)
            for i in range(8):
                stream.submit(i, self.periodogram_request(rng, 500, 20000))
            time.sleep(delay)
            stream.cancel()
            self.count("stream_cancelled")
            return
        if kind == "periodogram":
            future = client.stub.Periodogram.future(self.periodogram_request(rng, 2000, 200000), timeout=30)
        elif kind == "dense":
            x = rng.standard_normal((64, 1024)).astype(np.float32)
            request = compute_pb2.DenseRequest(model="soak-cancel", input=gpucompute.to_tensor(x))
            future = client.stub.Dense.future(request, timeout=30)
        else:
            n, m, N = 2000, 500, 40
            X = rng.standard_normal((n, N))
            problem = gpucompute.assimilation.problem_proto(X, X[:m], rng.standard_normal(m), np.ones(m),
                                                            method="enkf", seed=1)
            future = client.stub.Assimilate.future(compute_pb2.AssimilateRequest(problems=[problem]),
                                                   timeout=30)
        time.sleep(delay)
        future.cancel()
        try:
            future.result()
            self.count(f"{kind}_finished_first")
        except grpc.FutureCancelledError:
            self.count(f"{kind}_cancelled")
        except grpc.RpcError as e:
            code = e.code().name
            self.count(f"{kind}_{code}" if code == "CANCELLED" else f"ERROR_{kind}_{code}")

    def worker(self, index):
        rng = random.Random(self.seed + index)
        nrng = np.random.default_rng(self.seed + index)
        client = gpucompute.Client(self.target, timeout=30)

        class R:  # random.Random for choices and delays, NumPy (np) for arrays
            choice = staticmethod(rng.choice)
            uniform = staticmethod(rng.uniform)
            standard_normal = staticmethod(nrng.standard_normal)
            np = nrng

        r = R()
        while not self.stop.is_set():
            try:
                self.run_one(client, r)
            except Exception as e:  # noqa: BLE001 - any failure is a finding
                self.count(f"ERROR_exception_{type(e).__name__}")
                time.sleep(0.1)
        client.close()

    def start(self):
        self.workers = [threading.Thread(target=self.worker, args=(i,)) for i in range(self.threads)]
        for w in self.workers:
            w.start()

    def finish(self):
        self.stop.set()
        for w in self.workers:
            w.join(60)


def main():
    server_bin, load_bin, seconds, out = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4]
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp()
    port_file, metrics_file = os.path.join(tmp, "port"), os.path.join(tmp, "metrics")
    server_log = open(os.path.join(out, "soak_server.log"), "w")
    server = subprocess.Popen([server_bin, "--address=127.0.0.1:0", f"--port_file={port_file}",
                               "--backend=cuda", "--metrics_port=0", f"--metrics_port_file={metrics_file}",
                               "--log_level=warn"], stdout=server_log, stderr=subprocess.STDOUT)
    while not (os.path.exists(port_file) and os.path.getsize(port_file)):
        if server.poll() is not None:
            sys.exit("server exited at start")
        time.sleep(0.1)
    target = f"127.0.0.1:{int(open(port_file).read())}"
    metrics_port = int(open(metrics_file).read())
    setup = gpucompute.Client(target, timeout=120)
    rng = np.random.default_rng(3)
    setup.load_model("soak-cancel", [
        {"weight": rng.standard_normal((1024, 1024)) / 32, "bias": np.zeros(1024), "layernorm": True,
         "activation": "gelu_tanh"}], dtype="bfloat16")

    common = ["--target", target, "--op", "mix", "--mix", "periodogram:3,dense:3,assimilate:1,echo:1",
              "--samples", "1000", "--frequencies", "20000", "--rows", "16", "--in", "1024", "--out", "1024",
              "--n", "4000", "--m", "400", "--members", "32", "--bytes", "1Mi",
              "--duration", f"{int(seconds)}s", "--warmup", "0s", "--timeout", "30s", "--json", "/dev/stdout"]
    loads = []
    for name, extra in (("unary", ["--mode", "unary", "--concurrency", "32", "--input", "inline"]),
                        ("stream", ["--mode", "stream", "--concurrency", "64", "--input", "handle",
                                    "--seed", "11"])):
        f = open(os.path.join(out, f"soak_load_{name}.jsonl"), "w")
        loads.append((name, subprocess.Popen([load_bin, *common, *extra], stdout=f,
                                             stderr=open(os.path.join(out, f"soak_load_{name}.err"), "w")), f))
    canceller = Canceller(target)
    canceller.start()

    samples = []
    start = time.time()
    with open(os.path.join(out, "soak_samples.jsonl"), "w") as f:
        while time.time() - start < seconds - 2:
            time.sleep(5)
            values = scrape(metrics_port)
            sample = {"t": round(time.time() - start, 1), "rss_bytes": rss_bytes(server.pid),
                      "gpu_used_bytes": sum_family(values, "gpucompute_gpu_memory_used_bytes"),
                      "pool_reserved_bytes": sum_family(values, "gpucompute_gpu_memory_pool_reserved_bytes"),
                      "pool_used_bytes": sum_family(values, "gpucompute_gpu_memory_pool_used_bytes"),
                      "pending": sum_family(values, "gpucompute_pending_requests"),
                      "resident_tensor_bytes": sum_family(values, "gpucompute_resident_tensor_bytes")}
            samples.append(sample)
            f.write(json.dumps(sample) + "\n")
            f.flush()

    # SIGTERM while the loads still run (their --duration has ~2 s left).
    canceller.finish()
    server.send_signal(signal.SIGTERM)
    signalled = time.time()
    exit_status = server.wait(timeout=120)
    drain_s = time.time() - signalled
    load_reports = {}
    for name, proc, f in loads:
        proc.wait(timeout=120)
        f.close()
        lines = [json.loads(l) for l in open(f.name) if l.strip().startswith("{")]
        load_reports[name] = lines[-1] if lines else {}

    def errors(report):
        return report.get("figures", report).get("errors_by_code", {}) if report else {"missing": 1}

    def ok_count(report):
        return report.get("figures", report).get("ok", 0) if report else 0

    third = max(1, len(samples) // 3)
    middle, last = samples[third:2 * third], samples[2 * third:]

    def flat(key):
        before = max(s[key] for s in middle) if middle else 0
        after = max(s[key] for s in last) if last else 0
        return {"middle_max": before, "last_max": after, "ok": after <= before * 1.05 + (64 << 20)}

    unexpected_load = {name: {c: n for c, n in errors(r).items() if c != "UNAVAILABLE"}
                       for name, r in load_reports.items()}
    cancel_errors = {k: v for k, v in canceller.counts.items() if k.startswith("ERROR")}
    summary = {
        "seconds": seconds, "samples": len(samples), "server_exit": exit_status,
        "drain_seconds": round(drain_s, 2),
        "load_ok": {n: ok_count(r) for n, r in load_reports.items()},
        "load_errors_by_code": {n: errors(r) for n, r in load_reports.items()},
        "cancellations": canceller.counts,
        "rss": flat("rss_bytes"), "gpu_used": flat("gpu_used_bytes"),
        "pool_reserved": flat("pool_reserved_bytes"),
    }
    summary["ok"] = (exit_status == 0 and not any(unexpected_load.values()) and not cancel_errors and
                     all(summary[k]["ok"] for k in ("rss", "gpu_used", "pool_reserved")) and
                     all(v > 0 for v in summary["load_ok"].values()))
    json.dump(summary, open(os.path.join(out, "soak_summary.json"), "w"), indent=1)
    print(json.dumps(summary))
    sys.exit(0 if summary["ok"] else 1)


if __name__ == "__main__":
    main()
