// For tests that register shared memory in-process: what a client does, as the owner of the
// object (a proof issued to `owner`, written at `offset` in the object when the object reaches
// that far, then the registration with it).
#pragma once

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "server/runtime/shared_memory.h"

namespace gpucompute::testing {

inline absl::Status RegisterOwnRegion(SharedMemoryRegistry& registry, const std::string& owner,
                                      const std::string& name, const std::string& key,
                                      int64_t offset, int64_t size) {
  auto proof = registry.IssueProof(owner, key, offset);
  if (!proof.ok()) return proof.status();
  const int fd = shm_open(key.c_str(), O_RDWR, 0);
  if (fd >= 0) {
    (void)!pwrite(fd, proof->data(), proof->size(), offset);
    close(fd);
  }
  return registry.Register(owner, name, key, offset, size, *proof);
}

}  // namespace gpucompute::testing
