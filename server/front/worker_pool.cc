// Worker processes of the front (see worker_pool.h).
#include "server/front/worker_pool.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/health_wire.h"
#include "common/status_macros.h"
#include "server/runtime/shared_memory_proof.h"
#include "server/transport/caller.h"
#include "server/transport/descriptor_passing.h"
#include "spdlog/spdlog.h"

extern char** environ;

namespace gpucompute::front {
namespace {

constexpr char kHealthWatch[] = "/grpc.health.v1.Health/Watch";
// A worker whose health said NOT_SERVING but that is still running this long after is killed
// (it should exit by itself once its calls have failed: --exit_on_device_fault).
constexpr absl::Duration kFaultedExitGrace = absl::Seconds(30);

absl::Duration Backoff(int restarts) {
  return std::min(absl::Seconds(30), absl::Milliseconds(250) * (1 << std::min(restarts, 7)));
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exited with code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("killed by signal ", WTERMSIG(status));
  return "stopped";
}

// The serving status in a grpc.health.v1.HealthCheckResponse.
int HealthStatusOf(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) return 0;
  std::string bytes;
  for (const grpc::Slice& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return DecodeHealthStatus(bytes);
}

}  // namespace

const char* WorkerStateName(WorkerState state) {
  switch (state) {
    case WorkerState::kStarting: return "starting";
    case WorkerState::kServing: return "serving";
    case WorkerState::kFaulted: return "faulted";
    case WorkerState::kDown: return "down";
  }
  return "unknown";
}

struct WorkerPool::Worker {
  int index = 0;
  std::string device;
  std::string socket_path;
  std::string metrics_port_file;
  pid_t pid = 0;
  WorkerState state = WorkerState::kDown;
  int incarnation = 0;  // restarts so far
  absl::Time changed_at;
  absl::Time respawn_at;
  std::string message;
  std::vector<std::shared_ptr<grpc::GenericStub>> stubs;
  std::atomic<int64_t> in_flight{0};
  absl::flat_hash_set<std::string> models;
  HealthWatch* watch = nullptr;
  int metrics_port = 0;
  int handoff = -1;  // handoff mode: the front's end of the socket pair with this incarnation
  int64_t connections_handed = 0;
};

// Watches one worker incarnation's overall health (grpc.health.v1 Watch, waiting for the
// socket to appear): SERVING makes it routable, anything else takes it out at once.
class WorkerPool::HealthWatch : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  HealthWatch(WorkerPool* pool, int worker, int incarnation, grpc::GenericStub* stub)
      : pool_(pool), worker_(worker), incarnation_(incarnation) {
    context_.set_wait_for_ready(true);
    // The named service, not the overall status: gRPC reports "" SERVING from the moment the
    // worker's server starts, before the worker has attached its own (NOT_SERVING until it is
    // ready), and a watch that saw that SERVING then NOT_SERVING took the worker for faulted at
    // start-up (a CI run on 2 busy cores: "could not start ... worker 0 its health turned
    // NOT_SERVING").
    const std::string named = EncodeHealthCheckRequest(kComputeHealthService);
    grpc::Slice slice(named);
    request_ = grpc::ByteBuffer(&slice, 1);
    stub->PrepareBidiStreamingCall(&context_, kHealthWatch, grpc::StubOptions(), this);
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&response_);
    StartCall();
  }
  void Cancel() { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;
    pool_->OnHealth(worker_, incarnation_, HealthStatusOf(response_));
    StartRead(&response_);
  }
  void OnDone(const grpc::Status&) override {
    pool_->OnWatchEnded(worker_, incarnation_);
    delete this;
  }

 private:
  WorkerPool* const pool_;
  const int worker_;
  const int incarnation_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
};

WorkerPool::WorkerPool(WorkerPoolOptions options, std::function<void(const WorkerPool&)> on_change)
    : options_(std::move(options)), on_change_(std::move(on_change)) {}

