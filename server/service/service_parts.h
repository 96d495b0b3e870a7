// What the service's handlers borrow from the server: backend, schedulers, registries and
// limits. Everything must outlive the service.
#pragma once

#include "server/metrics/server_metrics.h"
#include "server/runtime/backend.h"
#include "server/runtime/completion_queue.h"
#include "server/runtime/memory_budget.h"
#include "server/runtime/model_registry.h"
#include "server/runtime/op_schedulers.h"
#include "server/runtime/shared_memory.h"
#include "server/runtime/tensor_store.h"
#include "server/transport/auth.h"
#include "server/service/front_relay.h"
#include "server/service/idle_streams.h"
#include "server/service/limits.h"

namespace gpucompute {

// Which finished calls the server logs (--log_calls), one line each: op, status, duration,
// caller and, when the call carries W3C traceparent metadata, its trace.
enum class CallLog { kNone, kErrors, kAll };

struct ServiceParts {
  Backend* backend = nullptr;
  PeriodogramScheduler* periodogram = nullptr;
  DenseScheduler* dense = nullptr;
  AssimilateScheduler* assimilate = nullptr;
  ModelRegistry* models = nullptr;
  CompletionQueue* loader = nullptr;  // runs model loads (long, blocking) off the gRPC threads
  metrics::ServerMetrics* metrics = nullptr;  // call outcomes; null: not recorded
  TensorStore* tensors = nullptr;     // resident tensors (PutTensor, kept outputs)
  SharedMemoryRegistry* shared_memory = nullptr;  // registered regions (off unless allowed)
  const TokenAuthenticator* auth = nullptr;  // bearer tokens; null: calls need none
  MemoryBudget* memory = nullptr;  // host memory held by accepted work; null: unbounded
  IdleStreams* idle_uploads = nullptr;  // cancels LoadModel streams that stop sending; null: none
  // A worker that serves handed client connections (--worker_connections=handoff): their
  // LoadModel, UnloadModel and (Un)RegisterSharedMemory calls go to every worker through the
  // front (front_relay.h). Null: every call runs here.
  FrontRelay* front = nullptr;
  ServiceLimits limits;
  CallLog call_log = CallLog::kNone;
};

}  // namespace gpucompute
