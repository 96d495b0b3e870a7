"""Descriptors under hostile peers (a CPU server started here with 1,024 descriptors; JSON lines).

Two cases, each followed by a new call and a health check: 1,100 idle TCP connections from one
address, then all closed (with another address connecting meanwhile); and shared-memory
registrations from 100 self-declared client ids until the server refuses them. Reports how many
the server took and refused, and whether it serves new connections afterwards.

    PYTHONPATH=build/python /usr/bin/python3 tests/bench/hostile_connections.py \\
        build/server/gpucompute-server build/client/cli/gpucompute
"""
import contextlib
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

import grpc

import gpucompute

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from peer_sockets import closed_by_server, connect_from  # noqa: E402

DESCRIPTORS = 1024


@contextlib.contextmanager
def cpu_server(binary, *flags):
    """A CPU server limited to DESCRIPTORS open files: yields (work dir, port, health port)."""
    work = tempfile.mkdtemp()
    proc = subprocess.Popen([binary, "--backend=cpu", "--address=127.0.0.1:0",
                             f"--port_file={work}/port", f"--kernel_cache_dir={work}/kc",
                             "--health_port=0", f"--health_port_file={work}/hport",
                             "--listener_probe_s=0.5", *flags],
                            stdout=open(f"{work}/log", "w"), stderr=subprocess.STDOUT)
    resource.prlimit(proc.pid, resource.RLIMIT_NOFILE, (DESCRIPTORS, DESCRIPTORS))
    try:
        for name in ("port", "hport"):
            while not (os.path.exists(f"{work}/{name}") and open(f"{work}/{name}").read().strip()):
                time.sleep(0.05)
        time.sleep(0.3)
        yield work, int(open(f"{work}/port").read()), int(open(f"{work}/hport").read())
    finally:
        proc.terminate()
        proc.wait()


def after(cli, work, port, hport):
    """Whether a new call and the health check succeed, and whether the listener was lost."""
    client = gpucompute.Client(f"127.0.0.1:{port}", timeout=10)
    try:
        served = bool(client.server_info()["backend"])
    except grpc.RpcError as e:
        served = f"{e.code().name}: {e.details()}"
    client.close()
    health = subprocess.run([cli, "health", "--address", f"127.0.0.1:{hport}"],
                            capture_output=True, text=True).stdout.strip()
    log = open(f"{work}/log").read()
    return {"new_call_served": served, "health": health,
            "listener_lost": "no longer accepts connections" in log}


def idle_connections(binary, cli):
    with cpu_server(binary) as (work, port, hport):
        flood = [socket.create_connection(("127.0.0.1", port)) for _ in range(1100)]
        time.sleep(1)
        refused = sum(closed_by_server(s, 0.01) for s in flood)
        other = connect_from("127.0.0.2", f"127.0.0.1:{port}")
        other_admitted = not closed_by_server(other, 0.5)
        for s in flood + [other]:
            s.close()
        time.sleep(2)
        return {"case": "1,100 idle TCP connections from one address, then closed",
                "descriptors": DESCRIPTORS, "held": len(flood) - refused, "refused": refused,
                "another_address_admitted_meanwhile": other_admitted, **after(cli, work, port, hport)}


def shared_memory_registrations(binary, cli):
    with cpu_server(binary, "--allow_shared_memory") as (work, port, hport):
        regions, registered, refusal = [], 0, ""
        for i in range(1100):
            client = gpucompute.Client(f"127.0.0.1:{port}", client_id=f"caller-{i % 100}",
                                       timeout=10)
            region = gpucompute.SharedMemoryRegion(4096)
            regions.append(region)
            try:
                client.register_shared_memory(region, f"r{i}")
                registered += 1
            except grpc.RpcError as e:
                refusal = f"{e.code().name}: {e.details()}"
                client.close()
                break
            client.close()
        result = {"case": "shared-memory registrations from 100 client ids until refused",
                  "descriptors": DESCRIPTORS, "registered": registered, "refusal": refusal,
                  **after(cli, work, port, hport)}
        for region in regions:
            region.close()
        return result


def main(binary, cli):
    for case in (idle_connections, shared_memory_registrations):
        print(json.dumps(case(binary, cli)), flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:3])