absl::StatusOr<std::unique_ptr<WorkerPool>> WorkerPool::Start(
    WorkerPoolOptions options, std::function<void(const WorkerPool&)> on_change) {
  if (options.workers < 1) return absl::InvalidArgumentError("--workers: at least 1");
  if (options.socket_dir.empty()) return absl::InvalidArgumentError("no socket directory");
  if (options.proof_secret_hex.empty()) options.proof_secret_hex = SharedMemoryProofs::NewSecretHex();
  if (mkdir(options.socket_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return absl::InternalError(absl::StrCat("cannot create ", options.socket_dir, ": ",
                                            std::strerror(errno)));
  }
  std::unique_ptr<WorkerPool> pool(new WorkerPool(std::move(options), std::move(on_change)));
  const WorkerPoolOptions& o = pool->options_;
  absl::Status spawned;
  {
    absl::MutexLock lock(&pool->mu_);
    for (int i = 0; i < o.workers; ++i) {
      auto w = std::make_unique<Worker>();
      w->index = i;
      w->device = i < static_cast<int>(o.devices.size()) ? o.devices[i] : "";
      w->socket_path = absl::StrCat(o.socket_dir, "/worker-", i, ".sock");
      w->metrics_port_file = absl::StrCat(o.socket_dir, "/worker-", i, ".metrics-port");
      pool->workers_.push_back(std::move(w));
    }
    for (auto& w : pool->workers_) {
      spawned = pool->Spawn(*w);
      if (!spawned.ok()) break;
    }
  }
  if (!spawned.ok()) {
    pool->Stop();
    return spawned;
  }
  pool->monitor_ = std::thread([p = pool.get()] { p->Monitor(); });

  // Start-up: every worker serving, or the deadline; a worker that exits now has a problem
  // that a restart will not fix (flags, a missing device), so the front does not start.
  const absl::Time deadline = absl::Now() + o.start_timeout;
  while (true) {
    int serving = 0;
    std::string failed;
    {
      absl::ReaderMutexLock lock(&pool->mu_);
      for (const auto& w : pool->workers_) {
        if (w->state == WorkerState::kServing) ++serving;
        if (w->state == WorkerState::kDown || w->state == WorkerState::kFaulted) {
          failed = absl::StrCat("worker ", w->index, " ", w->message, " during start-up (its log is above)");
        }
      }
    }
    if (!failed.empty()) {
      pool->Stop();
      return absl::UnavailableError(failed);
    }
    if (serving == o.workers) break;
    if (absl::Now() > deadline) {
      if (serving > 0) {
        spdlog::warn("{} of {} workers serving after {}; the others keep starting", serving,
                     o.workers, absl::FormatDuration(o.start_timeout));
        break;
      }
      pool->Stop();
      return absl::UnavailableError("no worker started serving in time");
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return pool;
}

WorkerPool::~WorkerPool() { Stop(); }

absl::StatusOr<int> WorkerPool::OpenHandoff(Worker& w) {
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends) != 0) {
    return absl::InternalError(absl::StrCat("socketpair for worker ", w.index, ": ", std::strerror(errno)));
  }
  // Never block the dealer on a worker that does not read: its connections go to another.
  fcntl(ends[0], F_SETFL, fcntl(ends[0], F_GETFL) | O_NONBLOCK);
  int child = ends[1];
  if (child == kHandoffDescriptor) {  // dup2 onto itself would keep close-on-exec set
    child = fcntl(ends[1], F_DUPFD_CLOEXEC, kHandoffDescriptor + 1);
    close(ends[1]);
  }
  if (w.handoff >= 0) close(w.handoff);
  w.handoff = ends[0];
  return child;
}

bool WorkerPool::HandConnection(int fd) {
  absl::MutexLock lock(&mu_);
  const int n = static_cast<int>(workers_.size());
  for (int tried = 0; tried < n; ++tried) {
    Worker& w = *workers_[static_cast<size_t>((next_handoff_ + tried) % n)];
    if (w.state != WorkerState::kServing || w.handoff < 0) continue;
    if (absl::Status s = SendDescriptor(w.handoff, fd); !s.ok()) {
      spdlog::warn("worker {} did not take a connection: {}", w.index, std::string(s.message()));
      continue;
    }
    ++w.connections_handed;
    next_handoff_ = (next_handoff_ + tried + 1) % n;
    return true;
  }
  return false;
}

absl::Status WorkerPool::Spawn(Worker& w) {
  std::vector<std::string> args;
  args.push_back(options_.executable);
  args.insert(args.end(), options_.base_args.begin(), options_.base_args.end());
  // After the front's own arguments: later flags win. The front authenticates, encrypts,
  // serves health and metrics; a worker answers only the front, on its socket.
  // Handoff mode: the worker also serves client connections, under the front's settings.
  std::vector<std::string> client_settings = {
      // Every call of the front to this worker shares its few connections.
      std::string("--max_concurrent_streams=1000000"),
      // The front's transport settings are for its clients' connections (some, like a
      // maximum connection age, would cut the front's own calls to the worker).
      std::string("--grpc_arg="),
  };
  if (options_.handoff) {
    client_settings = {absl::StrCat("--handoff_fd=", kHandoffDescriptor),
                       absl::StrCat("--front_address=", options_.front_address)};
  }
  for (std::string flag : {
           absl::StrCat("--address=unix:", w.socket_path),
           std::string("--workers=0"),
           absl::StrCat("--worker_index=", w.index),
           std::string("--port_file="),
           std::string("--metrics_port=0"),
           absl::StrCat("--metrics_port_file=", w.metrics_port_file),
           std::string("--health_port=-1"),
           std::string("--health_port_file="),
           std::string("--tls_cert_file="),
           std::string("--tls_key_file="),
           std::string("--tls_client_ca_file="),
           std::string("--auth_token_file="),
       }) {
    args.push_back(std::move(flag));
  }
  args.insert(args.end(), client_settings.begin(), client_settings.end());
  const bool inject = w.index == options_.inject_fault_worker && w.incarnation == 0;
  args.push_back(absl::StrCat("--inject_sticky_fault_device=", inject ? 0 : -1));
  args.push_back(absl::StrCat("--inject_sticky_fault_after_batches=", options_.inject_fault_after_batches));

  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "CUDA_VISIBLE_DEVICES=", 21) != 0 &&
        std::strncmp(*e, kProofSecretVariable, std::strlen(kProofSecretVariable)) != 0 &&
        std::strncmp(*e, kFrontCallSecretVariable, std::strlen(kFrontCallSecretVariable)) != 0) {
      env.emplace_back(*e);
    }
  }
  if (!w.device.empty()) env.push_back(absl::StrCat("CUDA_VISIBLE_DEVICES=", w.device));
  // The worker checks it is still the front's child (it ends with the front: PDEATHSIG).
  env.push_back(absl::StrCat(kFrontPidVariable, "=", getpid()));
  env.push_back(absl::StrCat(kProofSecretVariable, "=", options_.proof_secret_hex));
  if (options_.handoff) env.push_back(absl::StrCat(kFrontCallSecretVariable, "=", options_.front_call_secret));
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  unlink(w.socket_path.c_str());
  unlink(w.metrics_port_file.c_str());
  // A process group of its own: a terminal's Ctrl-C or a service manager's SIGTERM to the
  // front's group reaches the front alone, which then stops the workers in order.
  int child_end = -1;  // handoff mode: the worker's end of its socket pair, its descriptor 3
  if (options_.handoff) {
    ASSIGN_OR_RETURN(child_end, OpenHandoff(w));
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  if (child_end >= 0) posix_spawn_file_actions_adddup2(&files, child_end, kHandoffDescriptor);
  pid_t pid = 0;
  const int err = posix_spawn(&pid, options_.executable.c_str(), &files, &attributes, argv.data(),
                              envp.data());
  posix_spawn_file_actions_destroy(&files);
  posix_spawnattr_destroy(&attributes);
  if (child_end >= 0) close(child_end);  // the worker has its copy (descriptor 3)
  if (err != 0) {
    return absl::InternalError(absl::StrCat("cannot start worker ", w.index, ": ", std::strerror(err)));
  }
  w.pid = pid;
  w.state = WorkerState::kStarting;
  w.changed_at = absl::Now();
  w.message = "starting";
  w.metrics_port = 0;
  w.models.clear();
  w.stubs.clear();
  for (int c = 0; c < std::max(1, options_.channels_per_worker); ++c) {
    grpc::ChannelArguments channel_args;
    channel_args.SetMaxReceiveMessageSize(-1);
    channel_args.SetMaxSendMessageSize(-1);
    channel_args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
    channel_args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
    channel_args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
    channel_args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_args.SetInt("gpucompute.worker_channel", c);  // one connection per channel
    w.stubs.push_back(std::make_shared<grpc::GenericStub>(grpc::CreateCustomChannel(
        absl::StrCat("unix:", w.socket_path), grpc::InsecureChannelCredentials(), channel_args)));
  }
  ++watches_;
  w.watch = new HealthWatch(this, w.index, w.incarnation, w.stubs.front().get());
  spdlog::info("worker {} started (pid {}{}{})", w.index, pid, w.device.empty() ? "" : ", GPU ",
               w.device);
  return absl::OkStatus();
}

