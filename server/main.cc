// gpucompute-server: flags, logging, signal handling; the server itself is server/service.
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <grpc/support/log.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/cli/model_manifest.h"
#include "server/accept_guard.h"
#include "server/allocator.h"
#include "common/json_log.h"
#include "common/memory_limit.h"
#include "common/version.h"
#include "server/front/front_server.h"
#include "server/front/request_route.h"
#include "server/runtime/backend.h"
#include "server/server.h"
#include "server/transport/caller.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, address, "0.0.0.0:50051", "HOST:PORT to listen on; port 0 picks a free one");
ABSL_FLAG(std::string, port_file, "", "if set, the chosen port is written here once listening");
ABSL_FLAG(int, metrics_port, -1,
          "Prometheus metrics at http://HOST:PORT/metrics (HOST from --address); -1: off, "
          "0 picks a free port");
ABSL_FLAG(bool, metrics_model_names, false,
          "label gpucompute_model_bytes by model name (names are the clients' data and /metrics "
          "asks for no token: only where everyone who can reach it may see them); else one total");
ABSL_FLAG(std::string, metrics_port_file, "",
          "if set, the metrics endpoint's port is written here once listening (0: no endpoint)");
ABSL_FLAG(std::string, backend, "auto", "auto | cuda | cpu (auto: CUDA if a device is visible)");
ABSL_FLAG(std::vector<std::string>, model_manifest, {},
          "NAME=PATH.json[,NAME=PATH.json...]: dense models loaded before the server listens "
          "(the manifest of `gpucompute model load --manifest`: layers of .npy files, paths "
          "relative to it); in worker mode every worker loads them, restarted ones too");
ABSL_FLAG(int, streams, 4, "CUDA streams per device");
ABSL_FLAG(int64_t, staging_bytes, int64_t{8} << 20,
          "page-locked staging each CUDA stream slot holds per direction (in, out), pinned at "
          "start; a batch that needs more grows it on its own path (cudaHostAlloc, once per new "
          "high-water mark): set it to the largest batch expected to keep that off every "
          "request (1 MiB to 64 GiB)");
ABSL_FLAG(std::string, kernel_cache_dir, "",
          "on-disk NVRTC kernel cache (default: $XDG_CACHE_HOME or ~/.cache /gpucompute/kernels); "
          "an absolute path without '..', created 0700 if missing, not a symlink, owned by the "
          "server's user and not group/world-writable; otherwise a warning is logged and kernels "
          "are cached in memory only");
