// The flags of gpucompute-load. Sizes, durations, lists and mixes are read as strings and
// parsed by config.h, which the unit tests cover.
#include "client/load/flags.h"

#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "client/cpp/model_builder.h"
#include "client/cpp/periodogram_request_builder.h"

namespace gpucompute::load {
namespace {

constexpr char kFooter[] = R"(
Figures (per level, after the warm-up):
  req/s          OK responses per second of the measurement window.
  payload/s      the operation's input tensor bytes (however they travel: inline, handle or
                 shared memory) times OK responses, per second. For --op echo this is the
                 GB/s figure: tensor bytes moved per round trip / time, i.e. at concurrency 1
                 payload bytes / mean round-trip time; payload_gb_per_s_p50 in the JSON is
                 payload bytes / median round-trip time. The echo's reply is not counted again.
  latency        client-measured round trip of OK requests (open loop: from the scheduled
                 arrival), min/p50/p90/p95/p99/p99.9/max, exact (nearest rank).
  queue, comp    server-side queue and compute time (p50; trailing metadata for unary calls,
                 JobTiming on the stream); batch: mean requests per server launch.
--compare-echo runs Echo after each level at the same level, each job's twin carrying as
many bytes as the job's input tensors, placed the same way (inline/handle/shm), and prints
service/echo requests/s.

Examples:
  gpucompute-load --target localhost:50051 --op periodogram --concurrency 1,8,64 --compare-echo
  gpucompute-load --op echo --bytes 256Mi --concurrency 1 --duration 10s --channels 2
  gpucompute-load --op mix --mix periodogram:3,dense:1 --mode stream --rate 2000 --arrival poisson
)";

template <typename T>
T Must(absl::StatusOr<T> v, int& bad) {
  if (!v.ok()) {
    std::fprintf(stderr, "gpucompute-load: %s\n", std::string(v.status().message()).c_str());
    bad = 2;
    return T{};
  }
  return *std::move(v);
}

// What the flags give as text, parsed (config.h) once CLI11 is done; the defaults are the
// flags' defaults.
struct RawFlags {
  std::string targets = "localhost:50051";
  std::string max_message = "2047Mi", lookahead = "0", max_frame = "0", write_buffer = "0";
  std::vector<std::string> channel_args;
  std::string connect_timeout = "10s", token_file;
  std::string op = "echo", mix, dtype = "float64", model_dtype = "bfloat16", method = "etkf";
  std::string echo_bytes = "4Ki", input = "inline", output = "auto", chunk = "4095Ki";
  std::string mode = "unary", concurrency = "1,8,64", rate, arrival = "constant";
  std::string duration = "10s", warmup = "2s", timeout = "30s";
  std::string progress = "auto";
};

void AddTransportFlags(CLI::App& app, LoadConfig& config, RawFlags& raw) {
  TransportConfig& t = config.transport;
  auto* transport = app.add_option_group("Target and transport");
  transport->add_option("--target", raw.targets,
                        "server: host:port, a comma list (channels spread over them), or "
                        "dns:///host:port (round-robin over its addresses)")
      ->capture_default_str()
      ->envname("GPUCOMPUTE_TARGET");
  transport->add_option("--channels", t.channels,
                        "distinct channels, each its own TCP connection (0: one per target)")
      ->capture_default_str();
  transport->add_option("--lb", t.lb_policy, "load-balancing policy of each channel")
      ->check(CLI::IsMember({"round_robin", "pick_first"}))
      ->capture_default_str();
  transport->add_option("--max-message-bytes", raw.max_message,
                        "send and receive message limit of each channel")
      ->capture_default_str();
  transport->add_option("--http2-lookahead-bytes", raw.lookahead,
                        "grpc.http2.lookahead_bytes, the initial HTTP/2 stream window (0: gRPC's)")
      ->capture_default_str();
  transport->add_flag("--bdp-probe,!--no-bdp-probe", t.bdp_probe,
                      "let gRPC grow HTTP/2 windows by BDP probing (grpc.http2.bdp_probe; "
                      "default on)");
  transport->add_option("--http2-max-frame-bytes", raw.max_frame,
                        "grpc.http2.max_frame_size (0: gRPC's)")
      ->capture_default_str();
  transport->add_option("--http2-write-buffer-bytes", raw.write_buffer,
                        "grpc.http2.write_buffer_size (0: gRPC's)")
      ->capture_default_str();
  transport->add_option("--channel-arg", raw.channel_args,
                        "any channel argument, key=value (integers passed as int); repeatable");
  transport->add_option("--connect-timeout", raw.connect_timeout,
                        "wait this long for every channel")
      ->capture_default_str();
  transport->add_option("--tls-ca-file,--tls_ca_file", t.tls.ca_file,
                        "CA certificates (PEM) the server's certificate must chain to: TLS")
      ->check(CLI::ExistingFile);
  auto* client_cert = transport->add_option("--tls-cert-file,--tls_cert_file", t.tls.cert_file,
                                            "client certificate (PEM) for mutual TLS")
                          ->check(CLI::ExistingFile);
  auto* client_key = transport->add_option("--tls-key-file,--tls_key_file", t.tls.key_file,
                                           "private key (PEM) of --tls-cert-file")
                         ->check(CLI::ExistingFile);
  client_cert->needs(client_key);
  client_key->needs(client_cert);
  transport->add_option("--tls-server-name,--tls_server_name", t.tls.server_name,
                        "name the server's certificate must have (default: the target's host)");
  transport->add_option("--token-file,--token_file", raw.token_file,
                        "file holding the bearer token (default: $GPUCOMPUTE_TOKEN)")
      ->check(CLI::ExistingFile);
  transport->add_option("--client-id", config.workload.client_id,
                        "send x-gpucompute-client with every call (resident-tensor owner)");
}

