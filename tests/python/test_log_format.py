"""--log_format=json: every line the server writes is one JSON object (time, level, thread,
msg; "worker" from worker mode's workers), messages escaped, through real servers."""

import json
import os
import subprocess

import pytest

import gpucompute
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
