// gpucompute::client::Client: a typed, future-returning C++ client for gpucompute.v1.Compute.
//
// Every call carries a deadline (CallOptions::timeout, else ClientOptions::default_timeout) and
// runs on the gRPC callback API: the returned std::future is fulfilled from a gRPC thread when
// the call completes, so no thread of yours is blocked unless you call get(). gRPC errors come
// back as absl::Status with the same code and message.
//
// Threading: a Client is thread-safe; share one per target. A Client may be destroyed while
// calls are in flight: their futures are still fulfilled, and the destructor may block until
// they complete. Never destroy a Client from inside gRPC's callback threads.
#pragma once

#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "gpucompute/v1/compute.pb.h"
#include "grpcpp/grpcpp.h"

namespace gpucompute::client {

// Names of the trailing-metadata keys the server reports its timings under.
inline constexpr char kQueueUsKey[] = "x-gpucompute-queue-us";
inline constexpr char kComputeUsKey[] = "x-gpucompute-compute-us";
inline constexpr char kTotalUsKey[] = "x-gpucompute-total-us";
inline constexpr char kBatchRequestsKey[] = "x-gpucompute-batch-requests";

struct ClientOptions {
  // Deadline of a call whose CallOptions set none.
  absl::Duration default_timeout = absl::Seconds(30);
  // Message size limits of the channel (both directions); gRPC's default receive limit is 4 MiB.
  int max_send_message_bytes = 1 << 30;
  int max_receive_message_bytes = 1 << 30;
  // Channel credentials; null means insecure (plaintext), the server's default.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // When positive, Connect waits up to this long for the channel to become ready and fails with
  // UNAVAILABLE otherwise. Zero connects lazily, on the first call.
  absl::Duration connect_timeout = absl::ZeroDuration();
};

struct CallOptions {
  // Per-call deadline: `deadline` wins over `timeout`, which wins over the client default.
  std::optional<absl::Duration> timeout;
  std::optional<absl::Time> deadline;
  // Queue the call while the channel is not ready instead of failing fast with UNAVAILABLE.
  bool wait_for_ready = false;
  // Extra request metadata (keys lower-case).
  std::vector<std::pair<std::string, std::string>> metadata;
};

// Server-side timings parsed from trailing metadata; a field is unset when the server did not
// send it (or sent something that is not an integer).
struct ServerTimings {
  std::optional<int64_t> queue_us;        // admission to dispatch
  std::optional<int64_t> compute_us;      // the batch's compute, copies included
  std::optional<int64_t> total_us;        // receipt to response
  std::optional<int64_t> batch_requests;  // requests coalesced into the launch that ran this one
};

// Parses the x-gpucompute-* keys out of a trailing-metadata map.
ServerTimings ParseServerTimings(
    const std::multimap<grpc::string_ref, grpc::string_ref>& trailing_metadata);

struct PeriodogramResult {
  v1::PeriodogramResponse response;
  ServerTimings timings;
  absl::Duration latency;  // measured by the client, call start to completion
};

struct ServerInfoResult {
  v1::ServerInfoResponse info;
  ServerTimings timings;
  absl::Duration latency;
};

// grpc::Status -> absl::Status, same code, message and (as the "grpc-status-details-bin"
// payload) binary error details.
absl::Status ToAbslStatus(const grpc::Status& status);

class Client {
 public:
  // Creates a channel to `target` ("host:port", "dns:///host:port", "unix:/path", ...).
  // INVALID_ARGUMENT for an empty target; UNAVAILABLE when options.connect_timeout is positive
  // and the channel does not become ready in time.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const std::string& target,
                                                         ClientOptions options = {});

  // Wraps an existing channel (tests, custom channel arguments).
  static std::unique_ptr<Client> FromChannel(std::shared_ptr<grpc::Channel> channel,
                                             ClientOptions options = {});

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // Batched Lomb-Scargle periodograms.
  std::future<absl::StatusOr<PeriodogramResult>> PeriodogramAsync(v1::PeriodogramRequest request,
                                                                  CallOptions options = {});
  absl::StatusOr<PeriodogramResult> Periodogram(v1::PeriodogramRequest request,
                                                CallOptions options = {});

  // Backend, devices, limits, kernel cache and batching statistics.
  std::future<absl::StatusOr<ServerInfoResult>> ServerInfoAsync(CallOptions options = {});
  absl::StatusOr<ServerInfoResult> ServerInfo(CallOptions options = {});

  const std::string& target() const { return target_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  Client(std::string target, std::shared_ptr<grpc::Channel> channel, ClientOptions options);

  // Fills deadline, wait_for_ready and metadata of `context` from `options`.
  void Configure(const CallOptions& options, grpc::ClientContext* context) const;

  std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Compute::Stub> stub_;
  ClientOptions options_;
};

}  // namespace gpucompute::client
