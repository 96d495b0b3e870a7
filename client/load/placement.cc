// Resident-tensor and shared-memory inputs for gpucompute-load, over the C++ client library.
#include "client/load/placement.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/load/workload.h"

namespace gpucompute::load {
namespace {

// Deadline and (when `client_id` is not empty) x-gpucompute-client metadata of a setup call.
client::CallOptions SetupCallOptions(const std::string& client_id, absl::Duration timeout) {
  client::CallOptions options;
  options.timeout = timeout;
  if (!client_id.empty()) options.metadata.emplace_back("x-gpucompute-client", client_id);
  return options;
}

// `status` with "<call>: " before its message (and `hint` after), code kept.
absl::Status Prefixed(const absl::Status& status, absl::string_view call,
                      absl::string_view hint = "") {
  return absl::Status(status.code(), absl::StrCat(call, ": ", status.message(), hint));
}

}  // namespace

// ---------------------------------------------------------------- resident tensors

ResidentInputs::ResidentInputs(std::shared_ptr<grpc::Channel> channel, int64_t chunk_bytes,
                               std::string client_id, absl::Duration timeout)
    : client_(client::Client::FromChannel(std::move(channel))),
      call_(SetupCallOptions(client_id, timeout)) {
  put_.chunk_bytes = std::max<int64_t>(chunk_bytes, 1);
  put_.streams = 1;
}

ResidentInputs::~ResidentInputs() {
  for (const std::string& handle : handles_) {
    const absl::Status status = client_->DeleteTensor(handle, call_);
    if (!status.ok()) {
      std::fprintf(stderr, "gpucompute-load: DeleteTensor %s: %s\n", handle.c_str(),
                   std::string(status.message()).c_str());
    }
  }
}

absl::Status ResidentInputs::Place(v1::Tensor& tensor) {
  if (tensor.payload_case() != v1::Tensor::kData) return absl::OkStatus();
  absl::StatusOr<client::PutTensorResult> put =
      client_->PutTensor(tensor.dtype(), {tensor.shape().begin(), tensor.shape().end()},
                         tensor.data(), put_, call_);
  if (!put.ok()) return Prefixed(put.status(), "PutTensor");
  handles_.push_back(put->info.handle());
  bytes_ += static_cast<int64_t>(tensor.data().size());
  tensor.set_handle(put->info.handle());  // replaces the data (oneof)
  return absl::OkStatus();
}

// ---------------------------------------------------------------- shared memory

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Create(
    std::shared_ptr<grpc::Channel> channel, int64_t bytes, std::string client_id,
    absl::Duration timeout) {
  static std::atomic<int> counter{0};
  std::string name = absl::StrCat("gpucompute-load-", getpid(), "-", counter++);
  absl::StatusOr<client::SharedMemoryRegion> mapped =
      client::SharedMemoryRegion::Create(std::max<int64_t>(bytes, 64), "/" + name);
  if (!mapped.ok()) return mapped.status();
  std::unique_ptr<SharedMemoryRegion> region(new SharedMemoryRegion(
      client::Client::FromChannel(std::move(channel)), SetupCallOptions(client_id, timeout),
      std::move(name), *std::move(mapped)));

  const absl::Status status = region->client_->RegisterSharedMemory(
      region->name_, region->region_.key(), 0, region->region_.size(), region->call_);
  if (!status.ok()) {
    const char* hint = status.code() == absl::StatusCode::kFailedPrecondition ||
                               status.code() == absl::StatusCode::kPermissionDenied
                           ? " (does the server run with --allow_shared_memory, on this node?)"
                           : "";
    return Prefixed(status, "RegisterSharedMemory", hint);
  }
  region->registered_ = true;
  return region;
}

SharedMemoryRegion::~SharedMemoryRegion() {
  if (!registered_) return;
  const absl::Status status = client_->UnregisterSharedMemory(name_, call_);
  if (!status.ok()) {
    std::fprintf(stderr, "gpucompute-load: UnregisterSharedMemory %s: %s\n", name_.c_str(),
                 std::string(status.message()).c_str());
  }
}

absl::StatusOr<v1::SharedMemoryRef> SharedMemoryRegion::Allocate(int64_t bytes) {
  const int64_t offset = Align64(used_);
  if (bytes < 0 || offset + bytes > size()) {
    return absl::ResourceExhaustedError(absl::StrCat("shared-memory region ", name_, " (",
                                                     size(), " bytes) is full"));
  }
  used_ = offset + bytes;
  v1::SharedMemoryRef ref;
  ref.set_region(name_);
  ref.set_offset(offset);
  ref.set_length(bytes);
  return ref;
}

absl::Status SharedMemoryRegion::Place(v1::Tensor& tensor) {
  if (tensor.payload_case() != v1::Tensor::kData) return absl::OkStatus();
  const int64_t n = static_cast<int64_t>(tensor.data().size());
  absl::StatusOr<v1::SharedMemoryRef> ref = Allocate(n);
  if (!ref.ok()) return ref.status();
  std::memcpy(region_.data() + ref->offset(), tensor.data().data(), static_cast<size_t>(n));
  *tensor.mutable_shared_memory() = *std::move(ref);  // replaces the data (oneof)
  return absl::OkStatus();
}

}  // namespace gpucompute::load
