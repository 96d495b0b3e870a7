// gpucompute-load: closed- and open-loop load tests of a gpucompute service (see --help and
// docs/performance.md "Load testing"). Connect, prepare the workload (not timed), run each
// level (warm-up, then measurement), report, undo the preparation.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "client/cpp/client.h"
#include "client/cpp/tensor_util.h"
#include "client/load/channels.h"
#include "client/load/config.h"
#include "client/load/flags.h"
#include "client/load/report.h"
#include "client/load/runner.h"
#include "client/load/setup.h"

namespace gpucompute::load {
namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) {
  // A second Ctrl-C kills at once.
  if (g_stop.exchange(true)) _exit(130);
}

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "gpucompute-load: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

// plot_load.py: --plot-script, else next to the binary, else the source tree's.
std::string PlotScript(const OutputConfig& output) {
  if (!output.plot_script.empty()) return output.plot_script;
  char self[4096] = {};
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    for (const std::string& candidate :
         {dir + "/plot_load.py", dir + "/../share/gpucompute/plot_load.py"}) {
      if (access(candidate.c_str(), R_OK) == 0) return candidate;
    }
  }
  return GPUCOMPUTE_LOAD_SOURCE_DIR "/plot_load.py";
}

nlohmann::json DescribeRun(const LoadConfig& c, const v1::ServerInfoResponse& info,
                           const nlohmann::json& prepared) {
  const WorkloadConfig& w = c.workload;
  nlohmann::json run;
  run["targets"] = c.transport.targets;
  run["channels"] = std::max<int>(c.transport.channels,
                                  static_cast<int>(c.transport.targets.size()));
  run["lb_policy"] = c.transport.lb_policy;
  run["mode"] = ModeName(c.run.mode);
  run["input"] = InputPlacementName(w.input);
  run["output"] = OutputPlacementName(w.output);
  nlohmann::json mix = nlohmann::json::object();
  for (const MixEntry& m : w.mix) mix[std::string(OpName(m.op))] = m.weight;
  run["mix"] = mix;
  run["periodogram"] = {{"samples", w.periodogram.samples},
                        {"frequencies", w.periodogram.frequencies},
                        {"series", w.periodogram.series},
                        {"top_k", w.periodogram.top_k}};
  run["dense"] = {{"in", w.dense.in_features},   {"out", w.dense.out_features},
                  {"layers", w.dense.layers},    {"rows", w.dense.rows},
                  {"model_dtype", v1::DTypeName(w.dense.model_dtype)}};
  run["assimilate"] = {{"n", w.assimilate.n},
                       {"m", w.assimilate.m},
                       {"members", w.assimilate.members},
                       {"problems", w.assimilate.problems},
                       {"method", w.assimilate.method == v1::ASSIMILATION_METHOD_ENKF ? "enkf"
                                                                                      : "etkf"}};
  run["echo"] = {{"bytes", w.echo.bytes}, {"discard", w.echo.discard}, {"split", w.echo.split}};
  run["dtype"] = v1::DTypeName(w.dtype);
  run["arrival"] = ArrivalName(c.run.arrival);
  run["warmup_s"] = absl::ToDoubleSeconds(c.run.warmup);
  run["duration_s"] = c.run.requests > 0 ? nlohmann::json() : nlohmann::json(
                                                                  absl::ToDoubleSeconds(c.run.duration));
  run["requests_per_level"] = c.run.requests > 0 ? nlohmann::json(c.run.requests)
                                                 : nlohmann::json();
  run["streams_per_channel"] = c.run.streams_per_channel;
  run["transport"] = {{"max_message_bytes", c.transport.max_message_bytes},
                      {"http2_lookahead_bytes", c.transport.http2_lookahead_bytes},
                      {"bdp_probe", c.transport.bdp_probe},
                      {"http2_max_frame_bytes", c.transport.http2_max_frame_bytes},
                      {"http2_write_buffer_bytes", c.transport.http2_write_buffer_bytes}};
  nlohmann::json server = {{"backend", info.backend()}, {"version", info.version()}};
  if (info.devices_size() > 0) server["device"] = info.devices(0).name();
  run["server"] = server;
  run["prepared"] = prepared;
  run["started"] = absl::FormatTime(absl::RFC3339_sec, absl::Now(), absl::UTCTimeZone());
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  run["client_host"] = host;
  return run;
}

