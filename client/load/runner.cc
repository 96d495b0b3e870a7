// Closed- and open-loop levels over a Sender.
#include "client/load/runner.h"

#include <algorithm>
#include <array>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/load/schedule.h"
#include "client/load/senders.h"
#include "grpcpp/support/status_code_enum.h"

namespace gpucompute::load {
namespace {

constexpr int32_t kOk = static_cast<int32_t>(grpc::StatusCode::OK);
constexpr absl::Duration kTick = absl::Milliseconds(250);

bool StopRequested(const LiveCounters& live) {
  return live.stop != nullptr && live.stop->load(std::memory_order_relaxed);
}

Record MakeRecord(int64_t start_ns, int job, const Outcome& o, bool measured) {
  Record r;
  r.start_ns = start_ns;
  r.end_ns = o.end_ns;
  r.code = o.code;
  r.job = job;
  r.response_bytes = o.response_bytes;
  r.decode_us = o.decode_us;
  r.queue_us = o.queue_us;
  r.compute_us = o.compute_us;
  r.total_us = o.total_us;
  r.batch_requests = o.batch_requests;
  r.measured = measured;
  return r;
}

// Folds one part of a split request into the whole: the first error wins, the last part ends
// it, bytes add up, server times and batch sizes take the largest part's.
void MergePart(Outcome& whole, const Outcome& part) {
  if (whole.code == kOk) whole.code = part.code;
  whole.end_ns = std::max(whole.end_ns, part.end_ns);
  whole.response_bytes += part.response_bytes;
  whole.decode_us = std::max(whole.decode_us, part.decode_us);
  whole.queue_us = std::max(whole.queue_us, part.queue_us);
  whole.compute_us = std::max(whole.compute_us, part.compute_us);
  whole.total_us = std::max(whole.total_us, part.total_us);
  whole.batch_requests = std::max(whole.batch_requests, part.batch_requests);
}

// Token of part `part` of a request: the part in the low 8 bits (split <= 256), so that the
// parts of one request have distinct ids on a shared stream.
uint64_t PartToken(uint64_t request, int part) { return (request << 8) | static_cast<uint64_t>(part); }

void CountCompletion(LiveCounters& live, int32_t code) {
  live.in_flight.fetch_sub(1, std::memory_order_relaxed);
  live.completed.fetch_add(1, std::memory_order_relaxed);
  if (code != kOk) live.errors.fetch_add(1, std::memory_order_relaxed);
}

// `concurrency` slots, each with one request in flight; a slot sends its next request from the
// completion of the last one (on a gRPC thread), so no thread waits per slot. A slot's records
// are touched only by the completion of its own request: no locks (but for the parts of a split
// request, which complete on several threads and meet under the slot's mutex).
class ClosedLoop final : public Sink {
 public:
  ClosedLoop(const LevelPlan& plan, const Workload& workload, LiveCounters& live,
             const LevelClock& clock)
      : workload_(workload),
        live_(live),
        clock_(clock),
        by_requests_(plan.requests > 0),
        warmup_ns_(absl::ToInt64Nanoseconds(plan.warmup)),
        end_ns_(by_requests_ ? std::numeric_limits<int64_t>::max()
                             : warmup_ns_ + absl::ToInt64Nanoseconds(plan.duration)),
        split_(std::max(1, workload.split)),
        tickets_(plan.requests) {
    for (int i = 0; i < plan.concurrency; ++i) {
      auto slot = std::make_unique<Slot>();
      slot->index = i;
      slot->rng = FastRng(plan.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(i));
      slot->records.reserve(1024);
      slots_.push_back(std::move(slot));
    }
    active_ = plan.concurrency;
  }

  void Start(Sender& sender) {
    sender_ = &sender;
    for (auto& s : slots_) Issue(*s);
  }

  // True once every slot has stopped (waits up to `timeout`).
  bool WaitStopped(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(
        +[](int* active) { return *active == 0; }, &active_), timeout);
  }

  void Complete(uint64_t token, const Outcome& part) override {
    Slot& s = *slots_[token >> 40];
    Outcome o = part;
    if (split_ > 1) {
      std::lock_guard<std::mutex> lock(s.parts_mu);
      MergePart(s.whole, part);
      if (--s.parts_left > 0) return;
      o = s.whole;
    }
    const bool measured =
        by_requests_ ? s.ticket : (o.end_ns >= warmup_ns_ && o.end_ns <= end_ns_);
    s.records.push_back(MakeRecord(s.start_ns, s.job, o, measured));
    if (measured && o.end_ns > s.last_measured_end) s.last_measured_end = o.end_ns;
    CountCompletion(live_, o.code);
    if (o.code != kOk && sender_->Broken(s.index)) {
      Stop();
      return;
    }
    Issue(s);
  }

