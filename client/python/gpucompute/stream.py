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

When the server shuts down (SIGTERM, a rolling update) it answers the jobs it has started and
ends the stream with UNAVAILABLE; so does a broken connection. ``results()`` then yields, for
each job submitted here that got no result, a ``JobResult`` with code UNAVAILABLE (the server
did not run it, or its result was lost with the connection: submit it again, to another
server) and ends without raising: every job gets exactly one result. Any other failure of the
stream itself (CANCELLED, DEADLINE_EXCEEDED, UNAUTHENTICATED...) raises ``grpc.RpcError``
after the same per-job results. ``code()`` and ``details()`` give the stream's own status once
it has ended.
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
        self._closed = False
        self._ended = False      # results() has seen the end of the call
        self._unanswered = {}    # job id -> jobs submitted under it without a result yet
        self._lock = threading.Lock()
        self._call = stub.Submit(self._request_iter(), timeout=timeout, metadata=metadata)

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
            if self._ended or self._call.done():
                raise RuntimeError(f"submit after the stream ended ({self._end_description()}); "
                                   "open a new one")
            if self._closed:
                raise RuntimeError("submit after close()")
            self._unanswered[message.id] = self._unanswered.get(message.id, 0) + 1
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
        stream (after ``close``, or on shutdown: see the module's doc). When the stream fails,
        each job without a result gets one with the stream's code; then UNAVAILABLE ends the
        iteration and any other code raises ``grpc.RpcError``."""
        error = None
        try:
            for r in self._call:
                with self._lock:
                    left = self._unanswered.get(r.id, 0)
                    if left > 1:
                        self._unanswered[r.id] = left - 1
                    elif left == 1:
                        del self._unanswered[r.id]
                kind = r.WhichOneof("result")
                yield JobResult(
                    id=r.id, code=_CODES.get(r.code, grpc.StatusCode.UNKNOWN),
                    message=r.message, response=getattr(r, kind) if kind else None,
                    timing=dict(queue_us=r.timing.queue_us, compute_us=r.timing.compute_us,
                                total_us=r.timing.total_us,
                                batch_requests=r.timing.batch_requests))
        except grpc.RpcError as e:
            error = e
        with self._lock:
            self._ended = True
            unanswered, self._unanswered = self._unanswered, {}
            if not self._closed:
                self._requests.put(_END)  # lets gRPC's request thread finish
        if error is not None:
            message = (f"no result: the stream ended with {error.code().name}: "
                       f"{error.details()}")
            for job_id, count in unanswered.items():
                for _ in range(count):
                    yield JobResult(id=job_id, code=error.code(), message=message,
                                    response=None,
                                    timing=dict(queue_us=0, compute_us=0, total_us=0,
                                                batch_requests=0))
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise error

    def code(self):
        """The stream's own status code (blocks until the stream has ended)."""
        return self._call.code()

    def details(self):
        """The stream's own status message (blocks until the stream has ended)."""
        return self._call.details()

    def _end_description(self):
        try:
            return f"{self._call.code().name}: {self._call.details()}"
        except Exception:  # noqa: BLE001 - only for a message
            return "ended"

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is not None:
            self.cancel()
        else:
            self.close()