// Runs one level of `workload` and turns its records into a LevelResult.
absl::StatusOr<LevelResult> Measure(const LoadConfig& config, const Workload& workload,
                                    const std::vector<LoadChannel>& channels, int concurrency,
                                    double rate, bool progress) {
  LevelPlan plan;
  plan.concurrency = concurrency;
  plan.rate = rate;
  plan.arrival = config.run.arrival;
  plan.mode = config.run.mode;
  plan.warmup = config.run.warmup;
  plan.duration = config.run.duration;
  plan.requests = config.run.requests;
  plan.timeout = config.run.timeout;
  plan.streams_per_channel = config.run.streams_per_channel;
  plan.max_in_flight = config.run.max_in_flight;
  plan.seed = config.workload.seed;
  plan.client_id = config.workload.client_id;

  LiveCounters live;
  live.stop = &g_stop;
  const std::string label =
      absl::StrCat(workload.name, concurrency > 0 ? absl::StrCat(" c=", concurrency)
                                                  : absl::StrCat(" r=", rate));
  const double planned_s = config.run.requests > 0
                               ? 0
                               : absl::ToDoubleSeconds(config.run.warmup + config.run.duration);
  int64_t last_completed = 0;
  absl::Time last = absl::Now();
  auto tick = [&] {
    if (!progress) return;
    const absl::Time now = absl::Now();
    const int64_t completed = live.completed.load();
    const double dt = absl::ToDoubleSeconds(now - last);
    const double rate_now = dt > 0 ? static_cast<double>(completed - last_completed) / dt : 0;
    last = now;
    last_completed = completed;
    std::fprintf(stderr, "\r\033[K%s",
                 ProgressLine(label, live.measuring.load(), live.elapsed_ns.load() / 1e9,
                              planned_s, completed, rate_now, live.errors.load(),
                              live.in_flight.load())
                     .c_str());
    std::fflush(stderr);
  };
  absl::StatusOr<LevelRun> run = RunLevel(plan, workload, channels, live, tick);
  if (progress) std::fprintf(stderr, "\r\033[K");
  if (!run.ok()) return run.status();

  LevelResult result;
  result.workload = workload.name;
  result.concurrency = concurrency;
  result.rate = rate;
  result.mean_payload_bytes = workload.MeanPayloadBytes();
  result.interrupted = run->interrupted;
  for (const Record& r : run->records) {
    if (!r.measured && r.end_ns >= 0 && r.code != 0) ++result.warmup_errors[StatusCodeName(r.code)];
  }
  const std::vector<JobSize> sizes = workload.sizes();
  result.figures = ComputeFigures(run->records, sizes, run->seconds);
  if (workload.picker.entries() > 1) {
    for (int e = 0; e < workload.picker.entries(); ++e) {
      result.by_op.emplace_back(std::string(OpName(workload.entry_ops[e])),
                                ComputeFigures(run->records, sizes, run->seconds,
                                               workload.picker.jobs_of(e)));
    }
  }
  return result;
}