ABSL_FLAG(int, max_batch_size, 64, "most requests coalesced into one launch");
ABSL_FLAG(int64_t, max_queue_delay_us, 200, "longest a request waits for its batch to fill (µs)");
ABSL_FLAG(int, max_queue_depth, 1024, "queued requests before RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_request_bytes, int64_t{1} << 30, "largest request message accepted");
ABSL_FLAG(int64_t, upload_idle_timeout_s, 60,
          "a LoadModel stream that sends nothing for this many seconds is cancelled (its name "
          "and reservation are released)");
ABSL_FLAG(int64_t, memory_budget_bytes, int64_t{1} << 30,
          "host memory the work in progress may hold, server-wide (the periodogram's decoded "
          "inputs with their working copies; every operation's outputs and copies of "
          "shared-memory inputs); a request over it is RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, server_memory_bytes, -1,
          "host memory the resident tensors and the work in progress may hold together, in bytes "
          "(-1: three quarters of the memory the server may use: the host's, or its container's "
          "limit); --memory_budget_bytes and --tensor_store_bytes are parts of it");
ABSL_FLAG(int64_t, pinned_tensor_bytes, -1,
          "page-locked host memory resident tensors of 1 MiB or more may live in, so that a GPU "
          "reads them by DMA where they are (-1: an eighth of --server_memory_bytes; 0: none, "
          "plain memory); beyond it tensors live in plain memory");
ABSL_FLAG(int64_t, max_connections_per_peer, -1,
          "TCP connections one peer address may hold open; more are closed as they are "
          "accepted (-1: half the open-descriptor limit, as it is at each connection; 0: no "
          "limit)");
ABSL_FLAG(int64_t, max_connections, -1,
          "TCP connections all peers together may hold open (-1: the open-descriptor limit "
          "less a quarter of it, at most 256, kept for files and shared memory; 0: no limit)");
ABSL_FLAG(double, memory_budget_share, -1,
          "the part of --memory_budget_bytes that one caller's work may hold (0 < share <= 1), so "
          "that one caller cannot take all of it; default 0.5 with --auth_token_file (callers "
          "are then their tokens), else 1 (callers name themselves)");
ABSL_FLAG(int64_t, max_response_bytes, int64_t{1} << 30,
          "largest response message sent; larger inline outputs are RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_series_per_request, 100000, "series per periodogram request");
ABSL_FLAG(int64_t, max_samples_per_series, int64_t{1} << 24, "samples per series");
ABSL_FLAG(int64_t, max_frequencies_per_series, int64_t{1} << 26, "frequencies per series");
ABSL_FLAG(int64_t, max_pairs_per_request, int64_t{1} << 40, "sample x frequency pairs per request");
ABSL_FLAG(int64_t, max_bootstrap_samples, int64_t{1} << 26, "resampled samples (n_bootstraps x samples) per periodogram request");
ABSL_FLAG(int, dense_max_batch_size, gpucompute::DefaultDenseScheduling().max_batch_size, "most Dense requests coalesced into one pass (1: no batching)");
ABSL_FLAG(int64_t, dense_max_batch_rows, gpucompute::DefaultDenseScheduling().max_batch_cost, "most rows coalesced into one pass through a model");
ABSL_FLAG(int64_t, dense_max_queue_delay_us,
          absl::ToInt64Microseconds(gpucompute::DefaultDenseScheduling().max_queue_delay), "longest a Dense request waits for its batch (µs)");
ABSL_FLAG(int, dense_max_queue_depth, gpucompute::DefaultDenseScheduling().max_queue_depth, "queued Dense requests before RESOURCE_EXHAUSTED");
ABSL_FLAG(int64_t, max_model_bytes, gpucompute::DenseLimits{}.max_model_bytes, "stored bytes of one dense model");
ABSL_FLAG(int, max_models, gpucompute::DenseLimits{}.max_models, "dense models loaded at once");
ABSL_FLAG(int, max_layers, gpucompute::DenseLimits{}.max_layers, "layers of one dense model");
ABSL_FLAG(int64_t, max_rows_per_request, gpucompute::DenseLimits{}.max_rows_per_request, "rows of one Dense request");
ABSL_FLAG(int64_t, assimilate_max_problems, gpucompute::assimilate::Limits{}.max_problems_per_request,
          "problems of one Assimilate request");
ABSL_FLAG(int64_t, assimilate_max_members, gpucompute::assimilate::Limits{}.max_members,
          "ensemble members N of an Assimilate problem");
ABSL_FLAG(int64_t, assimilate_max_covariance_obs, gpucompute::assimilate::Limits{}.max_covariance_obs,
          "largest m of a full observation-error covariance or of the observation-space form");
ABSL_FLAG(int64_t, assimilate_max_letkf_candidates, gpucompute::assimilate::Limits{}.max_letkf_candidates,
          "candidate (state variable, observation) pairs of one LETKF problem: the observations in the "
          "binning cells around each variable, which bound its cost");
ABSL_FLAG(int, assimilate_max_batch_size, gpucompute::DefaultAssimilateScheduling().max_batch_size,
          "most Assimilate requests coalesced into one launch (1: no batching)");
ABSL_FLAG(int64_t, assimilate_max_queue_delay_us,
          absl::ToInt64Microseconds(gpucompute::DefaultAssimilateScheduling().max_queue_delay),
          "longest an Assimilate request waits for its batch (µs)");
ABSL_FLAG(int, assimilate_max_queue_depth, gpucompute::DefaultAssimilateScheduling().max_queue_depth,
          "queued Assimilate requests before RESOURCE_EXHAUSTED");
ABSL_FLAG(int, stream_max_jobs_in_flight, gpucompute::StreamLimits{}.max_jobs_in_flight,
          "jobs of one Submit stream running at once (the next is read when one finishes)");
ABSL_FLAG(std::vector<std::string>, grpc_arg, {},
          "extra gRPC server channel arguments, KEY=VALUE[,KEY=VALUE...] (integers are passed as "
          "integers), e.g. grpc.http2.lookahead_bytes=16777216");
ABSL_FLAG(int64_t, tensor_store_bytes, -1,
          "all clients' resident tensors together, in bytes (-1: half the memory the server may "
          "use: the host's, or its container's limit)");
ABSL_FLAG(int64_t, tensor_quota_bytes, gpucompute::TensorStoreOptions{}.max_bytes_per_client,
          "bytes of resident tensors (PutTensor, kept outputs) one client may hold");
ABSL_FLAG(int, tensor_quota_count, gpucompute::TensorStoreOptions{}.max_tensors_per_client,
          "resident tensors one client may hold");
ABSL_FLAG(double, tensor_idle_expiry_s,
          absl::ToDoubleSeconds(gpucompute::TensorStoreOptions{}.idle_expiry),
          "a resident tensor unused this long (s) is freed; 0: never");
ABSL_FLAG(int, max_shared_memory_regions, gpucompute::SharedMemoryRegistry::kDefaultMaxRegions,
          "shared-memory regions of all callers together (each holds a descriptor and a mapping; "
          "never more than an eighth of the open-descriptor limit)");
ABSL_FLAG(bool, allow_shared_memory, false,
          "let clients on this node register POSIX shared-memory regions (RegisterSharedMemory) "
          "for inputs and outputs");
// Security (docs/security.md).
ABSL_FLAG(std::string, tls_cert_file, "",
          "server certificate chain (PEM); with --tls_key_file the service port speaks TLS");
ABSL_FLAG(std::string, tls_key_file, "", "private key (PEM) of --tls_cert_file");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "CA certificates (PEM): clients must present a certificate signed by one (mutual TLS)");
ABSL_FLAG(std::string, auth_token_file, "",
          "bearer tokens, one per line: NAME TOKEN [MAX_IN_FLIGHT] (blank lines and lines "
          "starting with # ignored; names and tokens unique; tokens 16+ printable characters). "
          "Every call but ServerInfo (and the health and reflection services) then needs "
          "metadata 'authorization: Bearer TOKEN'; NAME is the caller's identity");
ABSL_FLAG(double, auth_token_reload_s, 5,
          "check --auth_token_file this often (s) and reload it when its modification time, size "
          "or inode changed (SIGHUP reloads it at once); a file that does not parse is logged and "
          "the tokens in use stay; 0: only on SIGHUP");
ABSL_FLAG(int, tls_reload_s, 60,
          "re-read --tls_cert_file, --tls_key_file and --tls_client_ca_file this often (s); new "
          "handshakes use new contents (replace the files atomically); 0: read once at start-up");
ABSL_FLAG(int, auth_default_max_in_flight, 64,
          "calls (and Submit jobs) of one token running at once, for tokens that set none; every "
          "call but ServerInfo and health counts, management calls included");
ABSL_FLAG(int, health_port, -1,
          "plaintext port serving only grpc.health.v1 (for Kubernetes gRPC probes when the "
          "service port needs TLS or tokens); -1: off, 0 picks a free port");
ABSL_FLAG(std::string, health_port_file, "",
          "if set, the health port is written here once listening (0: no health port)");
ABSL_FLAG(int, cpu_threads, 0, "CPU backend worker threads (0: all cores)");
ABSL_FLAG(int, completion_threads, 0,
          "threads that finish calls (unpack results, build and send replies); 0: two per "
          "visible GPU plus two");
ABSL_FLAG(bool, debug_sync, false, "synchronise after every kernel launch (pins faults)");
ABSL_FLAG(std::string, log_level, "info", "trace | debug | info | warn | error");
ABSL_FLAG(std::string, log_format, "text",
          "text | json: one JSON object per line (time, level, thread, worker, msg) for log "
          "collectors; worker mode's workers log the same way");
ABSL_FLAG(std::string, log_calls, "none",
          "none | errors | all: log each failed (or every) call, one line with op, status, "
          "duration, caller and, when the call carries W3C traceparent metadata, its trace_id "
          "and span_id (JSON fields with --log_format=json)");
ABSL_FLAG(bool, replicate_models, false,
          "with several GPUs, load every dense model on each of them (default: on the one with the "
          "most free memory)");
ABSL_FLAG(int64_t, grpc_memory_quota_bytes, 0,
          "memory gRPC may hold for calls in all (a ResourceQuota: past it, windows shrink and "
          "new calls are refused); 0: half of the host's physical memory");
ABSL_FLAG(int, max_concurrent_streams, 1024, "concurrent calls per client connection");
ABSL_FLAG(double, listener_probe_s, 5,
          "how often the service port is probed; three unanswered probes in a row (gRPC stops "
          "accepting when every descriptor is taken) turn health NOT_SERVING (0: no probe)");
ABSL_FLAG(int64_t, max_connection_idle_s, 300,
          "a client connection with no call for this many seconds is closed (0: never)");
ABSL_FLAG(double, shutdown_grace_s, 30,
          "on SIGTERM, how long in-flight calls may take to finish before they are cancelled (s)");
ABSL_FLAG(int, workers, 0,
          "worker mode: this process only routes calls (and does TLS, tokens, health, metrics) "
          "to this many worker processes, each a gpucompute-server of its own, so that a sticky "
          "CUDA error ends one worker (which is restarted) while the other GPUs keep serving; "
          "-1: one worker per visible GPU; worker i gets GPU i (mod the GPUs visible); 0: one "
          "process for all GPUs");
ABSL_FLAG(std::string, worker_socket_dir, "",
          "worker mode: directory for the workers' Unix sockets (created 0700; default a new "
          "one under $TMPDIR or /tmp)");
ABSL_FLAG(int, worker_channels, gpucompute::front::WorkerPoolOptions{}.channels_per_worker,
          "worker mode: HTTP/2 connections from the front to each worker (calls spread over them)");
ABSL_FLAG(std::string, worker_connections, "proxy",
          "worker mode: proxy (the front answers every call, passing it to a worker: TLS, tokens, "
          "quotas, merged lists) or handoff (the front accepts each client connection and hands "
          "it to a worker, round robin, which serves it whole: the calls skip the front; "
          "plaintext without tokens only; see docs/server.md \"Worker mode\")");
ABSL_FLAG(int, worker_index, -1, "INTERNAL: set by the worker-mode front on its workers");
ABSL_FLAG(int, handoff_fd, -1,
          "INTERNAL: set by the worker-mode front (--worker_connections=handoff) on its workers");
ABSL_FLAG(std::string, front_address, "",
          "INTERNAL: set by the worker-mode front (--worker_connections=handoff) on its workers");
ABSL_FLAG(int, inject_sticky_fault_device, -1,
          "TESTS ONLY: GPU index that runs a trapping kernel (a sticky fault) after "
          "--inject_sticky_fault_after_batches of its batches; -1: never");
ABSL_FLAG(int64_t, inject_sticky_fault_after_batches, 1,
          "TESTS ONLY: see --inject_sticky_fault_device");

namespace {

std::string DefaultKernelCacheDir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/gpucompute/kernels";
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    return std::string(home) + "/.cache/gpucompute/kernels";
  }
  return "/tmp/gpucompute-kernels";
}

