"""Round robin over every address of a target (``Client(target, balance=True)``, the default).

A target of several servers (``ipv4:10.0.0.1:50051,10.0.0.2:50051``, or a name with several
addresses such as a Kubernetes headless Service, ``dns:///gpucompute:50051``) gets one pinned
client per address, resolved when the client is made; each call goes to the next of them with
every message it sends (a plain call's uploads, slices and fetches all reach one server).
What lives on one server follows it:

- resident tensors: a ``TensorHandle`` is remembered with the server that made it; calls that
  name it (``get_tensor``, ``delete_tensor``, operation inputs) go there;
- models and shared-memory regions are loaded and registered on every server, so that any
  server can run the next ``dense`` or read the region.

``client.pin()`` gives a client of one server (the next one), for work that must stay there.
"""

import socket

# Target schemes that name one endpoint however they resolve.
_SINGLE_SCHEMES = ("unix:", "unix-abstract:", "vsock:")


def _split_host_port(hostport):
    """``host:port`` or ``[v6]:port`` -> (host, port); port None when absent."""
    if hostport.startswith("["):
        host, _, rest = hostport[1:].partition("]")
        return host, (rest[1:] if rest.startswith(":") else None)
    if hostport.count(":") == 1:
        host, _, port = hostport.partition(":")
        return host, port
    return hostport, None


def _host_port(target):
    """The ``host:port`` a ``dns:`` or bare target names; None for address lists and socket
    paths."""
    if target.startswith(("ipv4:", "ipv6:") + _SINGLE_SCHEMES):
        return None
    if not target.startswith("dns:"):
        return target
    rest = target[len("dns:"):]
    return rest[2:].partition("/")[2] if rest.startswith("//") else rest  # dns://[auth]/h:p


def _endpoint(family, ip, port):
    return f"ipv6:[{ip}]:{port}" if family == socket.AF_INET6 else f"ipv4:{ip}:{port}"


def addresses(target):
    """Every server address a gRPC target names, each as a target of its own: ``ipv4:`` and
    ``ipv6:`` lists item by item, ``dns:///host:port`` and ``host:port`` through the system's
    resolver (in its order, duplicates removed, IPv4's only when it gives both). A target of
    one endpoint (``unix:``...), one that does not resolve or has no port gives ``[target]``:
    the channel's own resolver then reports what is wrong when the call is made."""
    for scheme in ("ipv4:", "ipv6:"):
        if target.startswith(scheme):
            items = [a.strip() for a in target[len(scheme):].split(",") if a.strip()]
            return [scheme + a for a in items] or [target]
    hostport = _host_port(target)
    if hostport is None:
        return [target]
    host, port = _split_host_port(hostport)
    if not host or not port:
        return [target]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return [target]
    # A name with addresses of both families (localhost: 127.0.0.1 and ::1) is each server
    # reachable two ways: its IPv4 addresses stand for it.
    if any(f == socket.AF_INET for f, *_ in infos):
        infos = [i for i in infos if i[0] == socket.AF_INET]
    found = list(dict.fromkeys(_endpoint(f, sa[0], sa[1]) for f, _, _, _, sa in infos))
    return found or [target]


def host_of(target):
    """The host name a target asks for (for TLS's name check on a pinned address), or None."""
    hostport = _host_port(target)
    return (_split_host_port(hostport)[0] or None) if hostport is not None else None
