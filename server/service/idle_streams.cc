// The idle-upload watch (see idle_streams.h).
#include "server/service/idle_streams.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace gpucompute {

IdleStreams::IdleStreams(absl::Duration idle) : idle_(idle) {
  thread_ = std::thread([this] { Run(); });
}

IdleStreams::~IdleStreams() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

IdleStreams::Id IdleStreams::Join(grpc::CallbackServerContext* context) {
  absl::MutexLock lock(&mu_);
  const Id id = next_++;
  streams_[id] = Entry{context, absl::Now()};
  return id;
}

void IdleStreams::Touch(Id id) {
  absl::MutexLock lock(&mu_);
  if (auto it = streams_.find(id); it != streams_.end()) it->second.last = absl::Now();
}

bool IdleStreams::Leave(Id id) {
  absl::MutexLock lock(&mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) return false;
  const bool cancelled = it->second.cancelled;
  streams_.erase(it);
  return cancelled;
}

void IdleStreams::Run() {
  const absl::Duration period = std::clamp(idle_ / 4, absl::Milliseconds(10), absl::Seconds(1));
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // Wakes for the next check, or at once to stop.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), period);
    const absl::Time now = absl::Now();
    for (auto& [id, e] : streams_) {
      // Under the lock: a stream leaves (under it) before its call finishes, so its context is
      // valid here.
      if (!e.cancelled && now - e.last > idle_) {
        e.cancelled = true;
        e.context->TryCancel();
      }
    }
  }
}

}  // namespace gpucompute