// Writes `port` to `path` (if set) atomically: readers never see a partial file.
void WritePortFile(const std::string& path, int port) {
  if (path.empty()) return;
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << port << "\n";
  std::rename(tmp.c_str(), path.c_str());
}

// Runs a started server (the one-process Server or the worker-mode front) until SIGTERM or
// SIGINT, reloading the token file on SIGHUP, then drains it. With `device_lost` (a worker of
// the front) it also ends, with code 3, once that says the GPU is lost, so that the front
// starts a new worker.
template <typename S>
int Serve(absl::StatusOr<std::unique_ptr<S>> server, sigset_t signals,
          bool (*device_lost)(const S&)) {
  if (!server.ok()) {
    spdlog::critical("could not start: {}", server.status().ToString());
    return 1;
  }
  WritePortFile(absl::GetFlag(FLAGS_metrics_port_file), (*server)->metrics_port());
  WritePortFile(absl::GetFlag(FLAGS_health_port_file), (*server)->health_port());
  // Last: whoever waits for the port file finds the other port files already there.
  WritePortFile(absl::GetFlag(FLAGS_port_file), (*server)->port());

  int sig = 0;
  while (true) {
    if (device_lost != nullptr) {
      const timespec tick{0, 50 * 1000 * 1000};
      sig = sigtimedwait(&signals, nullptr, &tick);
      if (sig < 0) {
        if (device_lost(**server)) {
          spdlog::critical("a device fault ended CUDA in this worker: exiting so that the front "
                           "starts a new one");
          (*server)->Shutdown(absl::Seconds(2));
          server->reset();
          return 3;
        }
        continue;
      }
    } else if (sigwait(&signals, &sig) != 0) {
      break;
    }
    if (sig != SIGHUP) break;
    if (absl::GetFlag(FLAGS_auth_token_file).empty()) {
      spdlog::info("SIGHUP: no --auth_token_file to reload");
    } else {
      spdlog::info("SIGHUP: reloading the token file");
      (void)(*server)->ReloadTokens();  // logs the outcome
    }
  }
  spdlog::info("received {}: stopping (draining in-flight work)", sig == SIGTERM ? "SIGTERM" : "SIGINT");
  (*server)->Shutdown(absl::Seconds(std::max(0.0, absl::GetFlag(FLAGS_shutdown_grace_s))));
  server->reset();
  return 0;
}

