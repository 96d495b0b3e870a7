// What the server benchmarks share: "--key=value" arguments split once, and the median of a
// sample (header-only; each bench is one .cc).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace gpucompute::bench {

// "--key=value" -> {"--key", "value"}; "--flag" -> {"--flag", ""}.
struct Flag {
  std::string key;
  std::string value;
};

inline Flag SplitFlag(const std::string& arg) {
  const size_t eq = arg.find('=');
  if (eq == std::string::npos) return {arg, ""};
  return {arg.substr(0, eq), arg.substr(eq + 1)};
}

// The upper median (the middle element after sorting); 0 for an empty sample.
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

}  // namespace gpucompute::bench
