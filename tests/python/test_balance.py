"""A client of several servers (gpucompute.balance): round robin over every address of the
target, each call whole on one server, resident tensors followed to their server, models and
shared-memory regions on every server; balance=False and pin() for one server. Two real
servers on loopback, counted by their own /metrics."""

import contextlib
import urllib.request

import grpc
import numpy as np
import pytest

import gpucompute
from conftest import STARTUP_TIMEOUT_S, run_server
from gpucompute import balance


@contextlib.contextmanager
def two_servers(tmp_path, *flags):
    """Two servers, each with a metrics port: yields [(target, metrics_port), ...]."""
    with contextlib.ExitStack() as stack:
        servers = []
        for name in ("a", "b"):
            folder = tmp_path / name
            folder.mkdir()
            port_file = folder / "metrics_port"
            target = stack.enter_context(run_server(
                folder, "--metrics_port=0", f"--metrics_port_file={port_file}", *flags))
            servers.append((target, int(port_file.read_text().strip())))
        yield servers


def calls(metrics_port, op):
    """Successful `op` calls a server counted: its series, summed over workers in worker mode
    (where each worker's carries a `worker` label)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("gpucompute_request_success_total{") and f'op="{op}"' in line)


def balanced_client(servers, **kwargs):
    target = "ipv4:" + ",".join(t for t, _ in servers)
    client = gpucompute.Client(target, timeout=60, **kwargs)
    client.wait_for_ready(timeout=STARTUP_TIMEOUT_S)
    return client


def test_addresses_of_a_target():
    assert balance.addresses("ipv4:10.0.0.1:5,10.0.0.2:5") == ["ipv4:10.0.0.1:5",
                                                               "ipv4:10.0.0.2:5"]
    assert balance.addresses("ipv6:[::1]:5,[::2]:6") == ["ipv6:[::1]:5", "ipv6:[::2]:6"]
    # localhost has an address of each family: one server, reached by IPv4.
    assert balance.addresses("localhost:7") == ["ipv4:127.0.0.1:7"]
    assert balance.addresses("dns:///localhost:7") == ["ipv4:127.0.0.1:7"]
    assert balance.addresses("127.0.0.1:7") == ["ipv4:127.0.0.1:7"]
    for one in ("unix:/run/gpucompute.sock", "no-port-here", "name.invalid:7"):
        assert balance.addresses(one) == [one]
    assert balance.host_of("dns:///svc.ns:50051") == "svc.ns"
    assert balance.host_of("ipv4:10.0.0.1:5") is None


def test_calls_go_round_robin_over_both_servers_and_pinned_to_one(tmp_path, rng):
    t = np.sort(rng.uniform(0, 50, 300))
    y = np.sin(2 * np.pi * 0.7 * t) + 0.1 * rng.standard_normal(t.size)
    f = np.linspace(0.05, 2, 400)
    with two_servers(tmp_path) as servers:
        with gpucompute.Client(servers[0][0]) as one:
            expected = one.lombscargle(t, y, frequency=f)[1]
        with balanced_client(servers) as client:
            assert client.servers == ["ipv4:" + t_ for t_, _ in servers]
            for _ in range(6):
                np.testing.assert_allclose(client.lombscargle(t, y, frequency=f)[1], expected,
                                           rtol=1e-12, atol=1e-15)
            assert client.last_timings["total_us"] > 0  # the member's, read through this one
            assert [calls(m, "periodogram") for _, m in servers] == [1 + 3, 3]
            pinned = client.pin()
            assert pinned.servers[0] in client.servers and pinned.pin() is pinned
            for _ in range(4):
                pinned.lombscargle(t, y, frequency=f)
            assert [calls(m, "periodogram") for _, m in servers] == [8, 3]
        # balance=False: gRPC's pick_first, every call to the first address.
        before = [calls(m, "periodogram") for _, m in servers]
        with balanced_client(servers, balance=False) as client:
            assert client.servers == [client.target]
            for _ in range(4):
                client.lombscargle(t, y, frequency=f)
        after = [calls(m, "periodogram") for _, m in servers]
        assert [a - b for a, b in zip(after, before)] == [4, 0]


def test_a_call_moving_large_tensors_stays_on_one_server(tmp_path, rng):
    """Plain calls upload large inputs (CreateTensor, PutTensor slices over several
    connections) and fetch large outputs before and after the call: all of it on one server,
    or the call would not find its tensors."""
    with two_servers(tmp_path) as servers:
        with balanced_client(servers, transfer_threshold=4096) as client:
            for n in (10_000, 30_000, 70_000, 5_000):
                x = rng.standard_normal(n)
                np.testing.assert_array_equal(client.echo(x), x)
            assert [calls(m, "echo") for _, m in servers] == [2, 2]


def test_resident_tensors_are_followed_to_their_server(tmp_path, rng):
    with two_servers(tmp_path) as servers:
        with balanced_client(servers) as client:
            xs = [rng.standard_normal(64 + i) for i in range(4)]
            handles = [client.put_tensor(x) for x in xs]  # two on each server
            kept = [client.echo(h, output="keep") for h in handles]  # each on its own server
            for x, h, k in zip(xs, handles, kept):
                np.testing.assert_array_equal(client.get_tensor(h), x)
                np.testing.assert_array_equal(client.get_tensor(k), x)
            assert len(client.list_tensors()) == 8
            for target, _ in servers:
                with gpucompute.Client(target) as one:
                    assert len(one.list_tensors()) == 4
            for h in handles + kept:
                client.delete_tensor(h)
            assert client.list_tensors() == []
            # A tensor this client did not make, or tensors of two servers in one call.
            with pytest.raises(ValueError, match="not made through this client"):
                client.echo(handles[0])
            a, b = client.put_tensor(xs[0]), client.put_tensor(xs[1])
            with pytest.raises(ValueError, match="different servers"):
                client.assimilate_batch([dict(X=a, HX=b, y=np.zeros(2), obs_error=np.ones(2))])


def test_models_and_shared_memory_are_set_up_on_every_server(tmp_path, rng):
    w = rng.standard_normal((8, 4)).astype(np.float32)
    x = rng.standard_normal((3, 8)).astype(np.float32)
    with two_servers(tmp_path, "--allow_shared_memory") as servers:
        with balanced_client(servers) as client:
            client.load_model("m", [{"weight": w}], dtype="float32")
            for target, _ in servers:
                with gpucompute.Client(target) as one:
                    assert [m["name"] for m in one.list_models()] == ["m"]
            for _ in range(4):
                np.testing.assert_allclose(client.dense("m", x), x @ w, rtol=1e-5, atol=1e-5)
            assert [calls(m, "dense") for _, m in servers] == [2, 2]
            region = client.create_shared_memory(1 << 16)
            try:
                for i in range(4):
                    y = rng.standard_normal(100 + i)
                    np.testing.assert_array_equal(client.echo(region.put(y, offset=0)), y)
                assert [calls(m, "echo") for _, m in servers] == [2, 2]
                client.unregister_shared_memory(region)
            finally:
                region.close()
            client.unload_model("m")
            for target, _ in servers:
                with gpucompute.Client(target) as one:
                    assert one.list_models() == []


def test_a_model_one_server_refuses_stays_on_none_it_reached(tmp_path, rng):
    """Loading on every server is all or nothing: the second server already holds the name
    (ALREADY_EXISTS), so the first unloads the copy it had just loaded."""
    layers = [{"weight": rng.standard_normal((8, 4)).astype(np.float32)}]
    with two_servers(tmp_path) as servers:
        with gpucompute.Client(servers[1][0]) as second:
            second.load_model("m", layers, dtype="float32")
        with balanced_client(servers) as client:
            with pytest.raises(grpc.RpcError) as refused:
                client.load_model("m", layers, dtype="float32")
            assert refused.value.code() == grpc.StatusCode.ALREADY_EXISTS
        with gpucompute.Client(servers[0][0]) as first:
            assert first.list_models() == []
        with gpucompute.Client(servers[1][0]) as second:
            assert [m["name"] for m in second.list_models()] == ["m"]