// The CUDA_VISIBLE_DEVICES value of each of `count` GPUs: the entries of the front's own
// CUDA_VISIBLE_DEVICES when it is set, else their indices.
std::vector<std::string> VisibleDeviceIds(int count) {
  std::vector<std::string> ids;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible != nullptr) {
    for (absl::string_view id : absl::StrSplit(visible, ',', absl::SkipEmpty())) ids.emplace_back(id);
  }
  if (static_cast<int>(ids.size()) < count) {
    ids.clear();
    for (int i = 0; i < count; ++i) ids.push_back(absl::StrCat(i));
  }
  ids.resize(count);
  return ids;
}

// Worker mode's front (--workers): starts the workers, proxies calls to them until SIGTERM.
// One --model_manifest entry, NAME=PATH.json: the manifest read and built into the messages of
// a LoadModel stream, stored in the manifest's "dtype" (default bfloat16).
absl::StatusOr<gpucompute::StartupModel> ReadStartupModel(const std::string& entry) {
  namespace client = gpucompute::client;
  const size_t eq = entry.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
    return absl::InvalidArgumentError(absl::StrCat("--model_manifest ", entry, ": expected NAME=PATH.json"));
  }
  const std::string name = entry.substr(0, eq), path = entry.substr(eq + 1);
  auto build = [&]() -> absl::StatusOr<client::ModelUpload> {
    absl::StatusOr<gpucompute::cli::ModelManifest> manifest = gpucompute::cli::ReadModelManifest(path);
    if (!manifest.ok()) return manifest.status();
    absl::StatusOr<gpucompute::v1::DType> dtype =
        client::ParseModelDType(manifest->dtype.value_or("bfloat16"));
    if (!dtype.ok()) return dtype.status();
    const bool allow_tf32 = manifest->allow_tf32.value_or(false);
    return gpucompute::cli::BuilderOf(name, *std::move(manifest), *dtype, allow_tf32).Build();
  };
  absl::StatusOr<client::ModelUpload> upload = build();
  if (!upload.ok()) {
    return absl::Status(upload.status().code(), absl::StrCat("--model_manifest ", entry, ": ",
                                                             upload.status().message()));
  }
  gpucompute::StartupModel model;
  model.source = absl::StrCat("--model_manifest ", entry);
  model.header = std::move(upload->header);
  for (client::ModelUpload::TensorData& t : upload->tensors) {
    gpucompute::v1::TensorChunk& chunk = model.chunks.emplace_back();
    chunk.set_layer(t.layer);
    chunk.set_tensor(t.tensor);
    chunk.set_data(std::move(t.data));
  }
  return model;
}

