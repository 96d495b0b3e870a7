// One reply from the replies of several workers (the front's kAll and kMerge methods):
// model lists by name with their GPUs, tensor lists, ServerInfo with every worker's device and
// state, and the rule for which status the caller gets.
#pragma once

#include <string>
#include <vector>

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/status.h>

#include "server/front/request_route.h"
#include "server/front/worker_pool.h"

namespace gpucompute::front {

// What one worker answered.
struct WorkerReply {
  int worker = 0;
  int device_index = -1;  // the front's index of its GPU; -1 without one
  grpc::Status status;
  std::vector<grpc::ByteBuffer> messages;
};

struct MergedReply {
  grpc::Status status;
  bool has_message = false;
  grpc::ByteBuffer message;
};

// The reply of `method` (kAll or kMerge) to the caller:
// - LoadModel, RegisterSharedMemory: OK when every worker succeeded (ModelInfo lists every
//   worker's GPU), else the first failure (the caller undoes the successes);
// - UnloadModel, UnregisterSharedMemory: OK when any worker succeeded (the others did not hold
//   it), else the first failure;
// - ListModels, ListTensors, ServerInfo: the answers merged; an error only when none answered.
// `workers` (ServerInfo only) describes every worker, serving or not.
MergedReply MergeReplies(Method method, const std::vector<WorkerReply>& replies,
                         const std::vector<WorkerSnapshot>& workers,
                         const std::vector<int>& device_index_of_worker);

// The model name in a ModelInfo reply; empty when it does not parse.
std::string ModelNameOf(const grpc::ByteBuffer& model_info);

// The `name` (field 1) of an UnloadModelRequest or RegisterSharedMemoryRequest.
std::string NameInRequest(const grpc::ByteBuffer& request);

// Serialized messages the front sends itself: the call that undoes a LoadModel or a
// RegisterSharedMemory of `name` on a worker where it succeeded while another failed
// (UnloadModel, UnregisterSharedMemory: see UndoMethod), and a Submit job's error reply.
const char* UndoMethod(Method method);
grpc::ByteBuffer UndoRequest(Method method, const std::string& name);
grpc::ByteBuffer SubmitErrorReply(const std::string& job_id, const grpc::Status& status);

}  // namespace gpucompute::front