void WorkerPool::OnHealth(int worker, int incarnation, int status) {
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    Worker& w = *workers_[worker];
    if (w.incarnation != incarnation || w.state == WorkerState::kDown || stopping_) return;
    if (status == kHealthServing && w.state == WorkerState::kStarting) {
      w.state = WorkerState::kServing;
      w.models.insert(options_.startup_models.begin(), options_.startup_models.end());
      w.message.clear();
      w.changed_at = absl::Now();
      changed = true;
      spdlog::info("worker {} serving (pid {})", w.index, w.pid);
    } else if (status != kHealthServing && w.state == WorkerState::kServing) {
      w.state = WorkerState::kFaulted;
      w.message = "its health turned NOT_SERVING (a device fault); it is being restarted";
      w.changed_at = absl::Now();
      changed = true;
      spdlog::error("worker {} (pid {}) is NOT_SERVING: calls go to the other workers until it "
                    "has been restarted", w.index, w.pid);
    }
  }
  if (changed) Changed();
}

void WorkerPool::OnWatchEnded(int worker, int incarnation) {
  bool changed = false;
  {
    absl::MutexLock lock(&mu_);
    --watches_;
    Worker& w = *workers_[worker];
    if (w.incarnation != incarnation) return;
    // A watch can end without the worker being at fault (its connection was reset): the
    // monitor starts another; a worker that died is seen exiting.
    w.watch = nullptr;
  }
  if (changed) Changed();
}

