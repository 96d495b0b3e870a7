// Compiled as C++23 for std::string::resize_and_overwrite (client/cpp/CMakeLists.txt); the
// rest of the project is C++20.
#include "client/cpp/uninitialized_string.h"

#include <sys/mman.h>

#include <cstdint>

namespace gpucompute::client {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

// Asks for transparent huge pages over the 2 MiB-aligned part of [p, p + n), before any of it
// is touched. Advice only: where the kernel has them off, nothing changes.
void AdviseHugePages(char* p, size_t n) {
  const auto begin = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~(kHugePage - 1);
  const auto end = (reinterpret_cast<uintptr_t>(p) + n) & ~(kHugePage - 1);
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

}  // namespace

void ResizeUninitialized(std::string* s, size_t n) {
  s->resize_and_overwrite(n, [n](char* p, size_t) {
    if (n >= 2 * kHugePage) AdviseHugePages(p, n);
    return n;
  });
}

}  // namespace gpucompute::client
