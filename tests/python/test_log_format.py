"""--log_format=json: every line the server writes is one JSON object (time, level, thread,
msg; "worker" from worker mode's workers), messages escaped; --log_calls with W3C trace
context; through real servers."""

import json
import os
import subprocess

import grpc
import numpy as np
import pytest

import gpucompute
from gpucompute.v1 import compute_pb2
from conftest import STARTUP_TIMEOUT_S, _server_binary, backend, run_server


def json_lines(text):
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines, "no log lines"
    records = []
    for line in lines:
        record = json.loads(line)  # fails the test on any line that is not JSON
        assert set(record) >= {"time", "level", "thread", "msg"}, record
        assert record["time"].endswith("Z") and "T" in record["time"], record
        records.append(record)
    return records


def test_a_server_and_its_workers_log_json_lines(tmp_path):
    for mode, flags in (("one", ()), ("workers", ("--workers=2", "--cpu_threads=1"))):
        folder = tmp_path / mode
        folder.mkdir()
        with run_server(folder, "--log_format=json", *flags) as target:
            with gpucompute.Client(target, timeout=60.0) as client:
                client.wait_for_ready(timeout=STARTUP_TIMEOUT_S)
                client.server_info()
        records = json_lines((folder / "server.log").read_text())
        assert any(r["level"] == "info" and "listening" in r["msg"] for r in records)
        # (The suite's worker-mode run gives every server two workers.)
        two = mode == "workers" or "--workers" in os.environ.get("GPUCOMPUTE_SERVER_ARGS", "")
        workers = {r["worker"] for r in records if "worker" in r}
        assert workers == ({0, 1} if two else set()), workers


def test_a_message_with_quotes_and_a_bad_flag_value(tmp_path):
    manifest = tmp_path / 'it"s\tmissing.json'
    proc = subprocess.run([_server_binary(), "--address=127.0.0.1:0", f"--backend={backend()}",
                           "--log_format=json", f"--model_manifest=m={manifest}"],
                          capture_output=True, text=True, timeout=STARTUP_TIMEOUT_S)
    assert proc.returncode == 2
    critical = [r for r in json_lines(proc.stdout + proc.stderr) if r["level"] == "critical"]
    assert len(critical) == 1 and str(manifest) in critical[0]["msg"], critical
    bad = subprocess.run([_server_binary(), "--log_format=xml"], capture_output=True, text=True,
                         timeout=STARTUP_TIMEOUT_S)
    assert bad.returncode == 2 and "--log_format=xml: expected text or json" in bad.stdout + bad.stderr


TRACE_ID, SPAN_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{SPAN_ID}-01"


def echo(client, good, traceparent=None):
    """An Echo that succeeds (good) or fails INVALID_ARGUMENT (3 values for shape [2])."""
    tensor = gpucompute.to_tensor(np.arange(3.0))
    if not good:
        tensor.shape[:] = [2]
    metadata = [("traceparent", traceparent)] if traceparent else None
    try:
        client.stub.Echo(compute_pb2.EchoRequest(tensor=tensor), metadata=metadata, timeout=30)
    except grpc.RpcError as e:
        assert not good and e.code() == grpc.StatusCode.INVALID_ARGUMENT, e
    else:
        assert good


def test_calls_are_logged_with_their_w3c_trace(tmp_path):
    """--log_calls=errors logs each failed call, with trace_id and span_id fields when it
    carries a valid traceparent; --log_calls=all logs successes too (here as text)."""
    folder = tmp_path / "errors"
    folder.mkdir()
    with run_server(folder, "--log_format=json", "--log_calls=errors") as target:
        with gpucompute.Client(target, timeout=60.0) as client:
            client.wait_for_ready(timeout=STARTUP_TIMEOUT_S)
            echo(client, True, TRACEPARENT)               # not logged: it succeeded
            echo(client, False, TRACEPARENT)
            echo(client, False, "00-" + "0" * 32 + f"-{SPAN_ID}-01")  # all-zero trace: invalid
            echo(client, False, TRACEPARENT.upper())      # upper-case hex: invalid
            echo(client, False)
    calls = [r for r in json_lines((folder / "server.log").read_text())
             if r["msg"].startswith("call ")]
    assert len(calls) == 4, calls
    assert all(r["level"] == "warning" and r["msg"].startswith("call echo INVALID_ARGUMENT")
               for r in calls), calls
    first = calls[0]
    assert (first["trace_id"], first["span_id"], first["trace_flags"]) == (TRACE_ID, SPAN_ID, "01")
    assert f"trace_id {TRACE_ID} span_id {SPAN_ID}" in first["msg"]
    assert all("trace_id" not in r for r in calls[1:]), calls

    folder = tmp_path / "all"
    folder.mkdir()
    with run_server(folder, "--log_calls=all") as target:
        with gpucompute.Client(target, timeout=60.0) as client:
            client.wait_for_ready(timeout=STARTUP_TIMEOUT_S)
            echo(client, True, TRACEPARENT)
    text = (folder / "server.log").read_text()
    assert "call echo OK" in text and f"trace_id {TRACE_ID} span_id {SPAN_ID}" in text, text
    bad = subprocess.run([_server_binary(), "--log_calls=some"], capture_output=True, text=True,
                         timeout=STARTUP_TIMEOUT_S)
    assert bad.returncode == 2 and "--log_calls=some: expected none, errors or all" in (
        bad.stdout + bad.stderr)
