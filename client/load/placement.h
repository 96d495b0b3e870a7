// Where inputs live for --input handle and --input shm: ResidentInputs uploads each input
// tensor once with the client library's PutTensor and replaces its bytes with the handle;
// SharedMemoryRegion creates a client::SharedMemoryRegion, registers it, copies inputs into it
// and hands out SharedMemoryRefs (also for the output area of --output shm). Both undo what
// they did on destruction (DeleteTensor; UnregisterSharedMemory, then the object is unmapped
// and unlinked). Setup only: these are synchronous calls, made before and after the timed run,
// from the main thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/cpp/client.h"
#include "client/cpp/shared_memory_region.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpucompute::load {

class ResidentInputs {
 public:
  // Calls carry a `timeout` deadline and (when `client_id` is not empty) the
  // x-gpucompute-client metadata.
  ResidentInputs(std::shared_ptr<grpc::Channel> channel, int64_t chunk_bytes,
                 std::string client_id, absl::Duration timeout);
  ResidentInputs(const ResidentInputs&) = delete;
  ResidentInputs& operator=(const ResidentInputs&) = delete;
  ~ResidentInputs();  // deletes every tensor it uploaded (errors are logged, not returned)

  // Uploads `tensor`'s inline bytes (one PutTensor stream, chunk_bytes per message) and
  // replaces them with the handle (dtype and shape kept).
  absl::Status Place(v1::Tensor& tensor);

  int64_t tensors() const { return static_cast<int64_t>(handles_.size()); }
  int64_t bytes() const { return bytes_; }

 private:
  std::unique_ptr<client::Client> client_;
  client::PutTensorOptions put_;
  client::CallOptions call_;
  std::vector<std::string> handles_;
  int64_t bytes_ = 0;
};

class SharedMemoryRegion {
 public:
  // A new POSIX object of `bytes` bytes (key "/gpucompute-load-<pid>-<n>"), mapped here and
  // registered with the server under the same name without the slash. FAILED_PRECONDITION
  // (with a hint) when the server does not allow shared memory.
  static absl::StatusOr<std::unique_ptr<SharedMemoryRegion>> Create(
      std::shared_ptr<grpc::Channel> channel, int64_t bytes, std::string client_id,
      absl::Duration timeout);
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;
  ~SharedMemoryRegion();  // unregisters (errors are logged); `region_` then unmaps and unlinks

  // The next `bytes` bytes of the region, 64-byte aligned. RESOURCE_EXHAUSTED when full.
  absl::StatusOr<v1::SharedMemoryRef> Allocate(int64_t bytes);
  // Copies `tensor`'s inline bytes into the region and refers to them instead.
  absl::Status Place(v1::Tensor& tensor);

  const std::string& name() const { return name_; }
  int64_t size() const { return region_.size(); }
  int64_t used() const { return used_; }

 private:
  SharedMemoryRegion(std::unique_ptr<client::Client> client, client::CallOptions call,
                     std::string name, client::SharedMemoryRegion region)
      : client_(std::move(client)),
        call_(std::move(call)),
        name_(std::move(name)),
        region_(std::move(region)) {}

  std::unique_ptr<client::Client> client_;
  client::CallOptions call_;
  std::string name_;
  client::SharedMemoryRegion region_;
  int64_t used_ = 0;
  bool registered_ = false;
};

}  // namespace gpucompute::load