void WorkerPool::Changed() {
  if (on_change_) on_change_(*this);
}

void WorkerPool::Monitor() {
  while (!stop_monitor_.WaitForNotificationWithTimeout(absl::Milliseconds(20))) {
    bool changed = false;
    {
      absl::MutexLock lock(&mu_);
      const absl::Time now = absl::Now();
      for (auto& wp : workers_) {
        Worker& w = *wp;
        if (w.pid > 0) {
          int status = 0;
          if (waitpid(w.pid, &status, WNOHANG) == w.pid) {
            w.message = DescribeExit(status);
            if (stopping_) {
              spdlog::info("worker {} (pid {}) {}", w.index, w.pid, w.message);
            } else {
              spdlog::error("worker {} (pid {}) {}; restarting it in {}", w.index, w.pid,
                            w.message, absl::FormatDuration(Backoff(w.incarnation)));
            }
            w.pid = 0;
            w.state = WorkerState::kDown;
            if (w.handoff >= 0) close(w.handoff);
            w.handoff = -1;
            w.changed_at = now;
            w.respawn_at = now + Backoff(w.incarnation);
            ++w.incarnation;
            w.models.clear();
            if (w.watch != nullptr) w.watch->Cancel();
            w.watch = nullptr;
            changed = true;
          }
        }
        if (stopping_) continue;
        if (w.state == WorkerState::kDown && now >= w.respawn_at) {
          if (absl::Status s = Spawn(w); !s.ok()) {
            spdlog::error("{}", std::string(s.message()));
            w.respawn_at = now + Backoff(w.incarnation);
          }
          changed = true;
        } else if (w.pid > 0 && w.state == WorkerState::kStarting &&
                   now - w.changed_at > options_.start_timeout) {
          spdlog::error("worker {} (pid {}) did not serve within {}: killing it", w.index, w.pid,
                        absl::FormatDuration(options_.start_timeout));
          kill(w.pid, SIGKILL);
        } else if (w.pid > 0 && w.state == WorkerState::kFaulted &&
                   now - w.changed_at > kFaultedExitGrace) {
          spdlog::error("worker {} (pid {}) still running {} after its fault: killing it",
                        w.index, w.pid, absl::FormatDuration(kFaultedExitGrace));
          kill(w.pid, SIGKILL);
          w.changed_at = now;
        } else if (w.pid > 0 && w.watch == nullptr &&
                   (w.state == WorkerState::kStarting || w.state == WorkerState::kServing)) {
          ++watches_;
          w.watch = new HealthWatch(this, w.index, w.incarnation, w.stubs.front().get());
        }
        if (w.state == WorkerState::kServing && w.metrics_port == 0) {
          std::ifstream(w.metrics_port_file) >> w.metrics_port;
        }
      }
    }
    if (changed) Changed();
  }
}

