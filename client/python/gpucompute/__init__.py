"""Python client of gpucompute, a gRPC service for batched numerical work on a GPU.

    import gpucompute
    client = gpucompute.Client("localhost:50051")
    frequency, power = client.lombscargle(t, y, dy)            # Astropy LombScargle semantics
    results = client.lombscargle_batch([(t1, y1), (t2, y2, dy2)], return_peaks=True)
    client.server_info()["backend"], client.last_timings["compute_us"]

    with client.stream() as s:                                  # jobs of any op, one stream
        s.submit("a", request); s.close()
        for r in s.results(): r.id, r.ok, r.response            # as each finishes
    client.echo(array)                                          # transport diagnostic

    client.load_model("mlp", [{"weight": w0, "bias": b0, "layernorm": True,
                               "activation": "gelu_tanh"}, {"weight": w1}], dtype="bfloat16")
    y = client.dense("mlp", x)                                  # (rows, out_features)
    client.list_models(), client.unload_model("mlp")

    Xa = client.assimilate(X, HX, y, obs_error=r, method="etkf", inflation=1.02)   # (n, N)
    Xa = client.assimilate(X, HX, y, obs_error=R, method="enkf", seed=7, rtps=0.5)
    results = client.assimilate_batch([dict(X=X1, HX=HX1, y=y1, obs_error=r1), ...])

    h = client.put_tensor(x)                                    # resident on the server
    k = client.dense("mlp", h, output="keep")                   # a TensorHandle: chain it
    y = client.get_tensor(client.dense("mlp", k, output="keep")); client.delete_tensor(h)
    region = client.create_shared_memory(1 << 28)               # same node, --allow_shared_memory
    y = client.dense("mlp", region.put(x), output=(region, 1 << 27))   # a view of the region

Frequencies are in cycles per unit of t. Server errors raise ``grpc.RpcError``.
The generated messages and stubs are ``gpucompute.v1.compute_pb2`` / ``compute_pb2_grpc``.
"""

__version__ = "0.1.0"  # the project's (CMakeLists.txt); test python_packaging checks

from gpucompute.assimilation import AssimilationResult
from gpucompute.client import NORMALIZATIONS, Client, PeriodogramResult, health, message_to_dict
from gpucompute.grids import AutoGrid, UniformGrid
from gpucompute.lombscargle import LombScargle
from gpucompute.models import ACTIVATIONS, MODEL_DTYPES
from gpucompute.shared_memory import SharedMemoryRegion
from gpucompute.stream import JobResult, JobStream
from gpucompute.tensor import SharedMemoryTensor, TensorHandle, from_tensor, to_tensor

__all__ = [
    "__version__",
    "LombScargle",
    "ACTIVATIONS",
    "AssimilationResult",
    "AutoGrid",
    "Client",
    "JobResult",
    "JobStream",
    "MODEL_DTYPES",
    "NORMALIZATIONS",
    "PeriodogramResult",
    "SharedMemoryRegion",
    "SharedMemoryTensor",
    "TensorHandle",
    "UniformGrid",
    "from_tensor",
    "health",
    "message_to_dict",
    "to_tensor",
]
