"""Fixtures: a gpucompute server for the whole session, a client, and seeded random numbers.

Environment:
  GPUCOMPUTE_SERVER      path of gpucompute-server (set by CTest).
  GPUCOMPUTE_BACKEND     --backend for it: cpu (default), cuda or auto.
  GPUCOMPUTE_SERVER_ARGS extra flags, split on whitespace.
  GPUCOMPUTE_TARGET      host:port of a server already running: use it instead of starting one
                         (the shutdown check is then skipped).
  GPUCOMPUTE_TEST_SEED   seed for the random inputs (printed by each test that uses them).
"""

import contextlib
import os
import pathlib
import resource
import signal
import subprocess
import time

import numpy as np
import pytest

import gpucompute

STARTUP_TIMEOUT_S = 60
SHUTDOWN_TIMEOUT_S = 30
_REPO = pathlib.Path(__file__).resolve().parents[2]


def backend():
    """The backend the tests ask the server for."""
    return os.environ.get("GPUCOMPUTE_BACKEND", "cpu")


def _server_binary():
    path = os.environ.get("GPUCOMPUTE_SERVER") or str(_REPO / "build/server/gpucompute-server")
    if not os.access(path, os.X_OK):
        pytest.fail(f"gpucompute-server not found at {path!r}; set GPUCOMPUTE_SERVER",
                    pytrace=False)
    return path


def _log_tail(path, limit=4000):
    try:
        return pathlib.Path(path).read_text(errors="replace")[-limit:]
    except OSError:
        return ""


@contextlib.contextmanager
def run_server(tmp, *flags, open_files=None):
    """Runs gpucompute-server on a free port in ``tmp``; yields "127.0.0.1:PORT".

    ``open_files``: the process's limit on open descriptors (soft and hard), else inherited.
    On exit sends SIGTERM and checks that the server exits with code 0 within 30 s.
    """
    port_file, log_file = tmp / "port", tmp / "server.log"
    argv = [
        _server_binary(),
        "--address=127.0.0.1:0",
        f"--port_file={port_file}",
        f"--backend={backend()}",
        f"--kernel_cache_dir={tmp / 'kc'}",
        *os.environ.get("GPUCOMPUTE_SERVER_ARGS", "").split(),
        *flags,
    ]
    with open(log_file, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
    if open_files is not None:
        # Set on the running process: a preexec_fn would fork through gRPC's fork handlers,
        # which can deadlock with this process's gRPC threads.
        resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (open_files, open_files))
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        port = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"server exited with {proc.returncode} at start-up: {argv}\n"
                            + _log_tail(log_file), pytrace=False)
            if port_file.exists():
                port = port_file.read_text().strip()
                if port:
                    break
            time.sleep(0.05)
        if not port:
            pytest.fail(f"no port in {port_file} after {STARTUP_TIMEOUT_S} s\n"
                        + _log_tail(log_file), pytrace=False)
        yield f"127.0.0.1:{int(port)}"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=SHUTDOWN_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail(f"server ignored SIGTERM for {SHUTDOWN_TIMEOUT_S} s\n"
                            + _log_tail(log_file), pytrace=False)
    assert proc.returncode == 0, (
        f"server exited with {proc.returncode} after SIGTERM: {argv}\n" + _log_tail(log_file))


@contextlib.contextmanager
def client_of_server(tmp, *flags, timeout=60.0):
    """A connected ``gpucompute.Client`` (call deadline ``timeout`` s) of a server that
    run_server(tmp, *flags) starts for it: for tests that need non-default server flags."""
    with run_server(tmp, *flags) as target:
        with gpucompute.Client(target, timeout=timeout) as c:
            c.wait_for_ready(timeout=STARTUP_TIMEOUT_S)
            yield c


@pytest.fixture(scope="session")
def server_target(tmp_path_factory):
    """The session's server (default limits): "127.0.0.1:PORT", or $GPUCOMPUTE_TARGET."""
    if os.environ.get("GPUCOMPUTE_TARGET"):
        yield os.environ["GPUCOMPUTE_TARGET"]
        return
    with run_server(tmp_path_factory.mktemp("server")) as target:
        yield target


@pytest.fixture(scope="session")
def client(server_target):
    """A ``gpucompute.Client`` connected to the session's server."""
    c = gpucompute.Client(server_target, timeout=120.0)
    c.wait_for_ready(timeout=STARTUP_TIMEOUT_S)
    yield c
    c.close()


@pytest.fixture
def rng():
    """A fresh NumPy Generator per test; its seed is printed (shown by pytest on failure)."""
    seed = os.environ.get("GPUCOMPUTE_TEST_SEED")
    seed = int(seed) if seed else int(np.random.SeedSequence().entropy % (1 << 63))
    print(f"GPUCOMPUTE_TEST_SEED={seed}")
    return np.random.default_rng(seed)


def wait_until(condition, what, timeout_s=60.0, poll_s=0.02):
    """Polls ``condition()`` until it returns a true value, and returns that value; fails the
    test, naming ``what``, after ``timeout_s``. Tests wait on state the server shows (metrics,
    its log, a reply) with this instead of sleeping and assuming: on a loaded 2-core machine a
    sleep of any length can end before the server got there."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_s} s waiting for {what}", pytrace=False)
        time.sleep(poll_s)


def metric(metrics_port, series, default=None):
    """The value of one series (name and labels as /metrics prints them, e.g.
    'gpucompute_pending_requests{op="periodogram"}') on a server's metrics endpoint, or
    ``default`` when absent (None: fail)."""
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line[len(series) + 1:])
    if default is None:
        raise AssertionError(f"{series} not in /metrics")
    return default
