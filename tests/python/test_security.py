"""Security against live servers: TLS, mutual TLS, bearer tokens and their in-flight quotas,
reloading the token file and the certificates, the plaintext health port, and
`gpucompute health`.

Run by CTest as `python_security` with $GPUCOMPUTE_SERVER, $GPUCOMPUTE_CLI and $GPUCOMPUTE_LOAD
set. The CA and certificates are made at test time with the `openssl` CLI in a temporary
directory (nothing secret is committed): a CA, a server certificate for localhost/127.0.0.1, a
client certificate, and a second CA with a client certificate of its own that the server must
refuse.
"""

import json
import os
import pathlib
import signal
import socket
import subprocess
import threading
import time

import grpc
import numpy as np
import pytest

import gpucompute
from conftest import _server_binary, metric, run_server, wait_until
from peer_sockets import closed_by_server, connect_from
from gpucompute.v1 import compute_pb2, compute_pb2_grpc, tensor_pb2

_REPO = pathlib.Path(__file__).resolve().parents[2]
ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
SLOW = "slow-token-0123456789abcdef"
TOKEN_FILE = f"""# name token [max_in_flight]
alice {ALICE}

bob {BOB} 8
slow {SLOW} 1
"""


def _openssl(tmp, *args):
    proc = subprocess.run(["openssl", *args], cwd=tmp, capture_output=True, text=True)
    assert proc.returncode == 0, f"openssl {' '.join(args)}:\n{proc.stderr}"


def _ca(tmp, name):
    _openssl(tmp, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "1",
             "-subj", f"/CN={name}")


