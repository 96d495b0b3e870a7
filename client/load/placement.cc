// Resident-tensor and shared-memory inputs for gpucompute-load.
#include "client/load/placement.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/cpp/client.h"

namespace gpucompute::load {

void ConfigureSetupContext(grpc::ClientContext& context, const std::string& client_id,
                           absl::Duration timeout) {
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (!client_id.empty()) context.AddMetadata("x-gpucompute-client", client_id);
}

// ---------------------------------------------------------------- resident tensors

ResidentInputs::ResidentInputs(std::shared_ptr<grpc::Channel> channel, int64_t chunk_bytes,
                               std::string client_id, absl::Duration timeout)
    : stub_(v1::Compute::NewStub(channel)),
      chunk_bytes_(std::max<int64_t>(chunk_bytes, 1)),
      client_id_(std::move(client_id)),
      timeout_(timeout) {}

ResidentInputs::~ResidentInputs() {
  for (const std::string& handle : handles_) {
    grpc::ClientContext context;
    ConfigureSetupContext(context, client_id_, timeout_);
    v1::DeleteTensorRequest request;
    request.set_handle(handle);
    v1::DeleteTensorResponse response;
    const grpc::Status status = stub_->DeleteTensor(&context, request, &response);
    if (!status.ok()) {
      std::fprintf(stderr, "gpucompute-load: DeleteTensor %s: %s\n", handle.c_str(),
                   status.error_message().c_str());
    }
  }
}

absl::Status ResidentInputs::Place(v1::Tensor& tensor) {
  if (tensor.payload_case() != v1::Tensor::kData) return absl::OkStatus();
  grpc::ClientContext context;
  ConfigureSetupContext(context, client_id_, timeout_);
  v1::TensorInfo info;
  std::unique_ptr<grpc::ClientWriter<v1::PutTensorChunk>> writer =
      stub_->PutTensor(&context, &info);
  const std::string& data = tensor.data();
  int64_t offset = 0;
  bool first = true;
  while (first || offset < static_cast<int64_t>(data.size())) {
    v1::PutTensorChunk chunk;
    if (first) {
      chunk.mutable_header()->set_dtype(tensor.dtype());
      *chunk.mutable_header()->mutable_shape() = tensor.shape();
      first = false;
    }
    const int64_t n = std::min<int64_t>(chunk_bytes_, static_cast<int64_t>(data.size()) - offset);
    chunk.set_offset(offset);
    chunk.set_data(data.data() + offset, static_cast<size_t>(n));
    offset += n;
    if (!writer->Write(chunk)) break;  // the server ended the call; Finish says why
  }
  writer->WritesDone();
  const grpc::Status status = writer->Finish();
  if (!status.ok()) {
    return absl::Status(client::ToAbslStatus(status).code(),
                        absl::StrCat("PutTensor: ", status.error_message()));
  }
  handles_.push_back(info.handle());
  bytes_ += static_cast<int64_t>(data.size());
  tensor.set_handle(info.handle());  // replaces the data (oneof)
  return absl::OkStatus();
}

// ---------------------------------------------------------------- shared memory

absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> SharedMemoryRegion::Create(
    std::shared_ptr<grpc::Channel> channel, int64_t bytes, std::string client_id,
    absl::Duration timeout) {
  static std::atomic<int> counter{0};
  std::unique_ptr<SharedMemoryRegion> region(new SharedMemoryRegion());
  region->stub_ = v1::Compute::NewStub(channel);
  region->client_id_ = std::move(client_id);
  region->timeout_ = timeout;
  region->size_ = std::max<int64_t>(bytes, 64);
  region->name_ = absl::StrCat("gpucompute-load-", getpid(), "-", counter++);
  region->key_ = "/" + region->name_;

  const int fd = shm_open(region->key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("shm_open ", region->key_, ": ", std::strerror(errno)));
  }
  if (ftruncate(fd, region->size_) != 0) {
    const int e = errno;
    close(fd);
    shm_unlink(region->key_.c_str());
    return absl::ResourceExhaustedError(absl::StrCat("ftruncate ", region->key_, " to ",
                                                     region->size_, " bytes: ", std::strerror(e)));
  }
  void* base = mmap(nullptr, static_cast<size_t>(region->size_), PROT_READ | PROT_WRITE,
                    MAP_SHARED, fd, 0);
  close(fd);
  if (base == MAP_FAILED) {
    shm_unlink(region->key_.c_str());
    return absl::InternalError(absl::StrCat("mmap ", region->key_, ": ", std::strerror(errno)));
  }
  region->base_ = static_cast<char*>(base);

  grpc::ClientContext context;
  ConfigureSetupContext(context, region->client_id_, timeout);
  v1::RegisterSharedMemoryRequest request;
  request.set_name(region->name_);
  request.set_key(region->key_);
  request.set_offset(0);
  request.set_byte_size(region->size_);
  v1::RegisterSharedMemoryResponse response;
  const grpc::Status status = region->stub_->RegisterSharedMemory(&context, request, &response);
  if (!status.ok()) {
    const absl::Status s = client::ToAbslStatus(status);
    const char* hint = s.code() == absl::StatusCode::kFailedPrecondition ||
                               s.code() == absl::StatusCode::kPermissionDenied
                           ? " (does the server run with --allow_shared_memory, on this node?)"
                           : "";
    return absl::Status(s.code(),
                        absl::StrCat("RegisterSharedMemory: ", status.error_message(), hint));
  }
  region->registered_ = true;
  return region;
}

SharedMemoryRegion::~SharedMemoryRegion() {
  if (registered_) {
    grpc::ClientContext context;
    ConfigureSetupContext(context, client_id_, timeout_);
    v1::UnregisterSharedMemoryRequest request;
    request.set_name(name_);
    v1::UnregisterSharedMemoryResponse response;
    const grpc::Status status = stub_->UnregisterSharedMemory(&context, request, &response);
    if (!status.ok()) {
      std::fprintf(stderr, "gpucompute-load: UnregisterSharedMemory %s: %s\n", name_.c_str(),
                   status.error_message().c_str());
    }
  }
  if (base_ != nullptr) munmap(base_, static_cast<size_t>(size_));
  if (!key_.empty()) shm_unlink(key_.c_str());
}

absl::StatusOr<v1::SharedMemoryRef> SharedMemoryRegion::Allocate(int64_t bytes) {
  const int64_t offset = (used_ + 63) / 64 * 64;
  if (bytes < 0 || offset + bytes > size_) {
    return absl::ResourceExhaustedError(absl::StrCat("shared-memory region ", name_, " (",
                                                     size_, " bytes) is full"));
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
  std::memcpy(base_ + ref->offset(), tensor.data().data(), static_cast<size_t>(n));
  *tensor.mutable_shared_memory() = *std::move(ref);  // replaces the data (oneof)
  return absl::OkStatus();
}

}  // namespace gpucompute::load