  LevelRun Collect(int64_t stopped_at_ns) {
    LevelRun run;
    size_t n = 0;
    int64_t last_end = warmup_ns_;
    for (const auto& s : slots_) {
      n += s->records.size();
      last_end = std::max(last_end, s->last_measured_end);
    }
    run.records.reserve(n);
    for (auto& s : slots_) {
      run.records.insert(run.records.end(), s->records.begin(), s->records.end());
      std::vector<Record>().swap(s->records);
    }
    const int64_t window_end =
        by_requests_ ? last_end : std::min(end_ns_, std::max(stopped_at_ns, warmup_ns_));
    run.seconds = static_cast<double>(window_end - warmup_ns_) / 1e9;
    return run;
  }

 private:
  struct Slot {
    int index = 0;
    FastRng rng{0};
    uint32_t seq = 0;
    int job = 0;
    int64_t start_ns = 0;
    bool ticket = false;  // --requests: one of the measured ones
    int64_t last_measured_end = 0;
    std::vector<Record> records;
    std::mutex parts_mu;  // a split request's parts
    int parts_left = 0;
    Outcome whole;
  };

  void Issue(Slot& s) {
    const int64_t now = clock_.Now();
    if (StopRequested(live_) || now >= end_ns_) {
      Stop();
      return;
    }
    s.ticket = false;
    if (by_requests_ && now >= warmup_ns_) {
      if (tickets_.fetch_sub(1, std::memory_order_relaxed) <= 0) {
        Stop();
        return;
      }
      s.ticket = true;
    }
    s.job = workload_.picker.Pick(s.rng);
    s.start_ns = now;
    live_.in_flight.fetch_add(1, std::memory_order_relaxed);
    // Slot in the top 24 bits, a sequence number for unique stream ids, the part in the low 8.
    const uint64_t request = (static_cast<uint64_t>(s.index) << 32) | (++s.seq & 0xffffffu);
    if (split_ == 1) {
      sender_->Send(PartToken(request, 0), s.job, s.index);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(s.parts_mu);
      s.parts_left = split_;
      s.whole = Outcome{};
    }
    // Part k of slot i on lane i * split + k: with as many channels as parts, one each.
    for (int k = 0; k < split_; ++k) sender_->Send(PartToken(request, k), s.job, s.index * split_ + k);
  }

  void Stop() {
    absl::MutexLock lock(&mu_);
    --active_;
  }

  const Workload& workload_;
  LiveCounters& live_;
  const LevelClock& clock_;
  const bool by_requests_;
  const int64_t warmup_ns_;
  const int64_t end_ns_;
  const int split_;
  std::atomic<int64_t> tickets_;
  std::vector<std::unique_ptr<Slot>> slots_;
  Sender* sender_ = nullptr;
  absl::Mutex mu_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
};

// Sends arrival i at its scheduled time from one pacing thread; records are indexed by arrival,
// so each completion writes its own entry.
class OpenLoop final : public Sink {
 public:
  OpenLoop(const LevelPlan& plan, const Workload& workload, LiveCounters& live,
           const LevelClock& clock)
      : plan_(plan), workload_(workload), live_(live), clock_(clock),
        split_(std::max(1, workload.split)) {
    const int64_t warmup_ns = absl::ToInt64Nanoseconds(plan.warmup);
    const std::vector<int64_t> warm =
        ArrivalTimes(plan.arrival, plan.rate, warmup_ns, 0, plan.seed);
    warm_count_ = static_cast<int64_t>(warm.size());
    times_ = plan.requests > 0
                 ? ArrivalTimes(plan.arrival, plan.rate, 0, warm_count_ + plan.requests, plan.seed)
                 : ArrivalTimes(plan.arrival, plan.rate,
                                warmup_ns + absl::ToInt64Nanoseconds(plan.duration), 0, plan.seed);
    records_.resize(times_.size());
    if (split_ > 1) {
      wholes_.resize(times_.size());
      parts_left_.assign(times_.size(), split_);
    }
  }

  // The pacing loop (its own thread).
  void Pace(Sender& sender) {
    FastRng rng(plan_.seed ^ 0x5bd1e995ULL);
    for (size_t i = 0; i < times_.size(); ++i) {
      WaitUntil(times_[i]);
      if (StopRequested(live_)) break;
      Record& r = records_[i];
      r.start_ns = times_[i];
      r.measured = static_cast<int64_t>(i) >= warm_count_;
      if (in_flight_.load(std::memory_order_relaxed) >= plan_.max_in_flight) {
        r.code = kDropped;
        continue;
      }
      r.job = workload_.picker.Pick(rng);
      in_flight_.fetch_add(1, std::memory_order_relaxed);
      live_.in_flight.fetch_add(1, std::memory_order_relaxed);
      {
        absl::MutexLock lock(&mu_);
        ++outstanding_;
      }
      for (int k = 0; k < split_; ++k) {
        sender.Send(PartToken(i, k), r.job, static_cast<int>(i) * split_ + k);
      }
    }
    absl::MutexLock lock(&mu_);
    pacing_done_ = true;
  }

