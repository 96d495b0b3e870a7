// How a request leaves: UnarySender makes one callback-API call per request on a channel's
// generic stub; StreamSender keeps Submit streams open and writes each job to one of them,
// matching results to requests by id. Both report every request exactly once to a Sink, from
// gRPC's callback threads (or, for a stream that has already ended, from the caller of Send).
// Not client::Client / client::SubmitStream: those serialize each request and parse each
// response, which is the client's own cost and not what a load test should measure; here the
// bytes are serialized once (wire.h) and only a Submit result's head is read.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/load/channels.h"
#include "client/load/workload.h"

namespace gpucompute::load {

// Nanoseconds since the level started (steady clock).
class LevelClock {
 public:
  LevelClock() : start_(std::chrono::steady_clock::now()) {}
  int64_t Now() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now() - start_)
        .count();
  }
  std::chrono::steady_clock::time_point At(int64_t ns) const {
    return start_ + std::chrono::nanoseconds(ns);
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// How one request ended.
struct Outcome {
  int32_t code = 0;             // grpc::StatusCode
  int64_t end_ns = 0;
  int64_t response_bytes = 0;   // serialized response message
  int64_t decode_us = -1, queue_us = -1, compute_us = -1, total_us = -1;
  int32_t batch_requests = -1;
};

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void Complete(uint64_t token, const Outcome& outcome) = 0;
};

struct SenderOptions {
  absl::Duration timeout = absl::Seconds(30);      // each call's / job's deadline
  absl::Duration stream_deadline = absl::Hours(24);  // a Submit stream's own deadline
  int streams_per_channel = 1;
  std::string client_id;                           // x-gpucompute-client, when set
};

class Sender {
 public:
  virtual ~Sender() = default;
  // Sends `job` (an index into the workload's jobs) on lane `lane % lanes()`; `token` comes
  // back to the sink with the outcome.
  virtual void Send(uint64_t token, int job, int lane) = 0;
  virtual int lanes() const = 0;
  // True once the lane can take no more requests (its stream ended).
  virtual bool Broken(int lane) const { return false; }
  // No more Send calls: ends the streams once their last results are in and waits for that.
  virtual void CloseAndWait() {}
};

// One unary call per Send; lanes are channels.
std::unique_ptr<Sender> MakeUnarySender(const std::vector<LoadChannel>& channels,
                                        const Workload& workload, const LevelClock& clock,
                                        Sink& sink, const SenderOptions& options);

// channels x streams_per_channel Submit streams, opened now; lanes are streams.
std::unique_ptr<Sender> MakeStreamSender(const std::vector<LoadChannel>& channels,
                                         const Workload& workload, const LevelClock& clock,
                                         Sink& sink, const SenderOptions& options);

}  // namespace gpucompute::load
