// The server's allocator configuration (see allocator.h).
#include "server/allocator.h"

#include <cstddef>

#include <jemalloc/jemalloc.h>

#include "absl/strings/str_cat.h"

// Read by jemalloc at its start (this definition overrides its weak default): large extents
// are reused like small ones instead of being returned to the kernel at once.
extern "C" const char* malloc_conf = "oversize_threshold:0";

namespace gpucompute {

std::string AllocatorDescription() {
  const char* version = nullptr;
  size_t version_size = sizeof(version);
  size_t oversize = 0;
  size_t oversize_size = sizeof(oversize);
  if (mallctl("version", &version, &version_size, nullptr, 0) != 0 ||
      mallctl("opt.oversize_threshold", &oversize, &oversize_size, nullptr, 0) != 0) {
    return "jemalloc (not queryable)";
  }
  return absl::StrCat("jemalloc ", version, ", oversize_threshold ", oversize);
}

}  // namespace gpucompute
