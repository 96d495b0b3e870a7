// What the front process (worker mode, docs/server.md "Worker mode") reads from a call to decide
// which worker runs it: the Compute method, and from its first request message the resident
// tensors it names, whether it keeps an output, its dense model and its Submit job id.
#pragma once

#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>

#include "absl/strings/string_view.h"

namespace gpucompute::front {

enum class Method {
  kPeriodogram,
  kLoadModel,
  kUnloadModel,
  kListModels,
  kDense,
  kAssimilate,
  kServerInfo,
  kSubmit,
  kEcho,
  kCreateTensor,
  kPutTensor,
  kGetTensor,
  kDeleteTensor,
  kListTensors,
  kSharedMemoryProof,
  kRegisterSharedMemory,
  kUnregisterSharedMemory,
  kOther,  // not gpucompute.v1.Compute (reflection, ...): forwarded as it is, unauthenticated
};

// The method of a gRPC path ("/gpucompute.v1.Compute/Dense"); kOther for other services and
// for names Compute does not have.
Method MethodOf(absl::string_view path);
// "dense", "load_model", ...: the label of the front's call metrics.
const char* MethodLabel(Method method);

// How the front spreads a method over the workers.
enum class Fanout {
  kOne,    // one worker, chosen by RequestFacts; responses stream back as they come
  kAll,    // every serving worker gets the call (models, shared memory): one reply for all
  kMerge,  // every serving worker answers; the replies are merged (lists, ServerInfo)
};
Fanout FanoutOf(Method method);

// What one request message says about placement.
struct RequestFacts {
  std::vector<std::string> handles;  // resident tensors it names (the first 64 of them)
  std::vector<int> handle_workers;   // the workers their prefixes name (distinct; at most 2)
  bool keeps_output = false;         // an OutputPlacement with keep: the result stays resident
  std::string model;                 // Dense (also inside a Submit job)
  std::string job_id;                // Submit: the job's id
  bool creates_tensor = false;       // CreateTensor, or PutTensor without a handle
};

// Reads `message` (the serialized request of `method`) without copying its tensor bytes.
// A message that does not parse gives what was read so far: the worker that gets it answers
// with the precise error.
RequestFacts InspectRequest(Method method, const grpc::ByteBuffer& message);

// Handles made by worker `worker` start with this ("w3-"), so that calls naming one can go
// back to the worker that holds it.
std::string HandlePrefix(int worker);
// The worker a handle belongs to; -1 for a handle without a worker prefix.
int WorkerOfHandle(absl::string_view handle);

}  // namespace gpucompute::front
