// Client: unary calls on the gRPC callback API, each completing a std::promise.
#include "client/cpp/client.h"

#include <charconv>
#include <chrono>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpucompute::client {
namespace {

std::optional<int64_t> ParseInt(grpc::string_ref value) {
  int64_t out = 0;
  const char* begin = value.data();
  const char* end = begin + value.size();
  auto [ptr, ec] = std::from_chars(begin, end, out);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return out;
}

// State of one unary call; lives until the gRPC callback has run and owns what gRPC borrows
// (context, request, response). It deliberately holds no reference to the channel: the last
// reference to a grpc::Channel must never be dropped on a gRPC callback thread (~Channel would
// shut down and join the very thread it runs on). A destroyed channel's calls still complete.
template <typename Request, typename Response, typename Result>
struct UnaryCall {
  grpc::ClientContext context;
  Request request;
  Response response;
  std::promise<absl::StatusOr<Result>> promise;
  absl::Time start = absl::Now();
};

// Completes `raw` (taking ownership): builds the result with `make_result`, frees the call
// state, then fulfils the promise, so that nothing of the call is touched after the caller
// sees its result.
template <typename Call, typename MakeResult>
void Complete(Call* raw, const grpc::Status& status, MakeResult make_result) {
  std::unique_ptr<Call> call(raw);
  auto promise = std::move(call->promise);
  using Result = decltype(make_result(*call));
  Result result = status.ok() ? make_result(*call) : Result(ToAbslStatus(status));
  call.reset();
  promise.set_value(std::move(result));
}

}  // namespace

ServerTimings ParseServerTimings(
    const std::multimap<grpc::string_ref, grpc::string_ref>& trailing_metadata) {
  ServerTimings timings;
  auto get = [&](absl::string_view key) -> std::optional<int64_t> {
    auto it = trailing_metadata.find(grpc::string_ref(key.data(), key.size()));
    if (it == trailing_metadata.end()) return std::nullopt;
    return ParseInt(it->second);
  };
  timings.queue_us = get(kQueueUsKey);
  timings.compute_us = get(kComputeUsKey);
  timings.total_us = get(kTotalUsKey);
  timings.batch_requests = get(kBatchRequestsKey);
  return timings;
}

absl::Status ToAbslStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share their numbering (both are google.rpc.Code).
  absl::Status out(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  if (!status.error_details().empty()) {
    out.SetPayload("grpc-status-details-bin", absl::Cord(status.error_details()));
  }
  return out;
}

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& target,
                                                        ClientOptions options) {
  if (target.empty()) return absl::InvalidArgumentError("empty target");
  if (options.default_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("default_timeout must be positive");
  }
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(options.max_send_message_bytes);
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      options.credentials ? options.credentials : grpc::InsecureChannelCredentials();
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(target, credentials, args);
  if (channel == nullptr) return absl::InternalError("could not create a channel to " + target);
  if (options.connect_timeout > absl::ZeroDuration()) {
    if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + options.connect_timeout))) {
      return absl::UnavailableError(absl::StrCat("could not connect to ", target, " within ",
                                                 absl::FormatDuration(options.connect_timeout)));
    }
  }
  return std::unique_ptr<Client>(new Client(target, std::move(channel), std::move(options)));
}

std::unique_ptr<Client> Client::FromChannel(std::shared_ptr<grpc::Channel> channel,
                                            ClientOptions options) {
  return std::unique_ptr<Client>(new Client("", std::move(channel), std::move(options)));
}

Client::Client(std::string target, std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : target_(std::move(target)),
      channel_(std::move(channel)),
      stub_(v1::Compute::NewStub(channel_)),
      options_(std::move(options)) {}

Client::~Client() = default;

void Client::Configure(const CallOptions& options, grpc::ClientContext* context) const {
  absl::Time deadline;
  if (options.deadline.has_value()) {
    deadline = *options.deadline;
  } else {
    deadline = absl::Now() + options.timeout.value_or(options_.default_timeout);
  }
  context->set_deadline(absl::ToChronoTime(deadline));
  context->set_wait_for_ready(options.wait_for_ready);
  for (const auto& [key, value] : options.metadata) context->AddMetadata(key, value);
}

std::future<absl::StatusOr<PeriodogramResult>> Client::PeriodogramAsync(
    v1::PeriodogramRequest request, CallOptions options) {
  using Call = UnaryCall<v1::PeriodogramRequest, v1::PeriodogramResponse, PeriodogramResult>;
  auto call = std::make_unique<Call>();
  call->request = std::move(request);
  Configure(options, &call->context);
  std::future<absl::StatusOr<PeriodogramResult>> future = call->promise.get_future();
  Call* raw = call.release();  // owned by the callback from here on
  stub_->async()->Periodogram(
      &raw->context, &raw->request, &raw->response, [raw](grpc::Status status) {
        Complete(raw, status, [](Call& c) -> absl::StatusOr<PeriodogramResult> {
          PeriodogramResult result;
          result.response = std::move(c.response);
          result.timings = ParseServerTimings(c.context.GetServerTrailingMetadata());
          result.latency = absl::Now() - c.start;
          return result;
        });
      });
  return future;
}

absl::StatusOr<PeriodogramResult> Client::Periodogram(v1::PeriodogramRequest request,
                                                      CallOptions options) {
  return PeriodogramAsync(std::move(request), std::move(options)).get();
}

std::future<absl::StatusOr<ServerInfoResult>> Client::ServerInfoAsync(CallOptions options) {
  using Call = UnaryCall<v1::ServerInfoRequest, v1::ServerInfoResponse, ServerInfoResult>;
  auto call = std::make_unique<Call>();
  Configure(options, &call->context);
  std::future<absl::StatusOr<ServerInfoResult>> future = call->promise.get_future();
  Call* raw = call.release();
  stub_->async()->ServerInfo(
      &raw->context, &raw->request, &raw->response, [raw](grpc::Status status) {
        Complete(raw, status, [](Call& c) -> absl::StatusOr<ServerInfoResult> {
          ServerInfoResult result;
          result.info = std::move(c.response);
          result.timings = ParseServerTimings(c.context.GetServerTrailingMetadata());
          result.latency = absl::Now() - c.start;
          return result;
        });
      });
  return future;
}

absl::StatusOr<ServerInfoResult> Client::ServerInfo(CallOptions options) {
  return ServerInfoAsync(std::move(options)).get();
}

}  // namespace gpucompute::client
