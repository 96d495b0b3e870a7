"""The Submit stream: many jobs of any operation on one call, results as each one finishes.

    with client.stream() as s:
        s.submit("a", compute_pb2.PeriodogramRequest(...))
        s.submit("b", compute_pb2.EchoRequest(...))
        s.close()                      # no more jobs; results keep coming
        for r in s.results():          # in completion order, not submission order
            r.id, r.ok, r.code, r.message, r.response, r.timing

The server runs at most ``ServerInfo.stream_limits.max_jobs_in_flight`` jobs of a stream at
once and reads the next only when one finishes, so ``submit`` blocks (HTTP/2 flow control)
once the server has that many and the network buffers are full. A job that fails gets its
own result with a non-OK code; the stream stays open. ``cancel()`` ends the stream and the
server cancels the jobs it has not started.
"""

import dataclasses
import queue
import threading

import grpc

from gpucompute.v1 import compute_pb2

_JOB_FIELDS = {
    compute_pb2.PeriodogramRequest: "periodogram",
    compute_pb2.DenseRequest: "dense",
    compute_pb2.AssimilateRequest: "assimilate",
    compute_pb2.EchoRequest: "echo",
}
_END = object()


@dataclasses.dataclass
class JobResult:
    """One job's outcome.

    Attributes:
      id: the id it was submitted with.
      code: a ``grpc.StatusCode`` (``OK`` when ``response`` is set).
      message: the server's error message ("" when OK).
      response: the operation's response message (``PeriodogramResponse``, ...), or None.
      timing: dict of server-side ``queue_us``, ``compute_us``, ``total_us``,
        ``batch_requests``.
    """
    id: str
    code: grpc.StatusCode
    message: str
    response: object
    timing: dict

    @property
    def ok(self):
        return self.code == grpc.StatusCode.OK


_CODES = {c.value[0]: c for c in grpc.StatusCode}


class JobStream:
    """One Submit call (made by ``Client.stream``); ``submit`` and ``results`` may be used from
    different threads."""

    def __init__(self, stub, timeout=None, metadata=None):
        self._requests = queue.Queue()
        self._call = stub.Submit(self._request_iter(), timeout=timeout, metadata=metadata)
        self._closed = False
        self._lock = threading.Lock()

    def _request_iter(self):
        while True:
            item = self._requests.get()
            if item is _END:
                return
            yield item

    def submit(self, job_id, request, *, timeout=None):
        """Queues one job: ``request`` is a PeriodogramRequest, DenseRequest,
        AssimilateRequest or EchoRequest; ``timeout`` (s) is its own deadline from receipt."""
        field = _JOB_FIELDS.get(type(request))
        if field is None:
            raise TypeError(f"cannot submit a {type(request).__name__}; expected one of "
                            + ", ".join(t.__name__ for t in _JOB_FIELDS))
        message = compute_pb2.SubmitRequest(id=str(job_id))
        getattr(message, field).CopyFrom(request)
        if timeout is not None:
            message.timeout_us = max(1, int(timeout * 1e6))
        with self._lock:
            if self._closed:
                raise RuntimeError("submit after close()")
            self._requests.put(message)

    def close(self):
        """No more jobs: the server finishes the stream after the last result."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._requests.put(_END)

    def cancel(self):
        """Cancels the call: results not yet received are lost, queued jobs are not run."""
        self.close()
        self._call.cancel()

    def results(self):
        """Yields a ``JobResult`` per job as it arrives; ends when the server finishes the
        stream (after ``close``). Raises ``grpc.RpcError`` if the stream itself fails."""
        for r in self._call:
            kind = r.WhichOneof("result")
            yield JobResult(
                id=r.id, code=_CODES.get(r.code, grpc.StatusCode.UNKNOWN), message=r.message,
                response=getattr(r, kind) if kind else None,
                timing=dict(queue_us=r.timing.queue_us, compute_us=r.timing.compute_us,
                            total_us=r.timing.total_us, batch_requests=r.timing.batch_requests))

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is not None:
            self.cancel()
        else:
            self.close()
