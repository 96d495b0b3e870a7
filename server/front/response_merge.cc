// Merging the workers' replies (see response_merge.h).
#include "server/front/response_merge.h"

#include <algorithm>
#include <map>
#include <set>

#include <grpcpp/impl/codegen/proto_utils.h>

#include "absl/strings/str_cat.h"
#include "gpucompute/v1/compute.pb.h"

namespace gpucompute::front {
namespace {

template <typename Message>
bool Parse(const grpc::ByteBuffer& buffer, Message* out) {
  grpc::ByteBuffer copy(buffer);  // deserialising consumes the buffer
  return grpc::SerializationTraits<Message>::Deserialize(&copy, out).ok();
}

template <typename Message>
grpc::ByteBuffer Serialize(const Message& message) {
  grpc::ByteBuffer out;
  bool own = false;
  (void)grpc::SerializationTraits<Message>::Serialize(message, &out, &own);
  return out;
}

// The worker's device indices (0 inside a worker that sees one GPU) as the front's.
void MapDevices(google::protobuf::RepeatedField<int32_t>* devices, int device_index) {
  if (device_index < 0) return;
  for (int32_t& d : *devices) d = device_index;
}

void AddStats(const v1::BatchingStats& from, v1::BatchingStats* to) {
  to->set_requests(to->requests() + from.requests());
  to->set_batches(to->batches() + from.batches());
  to->set_largest_batch(std::max(to->largest_batch(), from.largest_batch()));
  to->set_rejected_queue_full(to->rejected_queue_full() + from.rejected_queue_full());
  to->set_expired_before_dispatch(to->expired_before_dispatch() + from.expired_before_dispatch());
  to->set_queued(to->queued() + from.queued());
}

const WorkerReply* FirstOk(const std::vector<WorkerReply>& replies) {
  for (const WorkerReply& r : replies) {
    if (r.status.ok() && !r.messages.empty()) return &r;
  }
  return nullptr;
}

// The failure to report: a precise one (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ...) before an
// UNAVAILABLE from a worker that went away meanwhile.
grpc::Status FirstFailure(const std::vector<WorkerReply>& replies) {
  const grpc::Status* chosen = nullptr;
  for (const WorkerReply& r : replies) {
    if (r.status.ok()) continue;
    if (chosen == nullptr || (chosen->error_code() == grpc::StatusCode::UNAVAILABLE &&
                              r.status.error_code() != grpc::StatusCode::UNAVAILABLE)) {
      chosen = &r.status;
    }
  }
  return chosen != nullptr ? *chosen : grpc::Status(grpc::StatusCode::UNAVAILABLE, "no worker answered");
}

MergedReply Reply(const grpc::ByteBuffer& message) {
  MergedReply out;
  out.has_message = true;
  out.message = message;
  return out;
}

template <typename Message>
MergedReply Reply(const Message& message) {
  return Reply(Serialize(message));
}

MergedReply Failure(const grpc::Status& status) {
  MergedReply out;
  out.status = status;
  return out;
}

MergedReply MergeModelInfo(const std::vector<WorkerReply>& replies) {
  v1::ModelInfo merged;
  std::set<int32_t> devices;
  bool first = true;
  for (const WorkerReply& r : replies) {
    v1::ModelInfo info;
    if (r.messages.empty() || !Parse(r.messages.front(), &info)) continue;
    MapDevices(info.mutable_devices(), r.device_index);
    devices.insert(info.devices().begin(), info.devices().end());
    if (first) merged = info;
    first = false;
  }
  merged.clear_devices();
  for (int32_t d : devices) merged.add_devices(d);
  return Reply(merged);
}

MergedReply MergeModelLists(const std::vector<WorkerReply>& replies) {
  std::map<std::string, v1::ModelInfo> by_name;
  std::map<std::string, std::set<int32_t>> devices;
  for (const WorkerReply& r : replies) {
    v1::ListModelsResponse list;
    if (!r.status.ok() || r.messages.empty() || !Parse(r.messages.front(), &list)) continue;
    for (v1::ModelInfo& info : *list.mutable_models()) {
      MapDevices(info.mutable_devices(), r.device_index);
      devices[info.name()].insert(info.devices().begin(), info.devices().end());
      by_name.emplace(info.name(), std::move(info));
    }
  }
  v1::ListModelsResponse merged;
  for (auto& [name, info] : by_name) {
    info.clear_devices();
    for (int32_t d : devices[name]) info.add_devices(d);
    *merged.add_models() = std::move(info);
  }
  return Reply(merged);
}

MergedReply MergeTensorLists(const std::vector<WorkerReply>& replies) {
  v1::ListTensorsResponse merged;
  for (const WorkerReply& r : replies) {
    v1::ListTensorsResponse list;
    if (!r.status.ok() || r.messages.empty() || !Parse(r.messages.front(), &list)) continue;
    for (v1::TensorInfo& t : *list.mutable_tensors()) *merged.add_tensors() = std::move(t);
    merged.set_bytes(merged.bytes() + list.bytes());
  }
  return Reply(merged);
}

MergedReply MergeServerInfo(const std::vector<WorkerReply>& replies,
                            const std::vector<WorkerSnapshot>& workers,
                            const std::vector<int>& device_index_of_worker) {
  v1::ServerInfoResponse merged;
  bool first = true;
  std::set<int32_t> seen_devices;
  for (const WorkerReply& r : replies) {
    v1::ServerInfoResponse info;
    if (!r.status.ok() || r.messages.empty() || !Parse(r.messages.front(), &info)) continue;
    if (first) {
      merged = info;
      merged.clear_devices();
      merged.clear_periodogram_batching();
      merged.clear_dense_batching();
      merged.clear_assimilate_batching();
      first = false;
    }
    for (v1::DeviceInfo& d : *info.mutable_devices()) {
      if (r.device_index >= 0) d.set_index(r.device_index);
      if (seen_devices.insert(d.index()).second) *merged.add_devices() = std::move(d);
    }
    AddStats(info.periodogram_batching(), merged.mutable_periodogram_batching());
    AddStats(info.dense_batching(), merged.mutable_dense_batching());
    AddStats(info.assimilate_batching(), merged.mutable_assimilate_batching());
  }
  // GPUs whose worker is not serving: listed unhealthy, with the reason.
  for (const WorkerSnapshot& w : workers) {
    const int index = w.index < static_cast<int>(device_index_of_worker.size())
                          ? device_index_of_worker[w.index] : -1;
    if (index >= 0 && w.state != WorkerState::kServing && seen_devices.insert(index).second) {
      v1::DeviceInfo* d = merged.add_devices();
      d->set_index(index);
      d->set_healthy(false);
      d->set_health_message(absl::StrCat("worker ", w.index, " is ", WorkerStateName(w.state),
                                         w.message.empty() ? "" : ": ", w.message));
    }
  }
  std::sort(merged.mutable_devices()->begin(), merged.mutable_devices()->end(),
            [](const v1::DeviceInfo& a, const v1::DeviceInfo& b) { return a.index() < b.index(); });
  for (const WorkerSnapshot& w : workers) {
    v1::WorkerInfo* out = merged.add_workers();
    out->set_index(w.index);
    out->set_pid(w.pid);
    out->set_state(WorkerStateName(w.state));
    out->set_restarts(w.restarts);
    out->set_device(w.device);
    out->set_message(w.message);
    out->set_calls_in_flight(w.in_flight);
  }
  if (first) return Failure(FirstFailure(replies));
  return Reply(merged);
}

}  // namespace

MergedReply MergeReplies(Method method, const std::vector<WorkerReply>& replies,
                         const std::vector<WorkerSnapshot>& workers,
                         const std::vector<int>& device_index_of_worker) {
  const bool all_ok = !replies.empty() && std::all_of(replies.begin(), replies.end(),
                                                      [](const WorkerReply& r) { return r.status.ok(); });
  const WorkerReply* ok = FirstOk(replies);
  switch (method) {
    case Method::kLoadModel:
      if (!all_ok) return Failure(FirstFailure(replies));
      return MergeModelInfo(replies);
    case Method::kRegisterSharedMemory:
      if (!all_ok || ok == nullptr) return Failure(FirstFailure(replies));
      return Reply(ok->messages.front());
    case Method::kUnloadModel:
    case Method::kUnregisterSharedMemory:
      if (ok == nullptr) return Failure(FirstFailure(replies));
      return Reply(ok->messages.front());
    case Method::kListModels:
      if (ok == nullptr) return Failure(FirstFailure(replies));
      return MergeModelLists(replies);
    case Method::kListTensors:
      if (ok == nullptr) return Failure(FirstFailure(replies));
      return MergeTensorLists(replies);
    case Method::kServerInfo:
      return MergeServerInfo(replies, workers, device_index_of_worker);
    default:
      if (ok == nullptr) return Failure(FirstFailure(replies));
      return Reply(ok->messages.front());
  }
}

std::string ModelNameOf(const grpc::ByteBuffer& model_info) {
  v1::ModelInfo info;
  return Parse(model_info, &info) ? info.name() : std::string();
}

std::string NameInRequest(const grpc::ByteBuffer& request) {
  v1::UnloadModelRequest named;  // `string name = 1`, like RegisterSharedMemoryRequest's
  return Parse(request, &named) ? named.name() : std::string();
}

const char* UndoMethod(Method method) {
  return method == Method::kLoadModel ? "/gpucompute.v1.Compute/UnloadModel"
                                      : "/gpucompute.v1.Compute/UnregisterSharedMemory";
}

grpc::ByteBuffer UndoRequest(Method method, const std::string& name) {
  if (method == Method::kLoadModel) {
    v1::UnloadModelRequest request;
    request.set_name(name);
    return Serialize(request);
  }
  v1::UnregisterSharedMemoryRequest request;
  request.set_name(name);
  return Serialize(request);
}

grpc::ByteBuffer SubmitErrorReply(const std::string& job_id, const grpc::Status& status) {
  v1::SubmitResponse reply;
  reply.set_id(job_id);
  reply.set_code(static_cast<int32_t>(status.error_code()));
  reply.set_message(status.error_message());
  return Serialize(reply);
}

}  // namespace gpucompute::front