int Main(int argc, char** argv) {
  LoadConfig config;
  if (const int code = ParseFlags(argc, argv, config); code >= 0) return code;

  struct sigaction action = {};
  action.sa_handler = OnSignal;
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);

  absl::StatusOr<std::vector<LoadChannel>> channels = MakeChannels(config.transport);
  if (!channels.ok()) return Fail("channels", channels.status());
  if (absl::Status s = WaitForChannels(*channels, absl::Now() + config.connect_timeout); !s.ok()) {
    return Fail("connect", s);
  }
  v1::ServerInfoResponse info;
  {
    std::unique_ptr<client::Client> c = client::Client::FromChannel((*channels)[0].channel);
    client::CallOptions call;
    call.timeout = config.connect_timeout;
    absl::StatusOr<client::ServerInfoResult> r = c->ServerInfo(call);
    if (!r.ok()) return Fail("ServerInfo", r.status());
    info = std::move(r->info);
  }

  absl::StatusOr<std::unique_ptr<PreparedRun>> prepared =
      PreparedRun::Create(config, *channels, info);
  if (!prepared.ok()) return Fail("preparing the workload", prepared.status());
  const nlohmann::json run_info = DescribeRun(config, info, (*prepared)->description());

  const bool progress = config.output.progress == Progress::kOn ||
                        (config.output.progress == Progress::kAuto && isatty(STDERR_FILENO));
  FILE* out = stdout;
  if (!config.output.quiet) {
    std::fprintf(out, "gpucompute-load: %s, %s backend %s, %s %s inputs, %d channel(s)\n",
                 absl::StrJoin(config.transport.targets, ",").c_str(), info.backend().c_str(),
                 info.version().c_str(), std::string(ModeName(config.run.mode)).c_str(),
                 std::string(InputPlacementName(config.workload.input)).c_str(),
                 static_cast<int>((*channels).size()));
    std::fprintf(out, "workload %s, %s per request\n", (*prepared)->service().name.c_str(),
                 FormatBytes((*prepared)->service().MeanPayloadBytes()).c_str());
    PrintTableHeader(out);
  }

  std::vector<LevelResult> results;
  const bool open = IsOpenLoop(config.run);
  const size_t levels = open ? config.run.rates.size() : config.run.concurrency.size();
  int exit_code = 0;
  for (size_t i = 0; i < levels && !g_stop.load(); ++i) {
    const int concurrency = open ? 0 : config.run.concurrency[i];
    const double rate = open ? config.run.rates[i] : 0;
    absl::StatusOr<LevelResult> level =
        Measure(config, (*prepared)->service(), *channels, concurrency, rate, progress);
    if (!level.ok()) {
      exit_code = Fail("level", level.status());
      break;
    }
    if ((*prepared)->echo() != nullptr && !g_stop.load()) {
      absl::StatusOr<LevelResult> echo =
          Measure(config, *(*prepared)->echo(), *channels, concurrency, rate, progress);
      if (!echo.ok()) {
        exit_code = Fail("echo level", echo.status());
        break;
      }
      level->echo = echo->figures;
    }
    if (!config.output.quiet) PrintLevel(out, *level);
    results.push_back(*std::move(level));
  }

  if (!config.output.json_path.empty()) {
    if (absl::Status s = WriteJsonLines(config.output.json_path, run_info, results); !s.ok()) {
      exit_code = Fail("--json", s);
    }
  }
  if (!config.output.csv_path.empty()) {
    if (absl::Status s = WriteCsv(config.output.csv_path, run_info, results); !s.ok()) {
      exit_code = Fail("--csv", s);
    }
  }
  if (!config.output.plot_path.empty() && !results.empty()) {
    // The script reads the JSON: --json's, else a temporary file.
    std::string json = config.output.json_path;
    const bool temporary = json.empty();
    if (temporary) {
      json = absl::StrCat(config.output.plot_path, ".", getpid(), ".jsonl");
      (void)WriteJsonLines(json, run_info, results);
    }
    if (absl::Status s = RunPlot(config.output.python, PlotScript(config.output), json,
                                 config.output.plot_path);
        !s.ok()) {
      exit_code = Fail("--plot", s);
    }
    if (temporary) unlink(json.c_str());
  }
  prepared->reset();  // unload, free, unregister before the channels go
  int64_t ok = 0;
  for (const LevelResult& r : results) ok += r.figures.ok;
  if (exit_code == 0 && !results.empty() && ok == 0) {
    std::fprintf(stderr, "gpucompute-load: no request succeeded\n");
    exit_code = 1;
  }
  if (exit_code == 0 && g_stop.load()) exit_code = 130;  // interrupted: figures so far written
  return exit_code;
}

}  // namespace
}  // namespace gpucompute::load

int main(int argc, char** argv) { return gpucompute::load::Main(argc, argv); }
