"""Helpers shared by the Python tests: expecting a gRPC error, and a fake Compute server."""

import concurrent.futures
import contextlib
import re

import grpc
import pytest

import gpucompute
from gpucompute.v1 import compute_pb2_grpc

BIG = 1 << 30


def expect_rpc_error(code, fn, pattern=None):
    """Runs fn, expecting an RpcError with ``code`` and details matching ``pattern``."""
    with pytest.raises(grpc.RpcError) as e:
        fn()
    err = e.value
    assert err.code() == code, f"got {err.code()}: {err.details()!r}"
    if pattern is not None:
        assert re.search(pattern, err.details() or ""), (
            f"details {err.details()!r} do not match {pattern!r}")
    return err


@contextlib.contextmanager
def fake_server(servicer, workers=4):
    """Serves ``servicer`` (a ComputeServicer) on a loopback port; yields a Client to it."""
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=workers), options=[
        ("grpc.max_receive_message_length", BIG), ("grpc.max_send_message_length", BIG)])
    compute_pb2_grpc.add_ComputeServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with gpucompute.Client(f"127.0.0.1:{port}", timeout=30) as c:
            yield c
    finally:
        server.stop(grace=None)
