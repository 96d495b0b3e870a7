// Reports of gpucompute-load: a table on stdout, a live progress line on stderr (terminals
// only), JSON Lines (one self-contained object per level), CSV (one row per level, and one per
// op of a mix), and the PNG drawn by plot_load.py from the JSON.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/load/stats.h"
#include "nlohmann/json.hpp"

namespace gpucompute::load {

struct LevelResult {
  std::string workload;  // "periodogram", "mix", ...
  int concurrency = 0;   // closed loop
  double rate = 0;       // open loop: offered requests/s
  double mean_payload_bytes = 0;   // per request, as picked
  Figures figures;
  std::vector<std::pair<std::string, Figures>> by_op;  // a mix: per operation
  std::optional<Figures> echo;     // --compare-echo: Echo with the same payload bytes
  std::map<std::string, int64_t> warmup_errors;  // failures during the warm-up, by code
  bool interrupted = false;
};

// service requests/s over echo requests/s (0 when the echo did nothing).
double ServiceEchoRatio(const LevelResult& level);

// `run` (the configuration, server info) is copied into every line under "run".
nlohmann::json LevelJson(const nlohmann::json& run, const LevelResult& level);
absl::Status WriteJsonLines(const std::string& path, const nlohmann::json& run,
                            const std::vector<LevelResult>& levels);
absl::Status WriteCsv(const std::string& path, const nlohmann::json& run,
                      const std::vector<LevelResult>& levels);

// The table: a header, then rows (an "echo" row under each level with --compare-echo, and a row
// per op of a mix).
void PrintTableHeader(std::FILE* out);
void PrintLevel(std::FILE* out, const LevelResult& level);

// "c=64 measuring 3.2/10 s | 12345 done | 4567 req/s | 0 errors | 64 in flight"
std::string ProgressLine(const std::string& label, bool measuring, double elapsed_s,
                         double planned_s, int64_t completed, double recent_rate,
                         int64_t errors, int64_t in_flight);

// Runs `python script json png`; INTERNAL with its output when it fails.
absl::Status RunPlot(const std::string& python, const std::string& script,
                     const std::string& json_path, const std::string& png_path);

}  // namespace gpucompute::load