  void Complete(uint64_t token, const Outcome& part) override {
    const uint64_t i = token >> 8;
    Record& r = records_[i];
    Outcome o = part;
    if (split_ > 1) {
      std::lock_guard<std::mutex> lock(stripes_[i % stripes_.size()]);
      MergePart(wholes_[i], part);
      if (--parts_left_[i] > 0) return;
      o = wholes_[i];
    }
    r = MakeRecord(r.start_ns, r.job, o, r.measured);
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    CountCompletion(live_, o.code);
    absl::MutexLock lock(&mu_);
    --outstanding_;
  }

  bool WaitDone(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(this, &OpenLoop::Done), timeout);
  }

  // The window is the measured arrivals' share of the schedule (count / rate), or longer when
  // the last of them finished later than that: the achieved, not the offered, throughput.
  LevelRun Collect() {
    LevelRun run;
    int64_t first = -1, last = -1, arrivals = 0;
    for (const Record& r : records_) {
      if (!r.measured) continue;
      ++arrivals;
      if (r.end_ns < 0) continue;
      if (first < 0 || r.start_ns < first) first = r.start_ns;
      last = std::max(last, r.end_ns);
    }
    const double span = first >= 0 ? static_cast<double>(last - first) / 1e9 : 0;
    run.seconds = std::max(span, static_cast<double>(arrivals) / plan_.rate);
    run.records = std::move(records_);
    return run;
  }

 private:
  bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pacing_done_ && outstanding_ == 0; }

  // Sleeps until shortly before `ns` (in steps of at most 100 ms, to notice a stop), then
  // yields: sleeping alone overshoots by tens of µs.
  void WaitUntil(int64_t ns) const {
    constexpr int64_t kStep = 100000000;
    while (ns - clock_.Now() > 200000 && !StopRequested(live_)) {
      std::this_thread::sleep_until(clock_.At(std::min(ns - 100000, clock_.Now() + kStep)));
    }
    while (clock_.Now() < ns && !StopRequested(live_)) std::this_thread::yield();
  }

  const LevelPlan& plan_;
  const Workload& workload_;
  LiveCounters& live_;
  const LevelClock& clock_;
  std::vector<int64_t> times_;
  int64_t warm_count_ = 0;
  std::vector<Record> records_;
  const int split_;
  std::vector<Outcome> wholes_;    // split requests: the parts so far
  std::vector<int> parts_left_;
  std::array<std::mutex, 64> stripes_;  // guard wholes_ and parts_left_ by arrival
  std::atomic<int64_t> in_flight_{0};
  absl::Mutex mu_;
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
  bool pacing_done_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

absl::StatusOr<LevelRun> RunLevel(const LevelPlan& plan, const Workload& workload,
                                  const std::vector<LoadChannel>& channels, LiveCounters& live,
                                  const std::function<void()>& tick) {
  if ((plan.concurrency > 0) == (plan.rate > 0)) {
    return absl::InvalidArgumentError("a level has either a concurrency or a rate");
  }
  if (channels.empty()) return absl::InvalidArgumentError("no channels");
  live.completed = 0;
  live.errors = 0;
  live.in_flight = 0;
  live.elapsed_ns = 0;
  live.measuring = false;

  SenderOptions options;
  options.timeout = plan.timeout;
  options.streams_per_channel = plan.streams_per_channel;
  options.client_id = plan.client_id;
  options.stream_deadline =
      plan.requests > 0 ? absl::Hours(24)
                        : plan.warmup + plan.duration + 2 * plan.timeout + absl::Minutes(1);

  LevelClock clock;
  const int64_t warmup_ns = absl::ToInt64Nanoseconds(plan.warmup);
  auto update = [&] {
    const int64_t now = clock.Now();
    live.elapsed_ns = now;
    live.measuring = now >= warmup_ns;
    if (tick) tick();
  };

  if (plan.concurrency > 0) {
    ClosedLoop loop(plan, workload, live, clock);
    std::unique_ptr<Sender> sender =
        plan.mode == Mode::kStream ? MakeStreamSender(channels, workload, clock, loop, options)
                                   : MakeUnarySender(channels, workload, clock, loop, options);
    loop.Start(*sender);
    int64_t stopped_at = -1;
    while (!loop.WaitStopped(kTick)) {
      update();
      if (StopRequested(live) && stopped_at < 0) stopped_at = clock.Now();
    }
    if (stopped_at < 0) stopped_at = clock.Now();
    sender->CloseAndWait();
    sender.reset();
    update();
    LevelRun run = loop.Collect(stopped_at);
    run.interrupted = StopRequested(live);
    return run;
  }

  OpenLoop loop(plan, workload, live, clock);
  std::unique_ptr<Sender> sender =
      plan.mode == Mode::kStream ? MakeStreamSender(channels, workload, clock, loop, options)
                                 : MakeUnarySender(channels, workload, clock, loop, options);
  std::thread pacer([&] { loop.Pace(*sender); });
  while (!loop.WaitDone(kTick)) update();
  pacer.join();
  sender->CloseAndWait();
  sender.reset();
  update();
  LevelRun run = loop.Collect();
  run.interrupted = StopRequested(live);
  return run;
}

}  // namespace gpucompute::load
