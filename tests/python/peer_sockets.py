"""Raw TCP peers of a server on loopback, for the descriptor tests and benchmarks: a connection
from a chosen local address (another peer), and whether the server closed one. No pytest here:
tests/bench/hostile_connections.py imports it too."""

import socket


def connect_from(source, target):
    """A TCP connection to ``target`` ("HOST:PORT") from local address ``source``: any
    127.x.y.z is a local address, so each is another peer on loopback."""
    host, port = target.rsplit(":", 1)
    sock = socket.socket()
    sock.bind((source, 0))
    sock.connect((host, int(port)))
    return sock


def closed_by_server(sock, wait_s=0.5):
    """True when the server closed (or reset) the connection within ``wait_s``."""
    sock.settimeout(wait_s)
    try:
        return sock.recv(64) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True
