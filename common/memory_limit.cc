// The process's memory limit (see memory_limit.h).
#include "common/memory_limit.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"

namespace gpucompute {
namespace {

// The limit in `path`, or -1 for none (no such file, "max", or not a byte count).
int64_t LimitIn(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!in || !std::getline(in, text)) return -1;
  int64_t bytes = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &bytes) || bytes <= 0) return -1;
  return bytes;
}

// cgroup v2: the process's group from /proc/self/cgroup's "0::<path>" line, or "" if none.
std::string OwnCgroupV2Path() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, "0::")) return line.substr(3);
  }
  return "";
}

}  // namespace

int64_t MemoryLimitBytes(int64_t physical, const std::vector<std::string>& files) {
  int64_t limit = physical;
  for (const std::string& path : files) {
    const int64_t bytes = LimitIn(path);
    if (bytes > 0) limit = std::min(limit, bytes);
  }
  return limit;
}

int64_t MemoryLimitBytes() {
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  std::vector<std::string> files = {"/sys/fs/cgroup/memory.max",
                                    "/sys/fs/cgroup/memory/memory.limit_in_bytes"};
  const std::string own = OwnCgroupV2Path();
  if (!own.empty() && own != "/") files.push_back("/sys/fs/cgroup" + own + "/memory.max");
  return MemoryLimitBytes(physical, files);
}

}  // namespace gpucompute