int WorkerPool::PickLeastLoaded(const std::string* model) {
  absl::ReaderMutexLock lock(&mu_);
  const int n = size();
  if (n == 0) return -1;
  const uint32_t start = round_robin_.fetch_add(1, std::memory_order_relaxed);
  int best = -1;
  int64_t best_load = 0;
  for (int k = 0; k < n; ++k) {
    const int i = static_cast<int>((start + k) % n);
    const Worker& w = *workers_[i];
    if (w.state != WorkerState::kServing) continue;
    if (model != nullptr && !w.models.contains(*model)) continue;
    const int64_t load = w.in_flight.load(std::memory_order_relaxed);
    if (best < 0 || load < best_load) {
      best = i;
      best_load = load;
    }
  }
  return best;
}

bool WorkerPool::Serving(int worker) const {
  absl::ReaderMutexLock lock(&mu_);
  return worker >= 0 && worker < size() && workers_[worker]->state == WorkerState::kServing;
}

std::vector<int> WorkerPool::ServingWorkers() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<int> out;
  for (const auto& w : workers_) {
    if (w->state == WorkerState::kServing) out.push_back(w->index);
  }
  return out;
}

bool WorkerPool::AnyServing() const { return !ServingWorkers().empty(); }

int WorkerPool::Incarnation(int worker) const {
  absl::ReaderMutexLock lock(&mu_);
  return workers_[worker]->incarnation;
}

std::shared_ptr<grpc::GenericStub> WorkerPool::Stub(int worker) {
  absl::ReaderMutexLock lock(&mu_);
  if (worker < 0 || worker >= size()) return nullptr;
  const Worker& w = *workers_[worker];
  if (w.state != WorkerState::kServing || w.stubs.empty()) return nullptr;
  return w.stubs[round_robin_.fetch_add(1, std::memory_order_relaxed) % w.stubs.size()];
}

void WorkerPool::CallStarted(int worker) {
  workers_[worker]->in_flight.fetch_add(1, std::memory_order_relaxed);
}