void AddWorkloadFlags(CLI::App& app, WorkloadConfig& w, RawFlags& raw) {
  auto* workload = app.add_option_group("Workload");
  workload->add_option("--op", raw.op, "operation, or mix (then --mix)")
      ->check(CLI::IsMember({"periodogram", "dense", "assimilate", "echo", "mix"}))
      ->capture_default_str();
  workload->add_option("--mix", raw.mix, "weights of a mix: periodogram:3,dense:1,echo:1");
  workload->add_option("--samples", w.periodogram.samples, "periodogram: samples per series")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--frequencies", w.periodogram.frequencies,
                       "periodogram: frequencies per series (uniform grid)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--series", w.periodogram.series, "periodogram: series per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--top-k", w.periodogram.top_k,
                       "periodogram: the highest peaks returned per series")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  workload->add_option("--dtype", raw.dtype,
                       "periodogram and assimilate: compute dtype, also the inputs' wire dtype")
      ->check(CLI::IsMember({"float32", "float64"}))
      ->capture_default_str();
  workload->add_option("--in", w.dense.in_features, "dense: input features")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--out", w.dense.out_features, "dense: output features of every layer")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--layers", w.dense.layers, "dense: layers (LayerNorm, bias, GELU)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--model-dtype", raw.model_dtype, "dense: model and input dtype")
      ->check(CLI::IsMember({"float32", "float16", "bfloat16"}))
      ->capture_default_str();
  workload->add_option("--model", w.dense.model,
                       "dense: the name of a model the server already holds (e.g. from its "
                       "--model_manifest) instead of loading one; --in and --model-dtype must be its");
  workload->add_option("--rows", w.dense.rows, "dense: rows per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--n", w.assimilate.n, "assimilate: state size")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--m", w.assimilate.m, "assimilate: observations")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--members", w.assimilate.members, "assimilate: ensemble members N")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--problems", w.assimilate.problems, "assimilate: problems per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--method", raw.method,
                       "assimilate: etkf or enkf (server-drawn perturbations)")
      ->check(CLI::IsMember({"etkf", "enkf"}))
      ->capture_default_str();
  workload->add_option("--bytes", raw.echo_bytes,
                       "echo: tensor bytes (4096, 4Ki, 64Mi, 256Mi, 1Gi)")
      ->capture_default_str();
  workload->add_flag("--echo-discard", w.echo.discard,
                     "echo: the server replies without the tensor (one direction)");
  workload->add_option("--split", w.echo.split,
                       "echo: send each request as this many calls of bytes/split at once, "
                       "part k on channel k (use --channels >= split); done when all are")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  workload->add_option("--input", raw.input,
                       "inputs inline, uploaded once as resident tensors (handle), or in a "
                       "registered POSIX shared-memory region (shm)")
      ->check(CLI::IsMember({"inline", "handle", "shm"}))
      ->capture_default_str();
  workload->add_option("--output", raw.output,
                       "outputs inline, into the shared-memory region (auto: shm with --input "
                       "shm), or discarded by the server (the rest of the response comes back)")
      ->check(CLI::IsMember({"auto", "inline", "shm", "discard"}))
      ->capture_default_str();
  workload->add_option("--variants", w.variants,
                       "distinct random inputs per operation (fewer if they pass 512 MiB)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  workload->add_option("--seed", w.seed, "random inputs and job choice")->capture_default_str();
  workload->add_option("--chunk-bytes", raw.chunk, "PutTensor/LoadModel bytes per message")
      ->capture_default_str();
}