def _cert(tmp, ca, name, usage):
    (tmp / f"{name}.ext").write_text(
        "basicConstraints=CA:FALSE\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n"
        f"extendedKeyUsage={usage}\n")
    _openssl(tmp, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
    _openssl(tmp, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey",
             f"{ca}.key", "-CAcreateserial", "-out", f"{name}.crt", "-days", "1",
             "-extfile", f"{name}.ext")


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Paths of a throwaway PKI: ca, server, client (signed by ca); other_ca, intruder."""
    tmp = tmp_path_factory.mktemp("pki")
    _ca(tmp, "ca")
    _ca(tmp, "other_ca")
    _cert(tmp, "ca", "server", "serverAuth")
    _cert(tmp, "ca", "client", "clientAuth")
    _cert(tmp, "other_ca", "intruder", "clientAuth")
    return tmp


def cli_binary():
    path = os.environ.get("GPUCOMPUTE_CLI") or str(_REPO / "build/client/cli/gpucompute")
    if not os.access(path, os.X_OK):
        pytest.fail(f"gpucompute CLI not found at {path!r}; set GPUCOMPUTE_CLI", pytrace=False)
    return path


def run_cli(*args, env=None, timeout=60):
    return subprocess.run([cli_binary(), *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def localhost(target):
    """"127.0.0.1:PORT" -> "localhost:PORT": the name in the server's certificate."""
    return "localhost:" + target.rsplit(":", 1)[1]


def code_of(fn):
    """The gRPC status code fn() raises, or OK."""
    try:
        fn()
    except grpc.RpcError as e:
        return e.code()
    return grpc.StatusCode.OK


# ---------------------------------------------------------------------------------- TLS


@pytest.mark.parametrize("reload", ["--tls_reload_s=0", "--tls_reload_s=60"],
                         ids=["read-once", "file-watcher"])
def test_tls_needs_the_ca(tmp_path, pki, reload):
    with run_server(tmp_path, f"--tls_cert_file={pki / 'server.crt'}",
                    f"--tls_key_file={pki / 'server.key'}", reload) as target:
        with gpucompute.Client(localhost(target), root_certificates=pki / "ca.crt",
                               timeout=30) as c:
            assert c.server_info()["backend"]
            assert np.array_equal(c.echo(np.arange(5.0)), np.arange(5.0))
        # PEM bytes work as well as paths, and an IP target with the certificate's name.
        with gpucompute.Client(target, root_certificates=(pki / "ca.crt").read_bytes(),
                               server_name="localhost", timeout=30) as c:
            assert c.server_info()["backend"]
        # Plaintext, and TLS trusting another CA, do not get through.
        with gpucompute.Client(target, timeout=5) as c:
            assert code_of(c.server_info) == grpc.StatusCode.UNAVAILABLE
        with gpucompute.Client(localhost(target), root_certificates=pki / "other_ca.crt",
                               timeout=5) as c:
            assert code_of(c.server_info) == grpc.StatusCode.UNAVAILABLE
        # The C++ client (through the CLI) with the CA.
        ok = run_cli("--target", localhost(target), "--tls_ca_file", str(pki / "ca.crt"),
                     "info", "--json")
        assert ok.returncode == 0, ok.stderr
        assert '"backend"' in ok.stdout
        bad = run_cli("--target", localhost(target), "--timeout", "5", "info")
        assert bad.returncode != 0


@pytest.mark.parametrize("reload", ["--tls_reload_s=0", "--tls_reload_s=60"],
                         ids=["read-once", "file-watcher"])
def test_mutual_tls_refuses_clients_without_a_certificate_of_its_ca(tmp_path, pki, reload):
    with run_server(tmp_path, f"--tls_cert_file={pki / 'server.crt'}",
                    f"--tls_key_file={pki / 'server.key'}",
                    f"--tls_client_ca_file={pki / 'ca.crt'}", reload) as target:
        addr = localhost(target)
        with gpucompute.Client(addr, root_certificates=pki / "ca.crt",
                               private_key=pki / "client.key",
                               certificate_chain=pki / "client.crt", timeout=30) as c:
            assert c.server_info()["backend"]
            assert np.array_equal(c.echo(np.arange(3.0)), np.arange(3.0))
        with gpucompute.Client(addr, root_certificates=pki / "ca.crt", timeout=5) as c:
            assert code_of(c.server_info) == grpc.StatusCode.UNAVAILABLE
        with gpucompute.Client(addr, root_certificates=pki / "ca.crt",
                               private_key=pki / "intruder.key",
                               certificate_chain=pki / "intruder.crt", timeout=5) as c:
            assert code_of(c.server_info) == grpc.StatusCode.UNAVAILABLE
        # The CLI with and without its certificate.
        tls = ["--target", addr, "--timeout", "10", "--tls_ca_file", str(pki / "ca.crt")]
        ok = run_cli(*tls, "--tls_cert_file", str(pki / "client.crt"), "--tls_key_file",
                     str(pki / "client.key"), "info")
        assert ok.returncode == 0, ok.stderr
        assert run_cli(*tls, "info").returncode != 0


# ---------------------------------------------------------------------------------- tokens


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    """A server with TOKEN_FILE and a health port: (target, health_target)."""
    tmp = tmp_path_factory.mktemp("tokens")
    (tmp / "tokens").write_text(TOKEN_FILE)
    with run_server(tmp, f"--auth_token_file={tmp / 'tokens'}", "--health_port=0",
                    f"--health_port_file={tmp / 'health_port'}") as target:
        health_port = int((tmp / "health_port").read_text())
        assert health_port > 0
        yield target, f"127.0.0.1:{health_port}"


def test_calls_need_a_valid_token(token_server):
    target, _ = token_server
    with gpucompute.Client(target, token="", timeout=10) as c:
        with pytest.raises(grpc.RpcError) as e:
            c.echo(np.arange(3.0))
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "missing bearer token" in e.value.details()
        assert c.server_info()["backend"]  # open without a token
    wrong = "alice-token-0123456789abcdeX"
    with gpucompute.Client(target, token=wrong, timeout=10) as c:
        with pytest.raises(grpc.RpcError) as e:
            c.echo(np.arange(3.0))
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert e.value.details() == "invalid bearer token"
    channel = grpc.insecure_channel(target)
    stub = compute_pb2_grpc.ComputeStub(channel)
    with pytest.raises(grpc.RpcError) as e:
        stub.ListModels(compute_pb2.ListModelsRequest(), timeout=10,
                        metadata=[("authorization", f"Basic {ALICE}")])
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert ALICE not in e.value.details()
    channel.close()
    with gpucompute.Client(target, token=ALICE, timeout=30) as c:
        assert np.array_equal(c.echo(np.arange(3.0)), np.arange(3.0))
        assert c.list_models() == []


def test_every_method_but_server_info_needs_a_token(token_server):
    """Walks the service's descriptor, so that a new method cannot be left open unnoticed."""
    target, _ = token_server
    channel = grpc.insecure_channel(target)
    service = compute_pb2.DESCRIPTOR.services_by_name["Compute"]
    codes = {}
    for method in service.methods:
        path = f"/{service.full_name}/{method.name}"
        if method.client_streaming and method.server_streaming:
            call = lambda: list(channel.stream_stream(path)(iter([b""]), timeout=10))
        elif method.client_streaming:
            call = lambda: channel.stream_unary(path)(iter([b""]), timeout=10)
        elif method.server_streaming:
            call = lambda: list(channel.unary_stream(path)(b"", timeout=10))
        else:
            call = lambda: channel.unary_unary(path)(b"", timeout=10)
        codes[method.name] = code_of(call)
    channel.close()
    assert len(codes) >= 16
    assert codes.pop("ServerInfo") == grpc.StatusCode.OK
    assert all(c == grpc.StatusCode.UNAUTHENTICATED for c in codes.values()), codes


def test_health_is_open_on_both_ports(token_server):
    target, health_target = token_server
    assert gpucompute.health(target) == "SERVING"
    assert gpucompute.health(health_target) == "SERVING"
    assert gpucompute.health(health_target, service="gpucompute.v1.Compute") == "SERVING"
    # The health port serves nothing else.
    with gpucompute.Client(health_target, token=ALICE, timeout=10) as c:
        assert code_of(c.server_info) == grpc.StatusCode.UNIMPLEMENTED
        assert code_of(lambda: c.echo(np.arange(2.0))) == grpc.StatusCode.UNIMPLEMENTED


def test_the_token_name_owns_resident_tensors(token_server):
    target, _ = token_server
    with gpucompute.Client(target, token=ALICE, client_id="someone-else", timeout=30) as alice, \
            gpucompute.Client(target, token=BOB, timeout=30) as bob:
        h = alice.put_tensor(np.arange(4.0))
        try:
            owners = {t["owner"] for t in alice.list_tensors()}
            assert owners == {"alice"}
            assert bob.list_tensors() == []
            assert code_of(lambda: bob.get_tensor(h)) == grpc.StatusCode.NOT_FOUND
        finally:
            alice.delete_tensor(h)


def _hold_put_tensor(stub, token):
    """Opens a PutTensor call with `token` that stays open until the returned event is set;
    returns (event, future)."""
    release = threading.Event()

    def chunks():
        yield compute_pb2.PutTensorChunk(header=compute_pb2.PutTensorHeader(
            dtype=tensor_pb2.FLOAT64, shape=[1]), data=np.zeros(1).tobytes())
        release.wait(60)

    future = stub.PutTensor.future(chunks(), timeout=90,
                                   metadata=[("authorization", f"Bearer {token}")])
    return release, future


def _hold_the_only_slot(stub, token, probe):
    """Holds a PutTensor of `token` (max_in_flight 1) open until it has the token's slot, seen
    by `probe()` (another call of the token) raising RESOURCE_EXHAUSTED; returns (event,
    future) as _hold_put_tensor. The held call and a probe race for the slot (a server may
    admit concurrent calls in any order): when the probe wins, the held call is refused and
    opened again."""
    deadline = time.monotonic() + 20
    release, held = _hold_put_tensor(stub, token)
    while True:
        try:
            probe()
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, e
            assert "has its limit of 1 calls in flight" in e.details(), e.details()
            if not held.done():
                return release, held
        if held.done():  # refused: a probe had the slot
            assert held.exception().code() == grpc.StatusCode.RESOURCE_EXHAUSTED, held.exception()
            release.set()
            release, held = _hold_put_tensor(stub, token)
        assert time.monotonic() < deadline, "the held PutTensor never took the token's slot"
        time.sleep(0.05)


def test_in_flight_quota_per_token(token_server):
    target, _ = token_server
    channel = grpc.insecure_channel(target)
    stub = compute_pb2_grpc.ComputeStub(channel)
    slow = gpucompute.Client(target, token=SLOW, timeout=30)
    bob = gpucompute.Client(target, token=BOB, timeout=30)
    # Once the server has the held call, slow's (max_in_flight 1) next call is refused.
    release, held = _hold_the_only_slot(stub, SLOW, lambda: slow.echo(np.arange(2.0)))
    try:
        # A Submit job of slow is refused on its own; the stream goes on.
        with slow.stream(timeout=30) as s:
            s.submit("j", compute_pb2.EchoRequest(tensor=gpucompute.to_tensor(np.arange(2.0))))
            s.close()
            results = list(s.results())
        assert len(results) == 1 and not results[0].ok
        assert results[0].code == grpc.StatusCode.RESOURCE_EXHAUSTED, results[0]
        assert 'token "slow"' in results[0].message
        # Another token is unaffected.
        assert np.array_equal(bob.echo(np.arange(2.0)), np.arange(2.0))
    finally:
        release.set()
    held.result(timeout=30)
    # The slot is given back before the reply: the very next call gets it.
    assert np.array_equal(slow.echo(np.arange(2.0)), np.arange(2.0))
    for _ in range(3):
        assert np.array_equal(slow.echo(np.arange(2.0)), np.arange(2.0))
    slow.close()
    bob.close()
    channel.close()


def _call_every_method(channel, metadata):
    """{method name: status code} of one call of every Compute method (empty messages; a
    Submit stream sends one Echo job, whose own code stands for the stream's)."""
    service = compute_pb2.DESCRIPTOR.services_by_name["Compute"]
    echo_job = compute_pb2.SubmitRequest(id="q", echo=compute_pb2.EchoRequest(
        tensor=gpucompute.to_tensor(np.arange(2.0)))).SerializeToString()
    codes = {}
    for method in service.methods:
        path = f"/{service.full_name}/{method.name}"
        kw = dict(timeout=10, metadata=metadata)
        if method.client_streaming and method.server_streaming:
            def call():
                (reply,) = list(channel.stream_stream(path)(iter([echo_job]), **kw))
                result = compute_pb2.SubmitResponse.FromString(reply)
                if result.code:
                    raise _JobError(_CODES[result.code], result.message)
        elif method.client_streaming:
            call = lambda: channel.stream_unary(path)(iter([b""]), **kw)
        elif method.server_streaming:
            call = lambda: list(channel.unary_stream(path)(b"", **kw))
        else:
            call = lambda: channel.unary_unary(path)(b"", **kw)
        try:
            call()
            codes[method.name] = (grpc.StatusCode.OK, "")
        except (grpc.RpcError, _JobError) as e:
            codes[method.name] = (e.code(), e.details())
    return codes


_CODES = {c.value[0]: c for c in grpc.StatusCode}


class _JobError(Exception):
    """A Submit job's own failure, shaped like a grpc.RpcError."""
    def __init__(self, code, details):
        super().__init__(details)
        self._code, self._details = code, details

    def code(self):
        return self._code

    def details(self):
        return self._details


def test_every_method_but_server_info_counts_against_the_quota(token_server):
    """With slow's only slot held, every call of slow (management ones included) is refused
    RESOURCE_EXHAUSTED naming the quota; ServerInfo and health stay open; bob is unaffected."""
    target, health_target = token_server
    channel = grpc.insecure_channel(target)
    stub = compute_pb2_grpc.ComputeStub(channel)
    as_slow = [("authorization", f"Bearer {SLOW}")]
    echo = compute_pb2.EchoRequest(tensor=gpucompute.to_tensor(np.arange(2.0)))
    release, held = _hold_the_only_slot(
        stub, SLOW, lambda: stub.Echo(echo, timeout=10, metadata=as_slow))
    try:
        codes = _call_every_method(channel, as_slow)
        assert len(codes) >= 16
        assert codes.pop("ServerInfo") == (grpc.StatusCode.OK, "")
        for name, (code, details) in codes.items():
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, (name, code, details)
            assert details == ('token "slow" has its limit of 1 calls in flight; '
                               "retry when one finishes"), (name, details)
        assert gpucompute.health(target) == "SERVING"
        assert gpucompute.health(health_target) == "SERVING"
        # Another token's management calls go through.
        with gpucompute.Client(target, token=BOB, timeout=30) as bob:
            assert bob.list_models() == [] and bob.list_tensors() == []
    finally:
        release.set()
    held.result(timeout=30)
    # Released: slow's calls run again (and each gives its slot back before replying).
    with gpucompute.Client(target, token=SLOW, timeout=30) as slow:
        for _ in range(3):
            assert slow.list_models() == []
            tensors = slow.list_tensors()  # the held PutTensor's, and maybe an earlier test's
            assert tensors and all(t["owner"] == "slow" for t in tensors)
        for t in tensors:
            slow.delete_tensor(t["handle"])
        assert slow.list_tensors() == []
    codes = _call_every_method(channel, as_slow)
    assert not any(code == grpc.StatusCode.RESOURCE_EXHAUSTED for code, _ in codes.values()), codes
    channel.close()


def test_cli_sends_the_token_from_a_file_or_the_environment(token_server, tmp_path):
    target, _ = token_server
    (tmp_path / "token").write_text(ALICE + "\n")
    env = {k: v for k, v in os.environ.items() if k != "GPUCOMPUTE_TOKEN"}
    assert run_cli("--target", target, "model", "list", env=env).returncode == 1
    ok = run_cli("--target", target, "--token_file", str(tmp_path / "token"), "model", "list",
                 env=env)
    assert ok.returncode == 0, ok.stderr
    ok = run_cli("--target", target, "model", "list", env={**env, "GPUCOMPUTE_TOKEN": BOB})
    assert ok.returncode == 0, ok.stderr
    bad = run_cli("--target", target, "model", "list", env={**env, "GPUCOMPUTE_TOKEN": "x" * 20})
    assert bad.returncode == 1 and "UNAUTHENTICATED" in bad.stderr


def test_load_tester_speaks_tls_and_tokens(tmp_path, pki):
    """gpucompute-load's channels carry TLS and the token on every call (setup included)."""
    load = os.environ.get("GPUCOMPUTE_LOAD") or str(_REPO / "build/client/load/gpucompute-load")
    if not os.access(load, os.X_OK):
        pytest.fail(f"gpucompute-load not found at {load!r}; set GPUCOMPUTE_LOAD", pytrace=False)
    (tmp_path / "tokens").write_text(TOKEN_FILE)
    (tmp_path / "token").write_text(BOB)
    with run_server(tmp_path, f"--tls_cert_file={pki / 'server.crt'}",
                    f"--tls_key_file={pki / 'server.key'}",
                    f"--auth_token_file={tmp_path / 'tokens'}") as target:
        argv = [load, "--target", localhost(target), "--tls-ca-file", str(pki / "ca.crt"),
                "--op", "echo", "--bytes", "1Ki", "--concurrency", "2", "--duration", "0.5s",
                "--warmup", "0.1s", "--progress", "off", "--json", str(tmp_path / "out.jsonl")]
        env = {k: v for k, v in os.environ.items() if k != "GPUCOMPUTE_TOKEN"}
        ok = subprocess.run([*argv, "--token-file", str(tmp_path / "token")],
                            capture_output=True, text=True, timeout=120, env=env)
        assert ok.returncode == 0, ok.stdout + ok.stderr
        level = [json.loads(l) for l in (tmp_path / "out.jsonl").read_text().splitlines()][-1]
        assert level["ok"] > 0 and level["errors"] == 0, level
        # Without the token every call fails UNAUTHENTICATED.
        (tmp_path / "out.jsonl").unlink()
        bad = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
        out = bad.stdout + bad.stderr
        if (tmp_path / "out.jsonl").exists():
            out += (tmp_path / "out.jsonl").read_text()
        assert "UNAUTHENTICATED" in out, out


# ---------------------------------------------------------------------------------- reload

CAROL = "carol-token-0123456789abcdef"


def _wait_for_log(tmp, text, start=0, timeout=20):
    """Waits until server.log in `tmp`, from byte `start`, holds `text`; returns the log."""
    deadline = time.monotonic() + timeout
    while True:
        log = (tmp / "server.log").read_text(errors="replace")
        if text in log[start:]:
            return log
        assert time.monotonic() < deadline, f"{text!r} not logged:\n{log[-3000:]}"
        time.sleep(0.05)


def _replace(path, text):
    """Replaces `path` atomically (a new file renamed over it), as Kubernetes does."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    os.replace(tmp, path)


def _server_pid(tmp):
    """The pid of the gpucompute-server run_server started in `tmp` (by its --port_file; in
    worker mode its workers have the same flags, and a --worker_index of their own)."""
    flag = f"--port_file={tmp / 'port'}".encode()
    pids = []
    for entry in pathlib.Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
            if flag in args and not any(a.startswith(b"--worker_index=") for a in args):
                pids.append(int(entry.name))
        except OSError:
            pass
    assert len(pids) == 1, pids
    return pids[0]


def test_sighup_reloads_the_token_file(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN_FILE)
    with run_server(tmp_path, f"--auth_token_file={tokens}", "--auth_token_reload_s=0",
                    "--metrics_port=0", f"--metrics_port_file={tmp_path / 'mport'}") as target:
        mport = int((tmp_path / "mport").read_text())
        pid = _server_pid(tmp_path)
        channel = grpc.insecure_channel(target)
        stub = compute_pb2_grpc.ComputeStub(channel)
        alice = gpucompute.Client(target, token=ALICE, timeout=30)
        carol = gpucompute.Client(target, token=CAROL, timeout=30)
        slow = gpucompute.Client(target, token=SLOW, timeout=30)
        assert np.array_equal(alice.echo(np.arange(2.0)), np.arange(2.0))
        assert code_of(carol.list_models) == grpc.StatusCode.UNAUTHENTICATED
        alice_stream = alice.stream(timeout=60)
        # slow's only slot is held across the reloads: a kept token keeps its count.
        release, held = _hold_the_only_slot(stub, SLOW, lambda: slow.echo(np.arange(2.0)))
        try:
            # 1. alice removed, carol added, bob's limit changed, slow kept (limit 1).
            start = len((tmp_path / "server.log").read_text())
            tokens.write_text(f"bob {BOB} 4\ncarol {CAROL}\nslow {SLOW} 1\n")
            os.kill(pid, signal.SIGHUP)
            _wait_for_log(tmp_path, "reloaded: 3 tokens (1 added, 1 removed, 2 kept)", start)
            with pytest.raises(grpc.RpcError) as e:
                alice.echo(np.arange(2.0))
            assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert e.value.details() == "invalid bearer token"
            assert carol.list_models() == []
            with gpucompute.Client(target, token=BOB, timeout=30) as bob:
                assert np.array_equal(bob.echo(np.arange(2.0)), np.arange(2.0))
            with pytest.raises(grpc.RpcError) as e:
                slow.echo(np.arange(2.0))
            assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED  # still held
            # alice's stream, opened before, gets no new job run.
            alice_stream.submit("after", compute_pb2.EchoRequest(
                tensor=gpucompute.to_tensor(np.arange(2.0))))
            alice_stream.close()
            (r,) = list(alice_stream.results())
            assert r.code == grpc.StatusCode.UNAUTHENTICATED and "revoked" in r.message, r

            # 2. A bad file changes nothing; the error names the line, never a token.
            start = len((tmp_path / "server.log").read_text())
            tokens.write_text(f"carol {CAROL}\nmallory short\n")
            os.kill(pid, signal.SIGHUP)
            log = _wait_for_log(tmp_path, "token file not reloaded", start)
            assert f"token file {tokens}: line 2: " in log[start:]
            assert CAROL not in log and BOB not in log
            # 3. So does a file that is gone.
            tokens.unlink()
            os.kill(pid, signal.SIGHUP)
            log = _wait_for_log(tmp_path, "cannot be read", start)
            assert carol.list_models() == []
            assert code_of(lambda: alice.echo(np.arange(2.0))) == grpc.StatusCode.UNAUTHENTICATED

            # 4. slow's limit raised to 2: its second call runs beside the held one.
            start = len(log)
            tokens.write_text(f"carol {CAROL}\nslow {SLOW} 2\n")
            os.kill(pid, signal.SIGHUP)
            _wait_for_log(tmp_path, "reloaded: 2 tokens (0 added, 1 removed, 2 kept)", start)
            assert np.array_equal(slow.echo(np.arange(2.0)), np.arange(2.0))
        finally:
            release.set()
        held.result(timeout=30)
        assert metric(mport, 'gpucompute_auth_token_reloads_total{result="ok"}') == 2
        assert metric(mport, 'gpucompute_auth_token_reloads_total{result="error"}') == 2
        for c in (alice, carol, slow):
            c.close()
        channel.close()


def test_a_changed_token_file_is_reloaded_without_a_signal(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text(TOKEN_FILE)
    with run_server(tmp_path, f"--auth_token_file={tokens}", "--auth_token_reload_s=0.2") as target:
        with gpucompute.Client(target, token=ALICE, timeout=30) as alice, \
                gpucompute.Client(target, token=CAROL, timeout=30) as carol:
            assert alice.list_models() == []
            _replace(tokens, f"carol {CAROL}\n")
            deadline = time.monotonic() + 20
            while code_of(carol.list_models) != grpc.StatusCode.OK:
                assert time.monotonic() < deadline, "the new token file was never read"
                time.sleep(0.1)
            assert code_of(alice.list_models) == grpc.StatusCode.UNAUTHENTICATED
            # A broken replacement is logged once and changes nothing.
            _replace(tokens, "carol\n")
            _wait_for_log(tmp_path, "token file not reloaded")
            time.sleep(0.5)
            assert carol.list_models() == []
            log = (tmp_path / "server.log").read_text()
            assert log.count("token file not reloaded") == 1, log[-2000:]


def test_tls_certificates_are_reloaded(tmp_path, pki):
    """The server's certificate and the client CA are replaced on disk; new connections see
    the new ones without a restart; a broken certificate file keeps the last good one."""
    tls = tmp_path / "tls"
    tls.mkdir()
    for name in ("server.crt", "server.key", "ca.crt"):
        (tls / name).write_bytes((pki / name).read_bytes())
    # A second server identity from another CA (made here: the module's PKI is shared).
    _ca(tmp_path, "ca2")
    _cert(tmp_path, "ca2", "server2", "serverAuth")
    with run_server(tmp_path, f"--tls_cert_file={tls / 'server.crt'}",
                    f"--tls_key_file={tls / 'server.key'}",
                    f"--tls_client_ca_file={tls / 'ca.crt'}", "--tls_reload_s=1") as target:
        addr = localhost(target)

        def code_with(root, key, chain):
            with gpucompute.Client(addr, root_certificates=root, private_key=key,
                                   certificate_chain=chain, timeout=5) as c:
                return code_of(c.server_info)

        client = (pki / "client.key", pki / "client.crt")
        intruder = (pki / "intruder.key", pki / "intruder.crt")
        assert code_with(pki / "ca.crt", *client) == grpc.StatusCode.OK
        assert code_with(tmp_path / "ca2.crt", *client) == grpc.StatusCode.UNAVAILABLE
        assert code_with(pki / "ca.crt", *intruder) == grpc.StatusCode.UNAVAILABLE
        # An open channel made before the rotation keeps working through it.
        kept = gpucompute.Client(addr, root_certificates=pki / "ca.crt",
                                 private_key=client[0], certificate_chain=client[1], timeout=10)
        assert kept.server_info()["backend"]

        # New identity (key first, then certificate) and a client CA that trusts other_ca.
        _replace(tls / "server.key", (tmp_path / "server2.key").read_text())
        _replace(tls / "server.crt", (tmp_path / "server2.crt").read_text())
        _replace(tls / "ca.crt", (pki / "other_ca.crt").read_text())
        deadline = time.monotonic() + 30
        while code_with(tmp_path / "ca2.crt", *intruder) != grpc.StatusCode.OK:
            assert time.monotonic() < deadline, "the new certificates were never used"
            time.sleep(0.2)
        assert code_with(pki / "ca.crt", *intruder) == grpc.StatusCode.UNAVAILABLE  # old server CA
        assert code_with(tmp_path / "ca2.crt", *client) == grpc.StatusCode.UNAVAILABLE  # old client CA
        assert kept.server_info()["backend"]
        kept.close()

        new_server = (tmp_path / "ca2.crt", *intruder)
        # A certificate file that is gone leaves the last one in use.
        (tls / "server.crt").unlink()
        time.sleep(3)  # several refresh intervals
        assert code_with(*new_server) == grpc.StatusCode.OK
        # One that is not PEM is logged; gRPC 1.51 presents it, so new handshakes fail
        # (docs/security.md "TLS") until a good one is back, without a restart.
        start = len((tmp_path / "server.log").read_text())
        _replace(tls / "server.crt", "not a certificate\n")
        _wait_for_log(tmp_path, "TLS files changed, but --tls_cert_file", start)
        deadline = time.monotonic() + 30
        while code_with(*new_server) == grpc.StatusCode.OK:
            assert time.monotonic() < deadline, "the broken certificate was never picked up"
            time.sleep(0.2)
        _replace(tls / "server.crt", (tmp_path / "server2.crt").read_text())
        deadline = time.monotonic() + 30
        while code_with(*new_server) != grpc.StatusCode.OK:
            assert time.monotonic() < deadline, "the good certificate was never picked up again"
            time.sleep(0.2)


# ---------------------------------------------------------------------------------- health


def test_gpucompute_health_exit_codes(token_server, tmp_path):
    target, health_target = token_server
    ok = run_cli("health", "--address", health_target)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip() == "SERVING"
    ok = run_cli("--target", target, "health", "--service", "gpucompute.v1.Compute")
    assert ok.returncode == 0 and ok.stdout.strip() == "SERVING", ok.stderr
    unknown = run_cli("health", "--address", health_target, "--service", "no.such.Service")
    assert unknown.returncode != 0
    # Nothing listening.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    down = run_cli("health", "--address", f"127.0.0.1:{free}", "--timeout_ms", "2000")
    assert down.returncode != 0
    assert "UNAVAILABLE" in down.stderr or "DEADLINE_EXCEEDED" in down.stderr


# ---------------------------------------------------------------------------------- descriptors


def test_connections_past_a_peers_limit_are_refused_and_the_listener_lives(tmp_path):
    """Idle connections from one peer, twice the descriptor limit: past its share (half the
    limit by default) the server closes them as they are accepted, so descriptors never run
    out; another peer still connects meanwhile, and once the flood closes the first peer is
    served again, health SERVING throughout (docs/security.md "Security model")."""
    health_file = tmp_path / "health_port"
    with run_server(tmp_path, "--health_port=0", f"--health_port_file={health_file}",
                    "--listener_probe_s=0.5", open_files=200) as target:
        health = f"127.0.0.1:{health_file.read_text().strip()}"
        flood = [connect_from("127.0.0.1", target) for _ in range(400)]
        time.sleep(0.5)
        refused = sum(closed_by_server(s, 0.05) for s in flood)
        assert 250 <= refused < 400, refused  # ~100 held, the rest closed at once
        other = connect_from("127.0.0.2", target)
        assert not closed_by_server(other)
        _wait_for_log(tmp_path, "refusing connections (last from 127.0.0.1)")
        for s in flood + [other]:
            s.close()
        time.sleep(1.5)  # past several probes: the listener is alive
        client = gpucompute.Client(target, timeout=10)
        assert client.server_info()["backend"]
        client.close()
        assert run_cli("health", "--address", health).stdout.strip() == "SERVING"
        assert "no longer accepts connections" not in (tmp_path / "server.log").read_text()


def test_all_peers_together_are_bounded(tmp_path):
    """--max_connections bounds every peer together: a third peer is refused while two hold
    the total, and admitted once one of them leaves; /metrics counts the refusals."""
    with run_server(tmp_path, "--max_connections=2", "--max_connections_per_peer=0",
                    "--metrics_port=0", f"--metrics_port_file={tmp_path / 'mport'}") as target:
        mport = int((tmp_path / "mport").read_text())
        a = connect_from("127.0.0.2", target)
        b = connect_from("127.0.0.3", target)
        time.sleep(0.2)
        assert not closed_by_server(a) and not closed_by_server(b)
        assert closed_by_server(connect_from("127.0.0.4", target))
        a.close()
        time.sleep(0.2)
        c = connect_from("127.0.0.4", target)
        assert not closed_by_server(c)
        for s in (b, c):
            s.close()
        time.sleep(0.2)
        # The scrapes' connections count too (the metrics endpoint's listener is the process's).
        assert metric(mport, 'gpucompute_connections_refused_total{limit="total"}') >= 1
        assert metric(mport, 'gpucompute_connections_refused_total{limit="peer"}') == 0


def test_descriptor_exhaustion_turns_health_not_serving(tmp_path):
    """With the connection limits off, idle connections past the descriptor limit make gRPC
    stop accepting for good (the kernel still queues connections, so the port looks open).
    The probe sees the port unanswered and health turns NOT_SERVING, so that an orchestrator
    restarts the server, instead of SERVING on a port that serves nobody. Idle connections are
    also closed after --max_connection_idle_s."""
    health_file = tmp_path / "health_port"
    with run_server(tmp_path, "--health_port=0", f"--health_port_file={health_file}",
                    "--listener_probe_s=0.5", "--max_connections_per_peer=0",
                    "--max_connections=0", open_files=200) as target:
        host, port = target.rsplit(":", 1)
        assert run_cli("health", "--address", f"127.0.0.1:{health_file.read_text().strip()}"
                       ).stdout.strip() == "SERVING"
        idle = []
        for _ in range(400):  # twice the limit
            idle.append(socket.create_connection((host, int(port)), timeout=5))
        time.sleep(1)
        for s in idle:
            s.close()
        _wait_for_log(tmp_path, "no longer accepts connections", timeout=30)
        health = run_cli("health", "--address", f"127.0.0.1:{health_file.read_text().strip()}")
        assert health.stdout.strip() == "NOT_SERVING", health.stdout + health.stderr


# ---------------------------------------------------------------------------------- start-up


def _start_fails(tmp, *flags):
    proc = subprocess.run([_server_binary(), "--address=127.0.0.1:0", "--backend=cpu",
                           f"--kernel_cache_dir={tmp / 'kc'}", *flags],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    return proc.stdout + proc.stderr


def test_bad_security_flags_fail_start_up(tmp_path, pki):
    bad = tmp_path / "tokens"
    bad.write_text(f"alice {ALICE}\nbob short\n")
    log = _start_fails(tmp_path, f"--auth_token_file={bad}")
    assert f"token file {bad}: line 2: " in log and "16-4096" in log
    assert ALICE not in log
    assert "cannot be read" in _start_fails(tmp_path, f"--auth_token_file={tmp_path / 'none'}")
    assert "must be set together" in _start_fails(tmp_path,
                                                  f"--tls_cert_file={pki / 'server.crt'}")
    assert "needs --tls_cert_file" in _start_fails(tmp_path,
                                                   f"--tls_client_ca_file={pki / 'ca.crt'}")
    assert "not PEM" in _start_fails(tmp_path, f"--tls_cert_file={bad}",
                                     f"--tls_key_file={pki / 'server.key'}")
    # PEM, but not of its kind: a key given as the certificate, a certificate as the key.
    assert "--tls_cert_file" in _start_fails(tmp_path, f"--tls_cert_file={pki / 'server.key'}",
                                             f"--tls_key_file={pki / 'server.key'}")
    assert "holds no private key" in _start_fails(tmp_path,
                                                  f"--tls_cert_file={pki / 'server.crt'}",
                                                  f"--tls_key_file={pki / 'server.crt'}")
    # Well-formed, but the key of another certificate (gRPC would fail every handshake), with
    # and without reloading; a certificate block that does not parse.
    for reload in ("--tls_reload_s=0", "--tls_reload_s=60"):
        log = _start_fails(tmp_path, f"--tls_cert_file={pki / 'server.crt'}",
                           f"--tls_key_file={pki / 'client.key'}", reload)
        assert "is not the key of the certificate in --tls_cert_file" in log, log
    garbled = tmp_path / "garbled.crt"
    garbled.write_text("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n")
    assert "the certificate does not parse" in _start_fails(
        tmp_path, f"--tls_cert_file={garbled}", f"--tls_key_file={pki / 'server.key'}")
