// Text, JSON Lines, CSV and plot output of gpucompute-load.
#include "client/load/report.h"

#include <spawn.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/load/config.h"

extern char** environ;

namespace gpucompute::load {
namespace {

nlohmann::json DistributionJson(const Distribution& d) {
  return {{"count", d.count}, {"min", d.min},   {"mean", d.mean}, {"p50", d.p50},
          {"p90", d.p90},     {"p95", d.p95},   {"p99", d.p99},   {"p999", d.p999},
          {"max", d.max}};
}

nlohmann::json FiguresJson(const Figures& f, double payload_bytes) {
  nlohmann::json j;
  j["requests"] = f.requests;
  j["ok"] = f.ok;
  j["errors"] = f.errors;
  j["dropped"] = f.dropped;
  j["errors_by_code"] = f.errors_by_code;
  j["seconds"] = f.seconds;
  j["requests_per_s"] = f.requests_per_s;
  j["request_bytes_per_s"] = f.request_bytes_per_s;
  j["response_bytes_per_s"] = f.response_bytes_per_s;
  j["payload_bytes_per_s"] = f.payload_bytes_per_s;
  j["payload_gb_per_s"] = f.payload_bytes_per_s / 1e9;
  // One request's payload over its median round trip (about payload_gb_per_s at concurrency 1).
  if (payload_bytes > 0) {
    j["payload_gb_per_s_p50"] =
        f.latency_us.p50 > 0 ? payload_bytes / (f.latency_us.p50 * 1e3) : 0;
  }
  j["latency_us"] = DistributionJson(f.latency_us);
  j["server_us"] = {{"decode", DistributionJson(f.decode_us)},
                    {"queue", DistributionJson(f.queue_us)},
                    {"compute", DistributionJson(f.compute_us)},
                    {"total", DistributionJson(f.server_total_us)}};
  nlohmann::json histogram = nlohmann::json::object();
  for (const auto& [size, count] : f.batch_histogram) histogram[absl::StrCat(size)] = count;
  j["batch_requests"] = DistributionJson(f.batch_requests);
  j["batch_requests"]["histogram"] = histogram;
  return j;
}

std::string Ms(double us) { return absl::StrFormat("%.3f", us / 1e3); }

std::string Rate(double per_s) {
  if (per_s >= 1e6) return absl::StrFormat("%.2fM", per_s / 1e6);
  if (per_s >= 1e4) return absl::StrFormat("%.1fk", per_s / 1e3);
  return absl::StrFormat("%.1f", per_s);
}

std::string Bandwidth(double bytes_per_s) {
  if (bytes_per_s >= 1e9) return absl::StrFormat("%.2f GB/s", bytes_per_s / 1e9);
  if (bytes_per_s >= 1e6) return absl::StrFormat("%.1f MB/s", bytes_per_s / 1e6);
  return absl::StrFormat("%.1f kB/s", bytes_per_s / 1e3);
}

std::string ErrorsText(const Figures& f) {
  if (f.errors_by_code.empty()) return "0";
  std::vector<std::string> parts;
  for (const auto& [code, n] : f.errors_by_code) parts.push_back(absl::StrCat(code, ":", n));
  return absl::StrJoin(parts, ";");
}

void PrintRow(std::FILE* out, const std::string& level, const std::string& what,
              const Figures& f) {
  const auto server = [](const Distribution& d) {
    return d.count > 0 ? Ms(d.p50) : std::string("-");
  };
  std::fprintf(out,
               "%-10s %-12s %9s %11s %8s %8s %8s %8s %8s %8s %8s | %8s %8s %6s | %s\n",
               level.c_str(), what.c_str(), Rate(f.requests_per_s).c_str(),
               Bandwidth(f.payload_bytes_per_s).c_str(), Ms(f.latency_us.min).c_str(),
               Ms(f.latency_us.p50).c_str(), Ms(f.latency_us.p90).c_str(),
               Ms(f.latency_us.p95).c_str(), Ms(f.latency_us.p99).c_str(),
               Ms(f.latency_us.p999).c_str(), Ms(f.latency_us.max).c_str(),
               server(f.queue_us).c_str(), server(f.compute_us).c_str(),
               f.batch_requests.count > 0 ? absl::StrFormat("%.1f", f.batch_requests.mean).c_str()
                                          : "-",
               ErrorsText(f).c_str());
}

std::string LevelLabel(const LevelResult& level) {
  return level.concurrency > 0 ? absl::StrCat("c=", level.concurrency)
                               : absl::StrCat("r=", Rate(level.rate));
}

// Enough digits to read back the value (StrCat gives six).
std::string Num(double v) { return absl::StrFormat("%.10g", v); }

std::string CsvEscape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

double ServiceEchoRatio(const LevelResult& level) {
  if (!level.echo || level.echo->requests_per_s <= 0) return 0;
  return level.figures.requests_per_s / level.echo->requests_per_s;
}

nlohmann::json LevelJson(const nlohmann::json& run, const LevelResult& level) {
  nlohmann::json j = FiguresJson(level.figures, level.mean_payload_bytes);
  j["tool"] = "gpucompute-load";
  j["workload"] = level.workload;
  j["loop"] = level.concurrency > 0 ? "closed" : "open";
  j["concurrency"] = level.concurrency > 0 ? nlohmann::json(level.concurrency) : nlohmann::json();
  j["rate"] = level.rate > 0 ? nlohmann::json(level.rate) : nlohmann::json();
  j["payload_bytes_per_request"] = level.mean_payload_bytes;
  j["interrupted"] = level.interrupted;
  j["warmup_errors_by_code"] = level.warmup_errors;
  if (!level.by_op.empty()) {
    nlohmann::json by_op = nlohmann::json::object();
    for (const auto& [op, f] : level.by_op) by_op[op] = FiguresJson(f, 0);
    j["by_op"] = by_op;
  }
  if (level.echo) {
    j["echo"] = FiguresJson(*level.echo, level.mean_payload_bytes);
    j["service_echo_ratio"] = ServiceEchoRatio(level);
  }
  j["run"] = run;
  return j;
}

absl::Status WriteJsonLines(const std::string& path, const nlohmann::json& run,
                            const std::vector<LevelResult>& levels) {
  std::ofstream out(path);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  for (const LevelResult& level : levels) out << LevelJson(run, level).dump() << "\n";
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

absl::Status WriteCsv(const std::string& path, const nlohmann::json& run,
                      const std::vector<LevelResult>& levels) {
  std::ofstream out(path);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  out << "workload,op,mode,input,loop,concurrency,rate,requests,ok,errors,dropped,seconds,"
         "requests_per_s,payload_bytes_per_request,payload_bytes_per_s,payload_gb_per_s,"
         "request_bytes_per_s,response_bytes_per_s,"
         "latency_min_us,latency_p50_us,latency_p90_us,latency_p95_us,latency_p99_us,"
         "latency_p999_us,latency_max_us,latency_mean_us,"
         "queue_p50_us,queue_p99_us,compute_p50_us,compute_p99_us,server_total_p50_us,"
         "server_total_p99_us,batch_mean,batch_max,errors_by_code,"
         "echo_requests_per_s,echo_latency_p50_us,echo_latency_p99_us,echo_payload_gb_per_s,"
         "service_echo_ratio\n";
  const std::string mode = run.value("mode", "");
  const std::string input = run.value("input", "");
  auto row = [&](const LevelResult& level, const std::string& op, const Figures& f,
                 const Figures* echo) {
    const Distribution& l = f.latency_us;
    std::vector<std::string> cells = {
        CsvEscape(level.workload), op, mode, input, level.concurrency > 0 ? "closed" : "open",
        level.concurrency > 0 ? absl::StrCat(level.concurrency) : "",
        level.rate > 0 ? Num(level.rate) : "", absl::StrCat(f.requests),
        absl::StrCat(f.ok), absl::StrCat(f.errors), absl::StrCat(f.dropped),
        Num(f.seconds), Num(f.requests_per_s),
        Num(level.mean_payload_bytes), Num(f.payload_bytes_per_s),
        Num(f.payload_bytes_per_s / 1e9), Num(f.request_bytes_per_s),
        Num(f.response_bytes_per_s), Num(l.min), Num(l.p50),
        Num(l.p90), Num(l.p95), Num(l.p99), Num(l.p999),
        Num(l.max), Num(l.mean), Num(f.queue_us.p50),
        Num(f.queue_us.p99), Num(f.compute_us.p50),
        Num(f.compute_us.p99), Num(f.server_total_us.p50),
        Num(f.server_total_us.p99), Num(f.batch_requests.mean),
        Num(f.batch_requests.max), CsvEscape(ErrorsText(f))};
    if (echo != nullptr) {
      cells.push_back(Num(echo->requests_per_s));
      cells.push_back(Num(echo->latency_us.p50));
      cells.push_back(Num(echo->latency_us.p99));
      cells.push_back(Num(echo->payload_bytes_per_s / 1e9));
      cells.push_back(
          Num(echo->requests_per_s > 0 ? f.requests_per_s / echo->requests_per_s : 0.0));
    } else {
      cells.insert(cells.end(), 5, "");
    }
    out << absl::StrJoin(cells, ",") << "\n";
  };
  for (const LevelResult& level : levels) {
    row(level, "all", level.figures, level.echo ? &*level.echo : nullptr);
    for (const auto& [op, f] : level.by_op) row(level, op, f, nullptr);
  }
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

void PrintTableHeader(std::FILE* out) {
  std::fprintf(out,
               "%-10s %-12s %9s %11s %8s %8s %8s %8s %8s %8s %8s | %8s %8s %6s | %s\n", "level",
               "workload", "req/s", "payload/s", "min ms", "p50", "p90", "p95", "p99", "p99.9",
               "max", "queue50", "comp50", "batch", "errors");
}

void PrintLevel(std::FILE* out, const LevelResult& level) {
  const std::string label = LevelLabel(level) + (level.interrupted ? "*" : "");
  PrintRow(out, label, level.workload, level.figures);
  for (const auto& [op, f] : level.by_op) PrintRow(out, "", "  " + op, f);
  if (!level.warmup_errors.empty()) {
    std::vector<std::string> parts;
    for (const auto& [code, n] : level.warmup_errors) parts.push_back(absl::StrCat(code, ":", n));
    std::fprintf(out, "%-10s   warm-up errors %s\n", "", absl::StrJoin(parts, ";").c_str());
  }
  if (level.echo) {
    PrintRow(out, "", "  echo", *level.echo);
    std::fprintf(out, "%-10s   service/echo requests/s ratio %.3f\n", "",
                 ServiceEchoRatio(level));
  }
  std::fflush(out);
}

std::string ProgressLine(const std::string& label, bool measuring, double elapsed_s,
                         double planned_s, int64_t completed, double recent_rate,
                         int64_t errors, int64_t in_flight) {
  const std::string time = planned_s > 0 ? absl::StrFormat("%.1f/%.0f s", elapsed_s, planned_s)
                                         : absl::StrFormat("%.1f s", elapsed_s);
  return absl::StrFormat("%s %s %s | %d done | %s req/s | %d errors | %d in flight",
                         label, measuring ? "measuring" : "warm-up", time, completed,
                         Rate(recent_rate), errors, in_flight);
}

absl::Status RunPlot(const std::string& python, const std::string& script,
                     const std::string& json_path, const std::string& png_path) {
  std::vector<std::string> argv = {python, script, json_path, png_path};
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, python.c_str(), nullptr, nullptr, args.data(), environ);
  if (rc != 0) return absl::UnavailableError(absl::StrCat("cannot run ", python));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return absl::InternalError("waitpid failed");
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(absl::StrJoin(argv, " "), " failed"));
  }
  return absl::OkStatus();
}

}  // namespace gpucompute::load
