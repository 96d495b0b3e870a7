// SharedMemoryRegion: a POSIX shared-memory object mapped read-write in this process, for
// passing tensors to a gpucompute server on the same node without sending their bytes
// (docs/python.md "Resident tensors and shared memory"; the server needs --allow_shared_memory).
//
//   auto region = SharedMemoryRegion::Create(256 << 20);          // shm_open + ftruncate + mmap
//   client->RegisterSharedMemory("in", region->key(), 0, region->size());
//   std::memcpy(region->data(), x.data(), bytes);
//   request.mutable_tensor()->CopyFrom(*SharedMemoryTensor("in", 0, v1::FLOAT32, {n}));
//
// Move-only; the destructor unmaps, and unlinks the object when this process created it.
// Unregister the region on the server before the object goes away (the server keeps its own
// mapping until then). Not thread-safe; the bytes are shared with the server.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpucompute::client {

class SharedMemoryRegion {
 public:
  // A new object of `size` bytes (zero-filled) named `key` ("/name"); an empty key picks a
  // unique "/gpucompute-<pid>-<n>-<random>". ALREADY_EXISTS when the key is taken.
  static absl::StatusOr<SharedMemoryRegion> Create(int64_t size, std::string key = "");
  // Maps all of an existing object (which this region will not unlink).
  static absl::StatusOr<SharedMemoryRegion> Open(std::string key);

  SharedMemoryRegion(SharedMemoryRegion&& other) noexcept;
  SharedMemoryRegion& operator=(SharedMemoryRegion&& other) noexcept;
  SharedMemoryRegion(const SharedMemoryRegion&) = delete;
  SharedMemoryRegion& operator=(const SharedMemoryRegion&) = delete;
  ~SharedMemoryRegion();

  const std::string& key() const { return key_; }  // what RegisterSharedMemory takes
  char* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  SharedMemoryRegion() = default;
  void Release();

  std::string key_;
  char* data_ = nullptr;
  int64_t size_ = 0;
  bool unlink_ = false;
};

// Writes `bytes` at `offset` of the existing object `key` and returns what was there
// (RegisterSharedMemory's proof, put back after). INVALID_ARGUMENT when the object does not
// reach that far (a write would grow it).
absl::StatusOr<std::string> SwapSharedMemoryBytes(const std::string& key, int64_t offset,
                                                  absl::string_view bytes);

}  // namespace gpucompute::client
