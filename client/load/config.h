// gpucompute-load's configuration: what to send (workload), how (transport, unary or stream,
// closed or open loop), and the parsers for the flag syntaxes (sizes "64Mi", durations "10s",
// lists "1,8,64", mixes "periodogram:3,dense:1") that main.cc hands CLI11's strings to.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/cpp/credentials.h"
#include "gpucompute/v1/compute.pb.h"

namespace gpucompute::load {

enum class Op { kPeriodogram, kDense, kAssimilate, kEcho };
inline constexpr Op kAllOps[] = {Op::kPeriodogram, Op::kDense, Op::kAssimilate, Op::kEcho};

// "periodogram", "dense", "assimilate", "echo".
absl::string_view OpName(Op op);
absl::StatusOr<Op> ParseOp(absl::string_view name);

enum class Mode { kUnary, kStream };                 // one RPC per request | the Submit stream
enum class InputPlacement { kInline, kHandle, kShm };  // how input tensors travel
// Where outputs come back: inline, into the shared-memory region, or not at all (discard: the
// response keeps everything but the output tensors' payloads, e.g. a periodogram's peaks).
enum class OutputPlacement { kInline, kShm, kDiscard };
enum class Arrival { kConstant, kPoisson };          // open-loop inter-arrival times

absl::string_view ModeName(Mode mode);
absl::string_view InputPlacementName(InputPlacement input);
absl::string_view OutputPlacementName(OutputPlacement output);
absl::string_view ArrivalName(Arrival arrival);

// One weighted entry of --mix.
struct MixEntry {
  Op op = Op::kEcho;
  double weight = 1;
};

// Client channel settings. Zero means gRPC's own default.
struct TransportConfig {
  std::vector<std::string> targets;   // "host:port", "dns:///host:port", "unix:/path", ...
  int channels = 0;                   // distinct channels (TCP connections); 0: one per target
  std::string lb_policy = "round_robin";
  int max_message_bytes = 0x7fffffff;  // send and receive limit of each channel
  int http2_lookahead_bytes = 0;      // grpc.http2.lookahead_bytes: initial stream window
  bool bdp_probe = true;              // grpc.http2.bdp_probe: let gRPC grow windows
  int http2_max_frame_bytes = 0;      // grpc.http2.max_frame_size
  int http2_write_buffer_bytes = 0;   // grpc.http2.write_buffer_size
  // More channel arguments, "key=value" (an integer value is passed as an int).
  std::vector<std::pair<std::string, std::string>> extra_args;
  client::TlsOptions tls;  // TLS or mutual TLS from PEM files (docs/security.md "TLS")
  std::string token;       // bearer token sent with every call; empty: none
};

struct PeriodogramParams {
  int64_t samples = 1000;       // per series
  int64_t frequencies = 1000;   // uniform grid per series
  int64_t series = 1;           // per request
  int32_t top_k = 0;            // highest peaks returned per series (0: none)
};

struct DenseParams {
  int64_t in_features = 1024;
  int64_t out_features = 4096;  // of every layer
  int64_t layers = 1;
  int64_t rows = 1;             // per request
  v1::DType model_dtype = v1::BFLOAT16;  // inputs travel in this dtype too
  // A model the server already holds (e.g. from its --model_manifest): nothing is loaded or
  // unloaded, and in_features and model_dtype must be its. Empty: a model of the shape above
  // is loaded for the run.
  std::string model;
};

struct AssimilateParams {
  int64_t n = 40;               // state size
  int64_t m = 40;               // observations
  int64_t members = 20;         // ensemble size N
  int64_t problems = 1;         // per request
  v1::AssimilationMethod method = v1::ASSIMILATION_METHOD_ETKF;
};

struct EchoParams {
  int64_t bytes = 4096;         // tensor bytes (UINT8)
  bool discard = false;         // the server replies without the tensor
  int split = 1;                // sent as this many Echo calls of bytes / split, in parallel
};

struct WorkloadConfig {
  std::vector<MixEntry> mix;    // --op X is a mix of one
  PeriodogramParams periodogram;
  DenseParams dense;
  AssimilateParams assimilate;
  EchoParams echo;
  v1::DType dtype = v1::FLOAT64;  // periodogram and assimilate: compute and wire dtype
  InputPlacement input = InputPlacement::kInline;
  OutputPlacement output = OutputPlacement::kInline;
  int variants = 4;             // distinct random inputs per op (fewer past kMaxPreparedBytes)
  uint64_t seed = 1;
  int64_t chunk_bytes = (int64_t{4} << 20) - 1024;  // PutTensor / LoadModel chunk size
  std::string client_id;        // x-gpucompute-client on every call, when set
};

// Inputs prepared for one run stay under about this many bytes (fewer variants of large ops;
// at least one each).
inline constexpr int64_t kMaxPreparedBytes = int64_t{512} << 20;

struct RunConfig {
  Mode mode = Mode::kUnary;
  std::vector<int> concurrency;   // closed loop: one level per entry
  std::vector<double> rates;      // open loop (requests/s): one level per entry
  Arrival arrival = Arrival::kConstant;
  absl::Duration duration = absl::Seconds(10);
  int64_t requests = 0;           // > 0: this many measured requests per level, not a duration
  absl::Duration warmup = absl::Seconds(2);
  absl::Duration timeout = absl::Seconds(30);  // each call's (or stream job's) deadline
  int streams_per_channel = 1;    // stream mode
  int64_t max_in_flight = 100000; // open loop: arrivals beyond this are dropped, not sent
  bool compare_echo = false;
};

bool IsOpenLoop(const RunConfig& run);

enum class Progress { kAuto, kOn, kOff };  // auto: when stderr is a terminal

struct OutputConfig {
  std::string json_path;     // JSON Lines, one object per level
  std::string csv_path;
  std::string plot_path;     // PNG by plot_load.py (reads the JSON; a temporary one if unset)
  std::string plot_script;   // empty: next to the binary, else the source tree's
  std::string python = "/usr/bin/python3";
  Progress progress = Progress::kAuto;
  bool quiet = false;        // no table on stdout
};

struct LoadConfig {
  TransportConfig transport;
  WorkloadConfig workload;
  RunConfig run;
  OutputConfig output;
  absl::Duration connect_timeout = absl::Seconds(10);
};

// "4096", "4Ki", "64Mi", "1.5Gi", "4KiB", "10k", "2M" (k/M/G decimal, Ki/Mi/Gi/Ti binary, an
// optional trailing B). INVALID_ARGUMENT for anything else, negative or overflowing sizes.
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);
// "1.5 MiB" style, for reports.
std::string FormatBytes(double bytes);

// "10s", "500ms", "2m", "1h30m" (absl::ParseDuration), or a bare number of seconds.
absl::StatusOr<absl::Duration> ParseDurationFlag(absl::string_view text);

// "1,8,64,256": positive integers.
absl::StatusOr<std::vector<int>> ParseIntList(absl::string_view text);
// "100,2500.5": positive finite numbers.
absl::StatusOr<std::vector<double>> ParseRateList(absl::string_view text);

// "periodogram:3,dense:1,echo" (a missing weight is 1). Weights finite and >= 0, not all 0;
// each op at most once.
absl::StatusOr<std::vector<MixEntry>> ParseMix(absl::string_view text);

// "a:1,b:2" -> {"a:1", "b:2"}; empty entries are an error.
absl::StatusOr<std::vector<std::string>> ParseTargets(absl::string_view text);

// "key=value" -> {key, value}.
absl::StatusOr<std::pair<std::string, std::string>> ParseChannelArg(absl::string_view text);

}  // namespace gpucompute::load