int RunFront(int argc, char** argv, const gpucompute::ServerConfig& server_config,
             sigset_t signals, std::vector<std::string> startup_models) {
  namespace front = gpucompute::front;
  front::FrontConfig config;
  config.address = server_config.address;
  config.connections = server_config.connections;
  config.tls = server_config.tls;
  config.auth_token_file = server_config.auth_token_file;
  config.auth_default_max_in_flight = server_config.auth_default_max_in_flight;
  config.auth_token_reload_interval = server_config.auth_token_reload_interval;
  config.health_port = server_config.health_port;
  config.metrics_port = server_config.metrics_port;
  config.max_request_bytes = server_config.limits.max_request_bytes;
  config.max_concurrent_streams = server_config.max_concurrent_streams;
  config.grpc_memory_quota_bytes = server_config.grpc_memory_quota_bytes;
  config.grpc_args = server_config.grpc_args;
  config.max_connection_idle = server_config.max_connection_idle;
  config.listener_probe_period = server_config.listener_probe_period;
  const std::string connections = absl::GetFlag(FLAGS_worker_connections);
  if (connections != "proxy" && connections != "handoff") {
    spdlog::critical("--worker_connections={}: expected proxy or handoff", connections);
    return 2;
  }
  if (connections == "handoff" && (config.tls.enabled() || !config.auth_token_file.empty())) {
    // The workers add the connections to their servers as they are: no TLS handshake, and
    // their calls skip the front's token checks.
    spdlog::critical("--worker_connections=handoff serves plaintext connections without tokens: "
                     "leave out --tls_cert_file and --auth_token_file, or use proxy");
    return 2;
  }

  const std::string backend = absl::GetFlag(FLAGS_backend);
  const int gpus = backend == "cpu" ? 0 : gpucompute::VisibleCudaDeviceCount();
  int workers = absl::GetFlag(FLAGS_workers);
  if (workers < 0) {
    if (gpus == 0) {
      spdlog::critical("--workers=-1 (one per GPU) but no GPU is visible; give a number of "
                       "workers for the CPU backend");
      return 1;
    }
    workers = gpus;
  }
  const std::vector<std::string> ids = VisibleDeviceIds(gpus);
  front::WorkerPoolOptions& pool = config.workers;
  pool.workers = workers;
  char exe[4096];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) {
    spdlog::critical("cannot find the server's own binary (/proc/self/exe)");
    return 1;
  }
  pool.executable.assign(exe, static_cast<size_t>(n));
  pool.base_args.assign(argv + 1, argv + argc);
  pool.startup_models = std::move(startup_models);
  // The server's memory is the pod's: each worker gets its share of it (after the front's own
  // arguments, so this wins).
  const int64_t server_memory = gpucompute::ServerMemoryBytes(absl::GetFlag(FLAGS_server_memory_bytes));
  pool.base_args.push_back(absl::StrCat("--server_memory_bytes=", server_memory / workers));
  if (const int64_t pinned = absl::GetFlag(FLAGS_pinned_tensor_bytes); pinned > 0) {
    pool.base_args.push_back(absl::StrCat("--pinned_tensor_bytes=", pinned / workers));
  }
  for (int i = 0; i < workers; ++i) {
    pool.devices.push_back(gpus > 0 ? ids[i % gpus] : "");
    config.device_index_of_worker.push_back(gpus > 0 ? i % gpus : -1);
  }
  pool.stop_grace = absl::Seconds(std::max(0.0, absl::GetFlag(FLAGS_shutdown_grace_s))) + absl::Seconds(5);
  pool.inject_fault_worker = absl::GetFlag(FLAGS_inject_sticky_fault_device);
  pool.inject_fault_after_batches = absl::GetFlag(FLAGS_inject_sticky_fault_after_batches);
  pool.channels_per_worker = std::max(1, absl::GetFlag(FLAGS_worker_channels));
  pool.handoff = absl::GetFlag(FLAGS_worker_connections) == "handoff";
  pool.socket_dir = absl::GetFlag(FLAGS_worker_socket_dir);
  if (pool.socket_dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp", "/gpucompute-workers-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      spdlog::critical("cannot create a directory for the workers' sockets ({}): {}", pattern,
                       std::strerror(errno));
      return 1;
    }
    pool.socket_dir = pattern;
  }

  return Serve<front::FrontServer>(front::FrontServer::Start(std::move(config)), signals, nullptr);
}

// Raises the soft limit on open descriptors to the hard one: every connection holds one, and
// gRPC stops listening for good when accept() finds none left (ListenerProbe reports that).
void RaiseDescriptorLimit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return;
  if (limit.rlim_cur < limit.rlim_max) {
    const rlim_t was = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
      spdlog::info("open descriptors: limit raised from {} to {}", was, limit.rlim_cur);
      return;
    }
  }
  spdlog::info("open descriptors: limit {}", limit.rlim_cur);
}

// Bounds the TCP connections per peer and in all (accept_guard.h), so that neither one peer nor
// all of them can take the descriptors gRPC's listener needs.
gpucompute::PeerConnections* LimitConnections() {
  gpucompute::PeerConnectionLimits limits;
  limits.per_peer = absl::GetFlag(FLAGS_max_connections_per_peer);
  limits.total = absl::GetFlag(FLAGS_max_connections);
  static gpucompute::PeerConnections table(limits);  // for the life of the process
  gpucompute::InstallAcceptGuard(&table);
  const gpucompute::PeerConnectionLimits now = table.limits();
  spdlog::info("TCP connections: at most {} per peer, {} in all (0: no limit; the defaults follow "
               "the descriptor limit)", now.per_peer, now.total);
  return &table;
}

}  // namespace