void WorkerPool::CallEnded(int worker) {
  workers_[worker]->in_flight.fetch_sub(1, std::memory_order_relaxed);
}

void WorkerPool::AddModel(int worker, int incarnation, const std::string& name) {
  absl::MutexLock lock(&mu_);
  Worker& w = *workers_[worker];
  if (w.incarnation == incarnation && w.state != WorkerState::kDown) w.models.insert(name);
}

void WorkerPool::RemoveModel(int worker, const std::string& name) {
  absl::MutexLock lock(&mu_);
  workers_[worker]->models.erase(name);
}

bool WorkerPool::AnyHasModel(const std::string& name) const {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& w : workers_) {
    if (w->models.contains(name)) return true;
  }
  return false;
}

std::vector<WorkerSnapshot> WorkerPool::Snapshot() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<WorkerSnapshot> out;
  for (const auto& w : workers_) {
    WorkerSnapshot s;
    s.index = w->index;
    s.pid = w->pid;
    s.state = w->state;
    s.restarts = w->incarnation;
    s.in_flight = w->in_flight.load(std::memory_order_relaxed);
    s.device = w->device;
    s.message = w->message;
    s.metrics_port = w->metrics_port;
    s.connections_handed = w->connections_handed;
    out.push_back(std::move(s));
  }
  return out;
}

std::string WorkerPool::Describe(int worker) const {
  absl::ReaderMutexLock lock(&mu_);
  if (worker < 0 || worker >= size()) return "no such worker";
  const Worker& w = *workers_[worker];
  return absl::StrCat("worker ", w.index, w.device.empty() ? "" : " (GPU ", w.device,
                      w.device.empty() ? "" : ")", " is ", WorkerStateName(w.state),
                      w.message.empty() ? "" : ": ", w.message);
}

void WorkerPool::BeginStop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (const auto& w : workers_) {
    // A health Watch is a call in flight: the worker's drain would wait for it.
    if (w->watch != nullptr) w->watch->Cancel();
    if (w->pid > 0) kill(w->pid, SIGTERM);
  }
}

void WorkerPool::Stop() {
  BeginStop();
  // The monitor reaps them; past the grace period, SIGKILL.
  const absl::Time deadline = absl::Now() + options_.stop_grace;
  auto running = [this] {
    absl::ReaderMutexLock lock(&mu_);
    return std::any_of(workers_.begin(), workers_.end(), [](const auto& w) { return w->pid > 0; });
  };
  const bool monitoring = monitor_.joinable();
  while (running()) {
    if (!monitoring) {  // start-up failed before the monitor ran: reap here
      absl::MutexLock lock(&mu_);
      for (auto& w : workers_) {
        int status = 0;
        if (w->pid > 0 && waitpid(w->pid, &status, WNOHANG) == w->pid) w->pid = 0;
      }
    }
    if (absl::Now() > deadline) {
      absl::MutexLock lock(&mu_);
      for (const auto& w : workers_) {
        if (w->pid > 0) {
          spdlog::warn("worker {} (pid {}) still running after {}: SIGKILL", w->index, w->pid,
                       absl::FormatDuration(options_.stop_grace));
          kill(w->pid, SIGKILL);
        }
      }
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  {
    absl::MutexLock lock(&mu_);
    for (auto& w : workers_) {
      if (w->watch != nullptr) w->watch->Cancel();
    }
    for (auto& w : workers_) {
      if (w->handoff >= 0) close(w->handoff);
      w->handoff = -1;
    }
    // The watches' OnDone touch the pool: wait for them (a cancelled call ends promptly).
    auto none = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return watches_ == 0; };
    while (!mu_.AwaitWithTimeout(absl::Condition(&none), absl::Seconds(10))) {
      spdlog::warn("waiting for {} worker health watch(es) to end", watches_);
    }
  }
  if (!stop_monitor_.HasBeenNotified()) stop_monitor_.Notify();
  if (monitor_.joinable()) monitor_.join();
}

}  // namespace gpucompute::front
