"""Worker mode with --worker_connections=handoff (docs/server.md "Worker mode"): the front accepts
each client connection and hands it to a worker, round robin, which serves it whole, so that no
call passes through the front. Checked here: connections alternate between the workers (a
tensor's handle names the worker that made it), each connection's calls are right and stay on
its worker, startup models are on every worker, a model loaded or a region registered on one
connection serves on every worker (the worker relays the call to the front, which runs it on
all) and unloading or unregistering on another removes it everywhere, the front's answer
reaching the client as the front gave it, the front still reports health and every worker's
metrics, a dead worker's connections fail while new ones go to the other, and the flags that
cannot go with it (TLS, tokens) stop the server with a message."""

import os
import signal
import subprocess
import time
import urllib.request

import grpc
import numpy as np
import pytest

import gpucompute
from conftest import STARTUP_TIMEOUT_S, _server_binary, metric, run_server, wait_until
from dense_util import random_layer, reference
from series_util import assert_power_close, astropy_power
from test_models_at_startup import write_manifest

WORKERS = 2
LOCAL = [("grpc.use_local_subchannel_pool", 1)]  # a connection of its own per client


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    """(target, metrics port, the startup model's layers, the front's pid) of a handoff-mode
    server."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        pytest.skip("needs a server started by the tests")
    tmp = tmp_path_factory.mktemp("handoff")
    rng = np.random.default_rng(17)
    layers = [random_layer(rng, 6, 4, activation="relu")]
    metrics_file = tmp / "metrics_port"
    with run_server(tmp, f"--workers={WORKERS}", "--cpu_threads=1", "--worker_connections=handoff",
                    "--metrics_port=0", f"--metrics_port_file={metrics_file}", "--allow_shared_memory",
                    f"--model_manifest=mlp={write_manifest(tmp / 'mlp', layers)}") as target:
        with gpucompute.Client(target, timeout=60.0, options=LOCAL) as c:
            c.wait_for_ready(timeout=STARTUP_TIMEOUT_S)
        metrics_port = int(metrics_file.read_text())
        wait_until(lambda: all(metric(metrics_port, f'gpucompute_worker_up{{worker="{w}",gpu=""}}', 0) == 1
                               for w in range(WORKERS)), what="every worker serving")
        yield target, metrics_port, layers, _pid_with_argument(f"--port_file={tmp / 'port'}")


def _pid_with_argument(argument, parent=None):
    """The process (a child of `parent`, if given) whose command line has `argument`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().decode(errors="replace").split("\0")
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if argument in args and (parent is None or ppid == parent):
            return int(entry)
    pytest.fail(f"no process with {argument}", pytrace=False)


def worker_of(client):
    """The worker serving `client`'s connection: its tensors' handles name it ("w1-...")."""
    handle = client.put_tensor(np.zeros(4))
    client.delete_tensor(handle)
    return handle.handle.split("-")[0]


def test_connections_alternate_and_each_stays_on_its_worker(front, rng):
    target = front[0]
    clients = [gpucompute.Client(target, timeout=60.0, options=LOCAL) for _ in range(6)]
    try:
        served = [worker_of(c) for c in clients]
        assert sorted(set(served)) == ["w0", "w1"], served
        assert served.count("w0") == served.count("w1"), served  # round robin
        f = np.linspace(0.05, 1.0, 300)
        for c, worker in zip(clients, served):
            t = np.sort(rng.uniform(0, 50, 200))
            y = np.sin(2 * np.pi * 0.3 * t) + 0.2 * rng.standard_normal(200)
            assert_power_close(c.lombscargle(t, y, frequency=f)[1], astropy_power(t, y, None, f),
                               rtol_of_max=1e-9)
            assert worker_of(c) == worker  # the same connection, the same worker
    finally:
        for c in clients:
            c.close()


def test_startup_models_serve_on_every_worker(front, rng):
    target, _, layers, _ = front
    served = set()
    for _ in range(4):
        with gpucompute.Client(target, timeout=60.0, options=LOCAL) as c:
            served.add(worker_of(c))
            x = rng.standard_normal((3, 6)).astype(np.float32)
            np.testing.assert_allclose(c.dense("mlp", x), reference(layers, x), rtol=1e-4, atol=1e-5)
    assert served == {"w0", "w1"}


def clients_on_both_workers(target):
    """{"w0": client, "w1": client}: connections are opened until each worker serves one."""
    clients = {}
    while len(clients) < WORKERS:
        c = gpucompute.Client(target, timeout=60.0, options=LOCAL)
        worker = worker_of(c)
        if worker in clients:
            c.close()
        else:
            clients[worker] = c
    return clients