// The log level and format (--log_level, --log_format): false (after saying why) for a format
// it does not know; `json_log` tells which was chosen.
bool SetUpLogging(bool& json_log) {
  spdlog::set_level(spdlog::level::from_str(absl::GetFlag(FLAGS_log_level)));
  const std::string log_format = absl::GetFlag(FLAGS_log_format);
  if (log_format != "text" && log_format != "json") {
    spdlog::critical("--log_format={}: expected text or json", log_format);
    return false;
  }
  json_log = log_format == "json";
  if (json_log) {
    spdlog::set_formatter(std::make_unique<gpucompute::JsonLogFormatter>());
    // gRPC's own lines (errors unless GRPC_VERBOSITY says more) through spdlog too, so that
    // every line is JSON.
    gpr_set_log_function([](gpr_log_func_args* args) {
      const spdlog::level::level_enum level =
          args->severity == GPR_LOG_SEVERITY_ERROR  ? spdlog::level::err
          : args->severity == GPR_LOG_SEVERITY_INFO ? spdlog::level::info
                                                    : spdlog::level::debug;
      spdlog::log(level, "grpc {}:{}: {}", args->file, args->line, args->message);
    });
  }
  return true;
}

// The server's configuration from its flags; INVALID_ARGUMENT naming the flag for a value it
// refuses (a model manifest that does not load included).
absl::StatusOr<gpucompute::ServerConfig> ConfigFromFlags() {
  gpucompute::ServerConfig config;
  config.address = absl::GetFlag(FLAGS_address);
  config.backend.kind = absl::GetFlag(FLAGS_backend);
  config.backend.streams_per_device = absl::GetFlag(FLAGS_streams);
  config.backend.staging_bytes = absl::GetFlag(FLAGS_staging_bytes);
  if (config.backend.staging_bytes < (int64_t{1} << 20) || config.backend.staging_bytes > (int64_t{64} << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("--staging_bytes=", config.backend.staging_bytes,
                                                   ": must be between 1 MiB and 64 GiB"));
  }
  config.backend.kernel_cache_dir = absl::GetFlag(FLAGS_kernel_cache_dir).empty()
                                        ? DefaultKernelCacheDir()
                                        : absl::GetFlag(FLAGS_kernel_cache_dir);
  config.backend.cpu_threads = absl::GetFlag(FLAGS_cpu_threads);
  const std::string log_calls = absl::GetFlag(FLAGS_log_calls);
  if (log_calls == "errors") {
    config.call_log = gpucompute::CallLog::kErrors;
  } else if (log_calls == "all") {
    config.call_log = gpucompute::CallLog::kAll;
  } else if (log_calls != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("--log_calls=", log_calls, ": expected none, errors or all"));
  }
  config.backend.debug_sync = absl::GetFlag(FLAGS_debug_sync);
  config.backend.replicate_models = absl::GetFlag(FLAGS_replicate_models);
  config.backend.pinned_tensor_bytes = absl::GetFlag(FLAGS_pinned_tensor_bytes);
  config.grpc_memory_quota_bytes = absl::GetFlag(FLAGS_grpc_memory_quota_bytes);
  config.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  config.max_connection_idle = absl::Seconds(std::max<int64_t>(0, absl::GetFlag(FLAGS_max_connection_idle_s)));
  config.listener_probe_period = absl::Seconds(std::max(0.0, absl::GetFlag(FLAGS_listener_probe_s)));
  config.backend.inject_fault_device = absl::GetFlag(FLAGS_inject_sticky_fault_device);
  config.backend.inject_fault_after_batches = absl::GetFlag(FLAGS_inject_sticky_fault_after_batches);
  config.scheduler.max_batch_size = std::max(1, absl::GetFlag(FLAGS_max_batch_size));
  config.scheduler.max_queue_delay = absl::Microseconds(absl::GetFlag(FLAGS_max_queue_delay_us));
  config.scheduler.max_queue_depth = std::max(1, absl::GetFlag(FLAGS_max_queue_depth));
  config.limits.max_request_bytes = absl::GetFlag(FLAGS_max_request_bytes);
  config.limits.memory_budget_bytes = absl::GetFlag(FLAGS_memory_budget_bytes);
  config.limits.server_memory_bytes = absl::GetFlag(FLAGS_server_memory_bytes);
  config.limits.memory_budget_share = absl::GetFlag(FLAGS_memory_budget_share);
  if (config.limits.memory_budget_share < 0) {
    config.limits.memory_budget_share = absl::GetFlag(FLAGS_auth_token_file).empty() ? 1.0 : 0.5;
  }
  if (!(config.limits.memory_budget_share > 0 && config.limits.memory_budget_share <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--memory_budget_share ", config.limits.memory_budget_share, ": must be > 0 and <= 1"));
  }
  config.limits.upload_idle_timeout = absl::Seconds(std::max<int64_t>(1, absl::GetFlag(FLAGS_upload_idle_timeout_s)));
  config.limits.max_response_bytes = absl::GetFlag(FLAGS_max_response_bytes);
  config.limits.max_series_per_request = absl::GetFlag(FLAGS_max_series_per_request);
  config.limits.max_samples_per_series = absl::GetFlag(FLAGS_max_samples_per_series);
  config.limits.max_frequencies_per_series = absl::GetFlag(FLAGS_max_frequencies_per_series);
  config.limits.max_pairs_per_request = absl::GetFlag(FLAGS_max_pairs_per_request);
  config.limits.max_bootstrap_samples = absl::GetFlag(FLAGS_max_bootstrap_samples);
  config.dense_scheduler.max_batch_size = std::max(1, absl::GetFlag(FLAGS_dense_max_batch_size));
  config.dense_scheduler.max_batch_cost = std::max<int64_t>(1, absl::GetFlag(FLAGS_dense_max_batch_rows));
  config.dense_scheduler.max_queue_delay = absl::Microseconds(absl::GetFlag(FLAGS_dense_max_queue_delay_us));
  config.dense_scheduler.max_queue_depth = std::max(1, absl::GetFlag(FLAGS_dense_max_queue_depth));
  config.limits.dense.max_model_bytes = absl::GetFlag(FLAGS_max_model_bytes);
  config.limits.dense.max_models = std::max(1, absl::GetFlag(FLAGS_max_models));
  config.limits.dense.max_layers = std::max(1, absl::GetFlag(FLAGS_max_layers));
  config.limits.dense.max_rows_per_request = absl::GetFlag(FLAGS_max_rows_per_request);
  config.limits.assimilate.max_problems_per_request = absl::GetFlag(FLAGS_assimilate_max_problems);
  config.limits.assimilate.max_members = std::max<int64_t>(2, absl::GetFlag(FLAGS_assimilate_max_members));
  config.limits.assimilate.max_covariance_obs = absl::GetFlag(FLAGS_assimilate_max_covariance_obs);
  config.limits.assimilate.max_letkf_candidates = absl::GetFlag(FLAGS_assimilate_max_letkf_candidates);
  config.assimilate_scheduler.max_batch_size = std::max(1, absl::GetFlag(FLAGS_assimilate_max_batch_size));
  config.assimilate_scheduler.max_queue_delay =
      absl::Microseconds(absl::GetFlag(FLAGS_assimilate_max_queue_delay_us));
  config.assimilate_scheduler.max_queue_depth = std::max(1, absl::GetFlag(FLAGS_assimilate_max_queue_depth));
  config.limits.stream.max_jobs_in_flight = std::max(1, absl::GetFlag(FLAGS_stream_max_jobs_in_flight));
  config.completion_threads = std::max(0, absl::GetFlag(FLAGS_completion_threads));
  config.metrics_port = std::max(-1, absl::GetFlag(FLAGS_metrics_port));
  config.metrics_model_names = absl::GetFlag(FLAGS_metrics_model_names);
  config.tensors.max_bytes_per_client = std::max<int64_t>(0, absl::GetFlag(FLAGS_tensor_quota_bytes));
  config.tensors.max_total_bytes = absl::GetFlag(FLAGS_tensor_store_bytes);
  config.tensors.max_tensors_per_client = std::max(0, absl::GetFlag(FLAGS_tensor_quota_count));
  config.tensors.idle_expiry = absl::Seconds(std::max(0.0, absl::GetFlag(FLAGS_tensor_idle_expiry_s)));
  // Expiry is checked on every lookup; the sweep frees memory of tensors nobody looks up.
  config.tensors.sweep_interval =
      std::clamp(config.tensors.idle_expiry / 4, absl::Milliseconds(50), absl::Seconds(5));
  config.allow_shared_memory = absl::GetFlag(FLAGS_allow_shared_memory);
  config.max_shared_memory_regions = std::max(0, absl::GetFlag(FLAGS_max_shared_memory_regions));
  config.tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  config.tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  config.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  config.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  config.auth_default_max_in_flight = std::max(1, absl::GetFlag(FLAGS_auth_default_max_in_flight));
  config.auth_token_reload_interval =
      absl::Seconds(std::max(0.0, absl::GetFlag(FLAGS_auth_token_reload_s)));
  config.tls.reload_interval_s = std::max(0, absl::GetFlag(FLAGS_tls_reload_s));
  config.health_port = std::max(-1, absl::GetFlag(FLAGS_health_port));

  for (const std::string& arg : absl::GetFlag(FLAGS_grpc_arg)) {
    const size_t eq = arg.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--grpc_arg ", arg, ": expected KEY=VALUE"));
    }
    config.grpc_args.emplace_back(arg.substr(0, eq), arg.substr(eq + 1));
  }
  // Read (and checked) here, so that a bad manifest stops the server at once; in worker mode
  // each worker reads them again and loads them (the front holds no models).
  for (const std::string& entry : absl::GetFlag(FLAGS_model_manifest)) {
    absl::StatusOr<gpucompute::StartupModel> model = ReadStartupModel(entry);
    if (!model.ok()) return model.status();
    config.models.push_back(*std::move(model));
  }
  return config;
}

