// The process families (see process_metrics.h), from Linux's /proc.
#include "server/metrics/process_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/descriptor_limit.h"

namespace gpucompute::metrics {
namespace {

// Fields of /proc/self/stat from the third on (after the command name, which may hold blanks):
// fields[0] is the state, fields[11] utime, fields[12] stime, fields[19] starttime (clock
// ticks since boot). Empty if unreadable.
std::vector<std::string> StatFields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return {};
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

double Field(const std::vector<std::string>& fields, size_t i) {
  return i < fields.size() ? std::stod(fields[i]) : 0.0;
}

// /proc/self/statm: total program size and resident set, in pages.
std::pair<double, double> MemoryPages() {
  std::ifstream in("/proc/self/statm");
  double size = 0, resident = 0;
  in >> size >> resident;
  return {size, resident};
}

double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double seconds = 0;
      in >> seconds;
      return seconds;
    }
  }
  return 0;
}

double OpenDescriptors() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  double count = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count - 1;  // the directory's own descriptor
}

CollectFn One(double (*value)()) {
  return [value] { return std::vector<Sample>{{{}, value()}}; };
}

}  // namespace

void RegisterProcessMetrics(Registry* registry) {
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  static const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  registry->AddCallback(MetricType::kCounter, "process_cpu_seconds_total",
                        "Total user and system CPU time spent in seconds.", {}, One([] {
                          const std::vector<std::string> f = StatFields();
                          return (Field(f, 11) + Field(f, 12)) / ticks;
                        }));
  registry->AddCallback(MetricType::kGauge, "process_resident_memory_bytes",
                        "Resident memory size in bytes.", {},
                        One([] { return MemoryPages().second * page; }));
  registry->AddCallback(MetricType::kGauge, "process_virtual_memory_bytes",
                        "Virtual memory size in bytes.", {},
                        One([] { return MemoryPages().first * page; }));
  registry->AddCallback(MetricType::kGauge, "process_open_fds", "Number of open file descriptors.",
                        {}, One(OpenDescriptors));
  registry->AddCallback(MetricType::kGauge, "process_max_fds",
                        "Maximum number of open file descriptors.", {},
                        One([] { return static_cast<double>(OpenDescriptorLimit()); }));
  // Computed once: it does not change.
  static const double start = BootTimeSeconds() + Field(StatFields(), 19) / ticks;
  registry->AddCallback(MetricType::kGauge, "process_start_time_seconds",
                        "Start time of the process since unix epoch in seconds.", {},
                        One([] { return start; }));
}

}  // namespace gpucompute::metrics