void AddRunFlags(CLI::App& app, RunConfig& r, RawFlags& raw) {
  auto* run = app.add_option_group("Run");
  run->add_option("--mode", raw.mode,
                  "unary RPCs, or jobs on Submit streams (several in flight each)")
      ->check(CLI::IsMember({"unary", "stream"}))
      ->capture_default_str();
  auto* concurrency_opt =
      run->add_option("--concurrency", raw.concurrency,
                      "closed loop: requests in flight, one level per entry (1,8,64,256)")
          ->capture_default_str();
  auto* rate_opt = run->add_option(
      "--rate", raw.rate, "open loop: requests/s, one level per entry (replaces --concurrency)");
  concurrency_opt->excludes(rate_opt);
  run->add_option("--arrival", raw.arrival, "open loop: constant or poisson inter-arrival times")
      ->check(CLI::IsMember({"constant", "poisson"}))
      ->capture_default_str();
  auto* duration_opt =
      run->add_option("--duration", raw.duration, "measured time per level (10s, 500ms, 2m)")
          ->capture_default_str();
  auto* requests_opt = run->add_option("--requests", r.requests,
                                       "measured requests per level instead of a duration")
                           ->check(CLI::PositiveNumber);
  duration_opt->excludes(requests_opt);
  run->add_option("--warmup", raw.warmup, "warm-up per level, excluded from the figures")
      ->capture_default_str();
  run->add_option("--timeout", raw.timeout, "deadline of each request")->capture_default_str();
  run->add_option("--streams", r.streams_per_channel, "stream mode: Submit streams per channel")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_option("--max-in-flight", r.max_in_flight,
                  "open loop: arrivals beyond this many outstanding are dropped (DROPPED)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  run->add_flag("--compare-echo", r.compare_echo,
                "after each level, Echo with the same payload bytes; prints service/echo");
}

void AddOutputFlags(CLI::App& app, OutputConfig& o, RawFlags& raw) {
  auto* report = app.add_option_group("Output");
  report->add_option("--json", o.json_path, "JSON Lines, one object per level");
  report->add_option("--csv", o.csv_path, "CSV, one row per level (and per op of a mix)");
  report->add_option("--plot", o.plot_path,
                     "PNG of latency (p50, p99) and throughput against concurrency (or rate)");
  report->add_option("--plot-script", o.plot_script, "plot_load.py (default: found next to "
                                                      "the binary or in the source tree)");
  report->add_option("--python", o.python, "interpreter with matplotlib for --plot")
      ->capture_default_str();
  report->add_option("--progress", raw.progress, "live progress line on stderr")
      ->check(CLI::IsMember({"auto", "on", "off"}))
      ->capture_default_str();
  report->add_flag("-q,--quiet", o.quiet, "no table on stdout");
}

// The transport's text flags, parsed; `bad` becomes 2 on an error (printed).
void ApplyTransportFlags(const RawFlags& raw, LoadConfig& config, int& bad) {
  TransportConfig& t = config.transport;
  t.targets = Must(ParseTargets(raw.targets), bad);
  t.max_message_bytes = static_cast<int>(std::min<int64_t>(
      Must(ParseByteSize(raw.max_message), bad), 0x7fffffff));
  t.http2_lookahead_bytes =
      static_cast<int>(std::min<int64_t>(Must(ParseByteSize(raw.lookahead), bad), 0x7fffffff));
  t.http2_max_frame_bytes =
      static_cast<int>(std::min<int64_t>(Must(ParseByteSize(raw.max_frame), bad), 0x7fffffff));
  t.http2_write_buffer_bytes =
      static_cast<int>(std::min<int64_t>(Must(ParseByteSize(raw.write_buffer), bad), 0x7fffffff));
  for (const std::string& a : raw.channel_args) {
    t.extra_args.push_back(Must(ParseChannelArg(a), bad));
  }
  config.connect_timeout = Must(ParseDurationFlag(raw.connect_timeout), bad);
  t.token = Must(client::ResolveToken(raw.token_file), bad);
}

