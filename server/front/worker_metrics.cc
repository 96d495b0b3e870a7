// Merging the workers' metrics (see worker_metrics.h).
#include "server/front/worker_metrics.h"

#include <map>

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace gpucompute::front {
namespace {

struct FamilyText {
  std::string header;  // its # HELP and # TYPE lines
  std::string samples;
};

// `sample` with worker="<label>" added: name{a="b"} v -> name{worker="w",a="b"} v, and
// name v -> name{worker="w"} v.
std::string Relabel(absl::string_view sample, absl::string_view label) {
  const size_t brace = sample.find('{');
  const size_t space = sample.find(' ');
  if (brace != absl::string_view::npos && (space == absl::string_view::npos || brace < space)) {
    const bool empty = brace + 1 < sample.size() && sample[brace + 1] == '}';
    return absl::StrCat(sample.substr(0, brace + 1), "worker=\"", label, "\"", empty ? "" : ",",
                        sample.substr(brace + 1));
  }
  if (space == absl::string_view::npos) return std::string(sample);
  return absl::StrCat(sample.substr(0, space), "{worker=\"", label, "\"}", sample.substr(space));
}

}  // namespace

std::string MergeWorkerExpositions(const std::vector<std::pair<std::string, std::string>>& workers) {
  std::vector<std::string> order;  // families in order of first appearance
  std::map<std::string, FamilyText> families;
  for (const auto& [label, text] : workers) {
    std::string current;  // the family of the last # TYPE / # HELP line
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      if (absl::StartsWith(line, "# HELP ") || absl::StartsWith(line, "# TYPE ")) {
        absl::string_view rest = line.substr(7);
        current = std::string(rest.substr(0, rest.find(' ')));
        auto [it, added] = families.try_emplace(current);
        if (added) order.push_back(current);
        // The first worker's header lines only (later workers' come after samples).
        if (it->second.samples.empty() && !absl::StrContains(it->second.header, line)) {
          absl::StrAppend(&it->second.header, line, "\n");
        }
        continue;
      }
      if (absl::StartsWith(line, "#")) continue;
      if (current.empty()) {
        // A sample without a header: a family of its own name.
        current = std::string(line.substr(0, line.find_first_of("{ ")));
        if (families.try_emplace(current).second) order.push_back(current);
      }
      absl::StrAppend(&families[current].samples, Relabel(line, label), "\n");
    }
  }
  std::string out;
  for (const std::string& name : order) {
    const FamilyText& f = families[name];
    absl::StrAppend(&out, f.header, f.samples);
  }
  return out;
}

std::string ScrapeWorker(int port) {
  if (port <= 0) return "";
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(1, 0);
  client.set_read_timeout(2, 0);
  auto result = client.Get("/metrics");
  if (!result || result->status != 200) return "";
  return result->body;
}

}  // namespace gpucompute::front