// Worker `worker_index` of the worker-mode front: its handles name it, its log lines too; it
// ends with the front, and exits after a device fault so that the front starts a fresh
// process. 0, or the exit status (1: the front is gone; 2: a bad proof secret).
int SetUpWorker(int worker_index, bool json_log, gpucompute::ServerConfig& config) {
  config.connections = nullptr;  // its listener is a Unix socket: the front counts connections
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  const char* front = std::getenv(gpucompute::front::kFrontPidVariable);
  if (front == nullptr || std::atoll(front) != static_cast<long long>(getppid())) {
    return 1;  // the front is already gone (or this was not started by one)
  }
  config.tensors.handle_prefix = gpucompute::front::HandlePrefix(worker_index);
  if (const char* secret = std::getenv(gpucompute::front::kProofSecretVariable)) {
    const absl::string_view hex(secret);
    const bool is_hex = hex.size() % 2 == 0 && std::all_of(hex.begin(), hex.end(), [](char c) {
                          return std::isxdigit(static_cast<unsigned char>(c)) != 0;
                        });
    std::string bytes = is_hex ? absl::HexStringToBytes(hex) : std::string();
    if (bytes.size() < gpucompute::SharedMemoryProofs::kMinSecretBytes) {
      spdlog::critical("{}: not a hex secret of at least {} bytes",
                       gpucompute::front::kProofSecretVariable,
                       gpucompute::SharedMemoryProofs::kMinSecretBytes);
      return 2;
    }
    config.shared_memory_proof_secret = std::move(bytes);
    unsetenv(gpucompute::front::kProofSecretVariable);
  }
  if (json_log) {
    spdlog::set_formatter(std::make_unique<gpucompute::JsonLogFormatter>(worker_index));
  } else {
    spdlog::set_pattern(absl::StrCat("[%Y-%m-%d %H:%M:%S.%e] [worker ", worker_index, "] [%^%l%$] %v"));
  }
  return 0;
}

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "batched GPU compute over gRPC (Lomb-Scargle periodograms, dense "
      "layers, ensemble Kalman analyses).\nUsage: gpucompute-server [--flag=value ...]; "
      "--helpfull also lists the flags of the libraries it uses");
  absl::FlagsUsageConfig usage;
  // --help lists the server's own flags (Abseil's default lists those of a file named after the
  // program, here none); --version prints the project's version.
  usage.contains_help_flags = [](absl::string_view file) { return absl::EndsWith(file, "server/main.cc"); };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  usage.normalize_filename = [](absl::string_view file) {
    const size_t at = file.rfind("server/main.cc");
    return std::string(at == absl::string_view::npos ? file : file.substr(at));
  };
  usage.version_string = [] { return std::string("gpucompute-server " GPUCOMPUTE_VERSION "\n"); };
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  // Debian's Abseil is built with its debug checks, among them the Mutex deadlock detector: a
  // lock-order graph updated on every lock taken while another is held (~4x the cost of an
  // uncontended pair of locks here: 120 against 32 ns) that aborts on a suspected cycle. The
  // tests keep it; the server, whose locks sit on every call's path, does without.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  bool json_log = false;
  if (!SetUpLogging(json_log)) return 2;
  spdlog::info("gpucompute-server {}; allocator {}; memory limit {} MiB (the host's, or its "
               "container's)", GPUCOMPUTE_VERSION, gpucompute::AllocatorDescription(),
               gpucompute::MemoryLimitBytes() >> 20);
  RaiseDescriptorLimit();
  gpucompute::PeerConnections* connections = LimitConnections();

  // Every thread created from here on inherits the blocked signals; one waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);  // reload the token file
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<gpucompute::ServerConfig> flags_config = ConfigFromFlags();
  if (!flags_config.ok()) {
    spdlog::critical("{}", std::string(flags_config.status().message()));
    return 2;
  }
  gpucompute::ServerConfig config = *std::move(flags_config);
  config.connections = connections;
  if (absl::GetFlag(FLAGS_workers) != 0) {
    std::vector<std::string> names;
    for (const gpucompute::StartupModel& m : config.models) names.push_back(m.header.name());
    config.models.clear();
    return RunFront(argc, argv, config, signals, std::move(names));
  }

  const int worker_index = absl::GetFlag(FLAGS_worker_index);
  if (worker_index >= 0) {
    if (const int code = SetUpWorker(worker_index, json_log, config); code != 0) return code;
    config.handoff_fd = absl::GetFlag(FLAGS_handoff_fd);
    // Handed client connections count against this worker's limits per peer and in all.
    if (config.handoff_fd >= 0) {
      config.connections = connections;
      config.front_address = absl::GetFlag(FLAGS_front_address);
      const char* secret = std::getenv(gpucompute::kFrontCallSecretVariable);
      if (config.front_address.empty() || secret == nullptr || std::strlen(secret) < 32) {
        spdlog::critical("--handoff_fd without --front_address and {}: started by the front?",
                         gpucompute::kFrontCallSecretVariable);
        return 2;
      }
      config.front_call_secret = secret;
      unsetenv(gpucompute::kFrontCallSecretVariable);
    }
  }
  bool (*device_lost)(const gpucompute::Server&) = nullptr;
  if (worker_index >= 0) device_lost = [](const gpucompute::Server& s) { return s.device_lost(); };
  return Serve(gpucompute::Server::Start(config), signals, device_lost);
}
