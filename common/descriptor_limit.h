// The process's limit on open descriptors as it is now (RLIMIT_NOFILE's soft limit; 2^20 when
// unlimited or unknown). Connections and shared-memory regions each take one, and both are
// bounded by shares of it, read when they are admitted (the limit may change while the server
// runs).
#pragma once

#include <sys/resource.h>

#include <cstdint>

namespace gpucompute {

inline int64_t OpenDescriptorLimit() {
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) != 0 || nofile.rlim_cur == RLIM_INFINITY) return int64_t{1} << 20;
  return static_cast<int64_t>(nofile.rlim_cur);
}

}  // namespace gpucompute
