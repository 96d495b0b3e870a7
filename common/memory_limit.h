// How much memory this process may use: the host's physical memory, or less when its control
// group says so (a container's memory limit, e.g. Kubernetes' resources.limits.memory). The
// server's defaults that are fractions of "the memory" (the resident tensor store, gRPC's
// buffer quota) take this, so that in a pod with an 8 GiB limit on a 512 GiB node they are
// fractions of 8 GiB and the pod is not killed for memory it was allowed to accept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpucompute {

// The host's physical memory or the smallest memory limit of the cgroup files that exist:
// cgroup v2's memory.max of the process's group (as /proc/self/cgroup names it) and at the
// mount's root (inside a container's cgroup namespace the same file), cgroup v1's
// memory/memory.limit_in_bytes. Read on every call.
int64_t MemoryLimitBytes();

// MemoryLimitBytes' rule on given inputs: `physical` bytes, or less when one of `files` holds a
// smaller limit (a byte count; "max", a missing file or anything unreadable means none).
int64_t MemoryLimitBytes(int64_t physical, const std::vector<std::string>& files);

}  // namespace gpucompute