def test_a_model_loaded_on_one_connection_serves_on_every_worker(front, rng):
    clients = clients_on_both_workers(front[0])
    try:
        layers = [random_layer(rng, 8, 5, activation="gelu_tanh", layernorm=True)]
        info = clients["w0"].load_model("relayed", layers, dtype="float32")
        assert info["name"] == "relayed"
        x = rng.standard_normal((4, 8)).astype(np.float32)
        for c in clients.values():
            np.testing.assert_allclose(c.dense("relayed", x), reference(layers, x), rtol=1e-4, atol=1e-5)
            assert "relayed" in [m["name"] for m in c.list_models()]
        # The front's answer reaches the client: a second load of the name, and an unknown one.
        with pytest.raises(grpc.RpcError) as e:
            clients["w1"].load_model("relayed", layers, dtype="float32")
        assert e.value.code() == grpc.StatusCode.ALREADY_EXISTS, e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            clients["w1"].unload_model("never-loaded")
        assert e.value.code() == grpc.StatusCode.NOT_FOUND, e.value.details()
        clients["w1"].unload_model("relayed")
        for c in clients.values():
            with pytest.raises(grpc.RpcError) as e:
                c.dense("relayed", x)
            assert e.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        for c in clients.values():
            c.close()
    # The workers ran the relayed calls themselves; the front answered them.
    metrics_port = front[1]
    assert metric(metrics_port, 'gpucompute_front_calls_total{method="load_model",code="OK"}', 0) >= 1


def test_a_region_registered_on_one_connection_serves_on_every_worker(front, rng):
    clients = clients_on_both_workers(front[0])
    region = clients["w0"].create_shared_memory(1 << 16)
    try:
        a = rng.normal(0, 1, 500)
        x = region.put(a)
        for c in clients.values():
            np.testing.assert_array_equal(c.echo(x), a)
        clients["w1"].unregister_shared_memory(region.name)
        for c in clients.values():
            with pytest.raises(grpc.RpcError) as e:
                c.echo(x)
            assert e.value.code() in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT), e.value.details()
    finally:
        region.close()
        for c in clients.values():
            c.close()


def test_the_front_reports_health_and_the_workers_metrics(front):
    target, metrics_port, _, _ = front
    assert gpucompute.health(target) == "SERVING"  # a worker answers, on a handed connection
    handed = sum(metric(metrics_port, f'gpucompute_worker_connections_handed_total{{worker="{w}"}}')
                 for w in range(WORKERS))
    assert handed >= 6
    for w in range(WORKERS):
        assert metric(metrics_port, f'process_open_fds{{worker="{w}"}}') >= 3
        assert metric(metrics_port, f'gpucompute_request_success_total{{worker="{w}",op="periodogram"}}', 0) > 0
    # No compute or tensor call went through the front (only relayed model and region calls).
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        front_calls = [line for line in r.read().decode().splitlines()
                       if line.startswith("gpucompute_front_calls_total{")]
    relayed = ('method="load_model"', 'method="unload_model"', 'method="register_shared_memory"',
               'method="unregister_shared_memory"')
    assert all(any(m in line for m in relayed) for line in front_calls), front_calls


def test_a_dead_workers_connections_fail_and_new_ones_go_to_the_other(front):
    target, metrics_port, _, front_pid = front
    clients = [gpucompute.Client(target, timeout=30.0, options=LOCAL) for _ in range(2)]
    try:
        served = {worker_of(c): c for c in clients}
        assert set(served) == {"w0", "w1"}
        os.kill(_pid_with_argument("--worker_index=1", parent=front_pid), signal.SIGKILL)
        with pytest.raises(grpc.RpcError) as e:
            for _ in range(100):  # its connection's end reaches the client within a call or two
                served["w1"].put_tensor(np.zeros(2))
                time.sleep(0.05)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE
        wait_until(lambda: metric(metrics_port, 'gpucompute_worker_restarts_total{worker="1"}', 0) >= 1,
                   what="the front seeing worker 1 exit")
        for _ in range(3):  # while worker 1 is down every new connection goes to worker 0
            with gpucompute.Client(target, timeout=30.0, options=LOCAL) as c:
                if metric(metrics_port, 'gpucompute_worker_up{worker="1",gpu=""}', 0) == 1:
                    break
                assert worker_of(c) == "w0"
        assert worker_of(served["w0"]) == "w0"  # the other worker's connection never noticed
    finally:
        for c in clients:
            c.close()
    wait_until(lambda: metric(metrics_port, 'gpucompute_worker_up{worker="1",gpu=""}', 0) == 1,
               timeout_s=STARTUP_TIMEOUT_S, what="worker 1 started again")


@pytest.mark.parametrize("flag", ["--tls_cert_file=/nonexistent.pem", "--auth_token_file=/nonexistent"])
def test_handoff_refuses_tls_and_tokens(tmp_path, flag):
    proc = subprocess.run([_server_binary(), "--workers=2", "--backend=cpu", "--address=127.0.0.1:0",
                           "--worker_connections=handoff", flag],
                          capture_output=True, text=True, timeout=60)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 2, log
    assert "--worker_connections=handoff serves plaintext connections without tokens" in log


def test_an_unknown_connection_mode_is_refused(tmp_path):
    proc = subprocess.run([_server_binary(), "--workers=2", "--backend=cpu", "--address=127.0.0.1:0",
                           "--worker_connections=splice"], capture_output=True, text=True, timeout=60)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 2, log
    assert "--worker_connections=splice: expected proxy or handoff" in log