// The workload's text flags, parsed (`bad` as above); 2 (printed) when they contradict each
// other, else 0.
int ApplyWorkloadFlags(const RawFlags& raw, WorkloadConfig& w, int& bad) {
  if (raw.op == "mix") {
    if (raw.mix.empty()) {
      std::fprintf(stderr, "gpucompute-load: --op mix needs --mix op:weight,...\n");
      return 2;
    }
    w.mix = Must(ParseMix(raw.mix), bad);
  } else {
    if (!raw.mix.empty()) {
      std::fprintf(stderr, "gpucompute-load: --mix needs --op mix\n");
      return 2;
    }
    w.mix = {MixEntry{Must(ParseOp(raw.op), bad), 1.0}};
  }
  if (w.echo.split > 1 && (w.mix.size() != 1 || w.mix[0].op != Op::kEcho)) {
    std::fprintf(stderr, "gpucompute-load: --split is for --op echo\n");
    return 2;
  }
  w.dtype = Must(client::ParseComputeDType(raw.dtype), bad);
  w.dense.model_dtype = Must(client::ParseModelDType(raw.model_dtype), bad);
  w.assimilate.method =
      raw.method == "enkf" ? v1::ASSIMILATION_METHOD_ENKF : v1::ASSIMILATION_METHOD_ETKF;
  w.echo.bytes = Must(ParseByteSize(raw.echo_bytes), bad);
  w.input = raw.input == "handle" ? InputPlacement::kHandle
            : raw.input == "shm"    ? InputPlacement::kShm
                                    : InputPlacement::kInline;
  w.output = raw.output == "discard" ? OutputPlacement::kDiscard
             : raw.output == "shm" || (raw.output == "auto" && w.input == InputPlacement::kShm)
                 ? OutputPlacement::kShm
                 : OutputPlacement::kInline;
  w.chunk_bytes = Must(ParseByteSize(raw.chunk), bad);
  if (w.chunk_bytes <= 0) {
    std::fprintf(stderr, "gpucompute-load: --chunk-bytes must be positive\n");
    return 2;
  }
  return 0;
}

// The run's text flags, the same way.
int ApplyRunFlags(const RawFlags& raw, RunConfig& r, int& bad) {
  r.mode = raw.mode == "stream" ? Mode::kStream : Mode::kUnary;
  if (!raw.rate.empty()) {
    r.rates = Must(ParseRateList(raw.rate), bad);
  } else {
    r.concurrency = Must(ParseIntList(raw.concurrency), bad);
  }
  r.arrival = raw.arrival == "poisson" ? Arrival::kPoisson : Arrival::kConstant;
  r.duration = Must(ParseDurationFlag(raw.duration), bad);
  r.warmup = Must(ParseDurationFlag(raw.warmup), bad);
  r.timeout = Must(ParseDurationFlag(raw.timeout), bad);
  if (r.requests == 0 && r.duration <= absl::ZeroDuration()) {
    std::fprintf(stderr, "gpucompute-load: --duration must be positive\n");
    return 2;
  }
  if (r.timeout <= absl::ZeroDuration()) {
    std::fprintf(stderr, "gpucompute-load: --timeout must be positive\n");
    return 2;
  }
  return 0;
}

}  // namespace

int ParseFlags(int argc, char** argv, LoadConfig& config) {
  CLI::App app{"gpucompute-load: load tester of the gpucompute service"};
  app.set_version_flag("--version", "gpucompute-load " GPUCOMPUTE_VERSION);
  app.footer(kFooter);
  app.get_formatter()->column_width(34);
  RawFlags raw;
  AddTransportFlags(app, config, raw);
  AddWorkloadFlags(app, config.workload, raw);
  AddRunFlags(app, config.run, raw);
  AddOutputFlags(app, config.output, raw);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;  // --help: 0; CLI11's own codes (105, ...) become 2
  }
  int bad = 0;
  ApplyTransportFlags(raw, config, bad);
  if (const int code = ApplyWorkloadFlags(raw, config.workload, bad); code != 0) return code;
  if (const int code = ApplyRunFlags(raw, config.run, bad); code != 0) return code;
  config.output.progress = raw.progress == "on"    ? Progress::kOn
                           : raw.progress == "off" ? Progress::kOff
                                                   : Progress::kAuto;
  return bad != 0 ? bad : -1;
}

}  // namespace gpucompute::load
