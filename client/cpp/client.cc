// Client: unary calls on the gRPC callback API, each completing a std::promise.
#include "client/cpp/client.h"

#include <charconv>
#include <algorithm>
#include <chrono>
#include <functional>

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

// One client-streaming LoadModel call: writes the header, then each tensor's chunks, one write
// in flight at a time, and completes its promise from OnDone. Owns everything gRPC borrows and
// deletes itself after OnDone; like UnaryCall it holds no reference to the channel.
class LoadModelCall final : public grpc::ClientWriteReactor<v1::LoadModelChunk> {
 public:
  LoadModelCall(ModelUpload upload, int64_t chunk_bytes)
      : upload_(std::move(upload)), chunk_bytes_(chunk_bytes) {}

  grpc::ClientContext* context() { return &context_; }
  std::future<absl::StatusOr<LoadModelResult>> future() { return promise_.get_future(); }

  // Starts the call on `stub`; from here on the call owns itself.
  void Start(v1::Compute::Stub* stub) {
    stub->async()->LoadModel(&context_, &info_, this);
    WriteNext();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    // !ok: the stream is broken (the server finished early, e.g. with an error); OnDone follows
    // with the status.
    if (ok) WriteNext();
  }

  void OnDone(const grpc::Status& status) override {
    absl::StatusOr<LoadModelResult> result;
    if (status.ok()) {
      LoadModelResult r;
      r.info = std::move(info_);
      r.timings = ParseServerTimings(context_.GetServerTrailingMetadata());
      r.latency = absl::Now() - start_;
      r.bytes_sent = bytes_sent_;
      r.messages = messages_;
      result = std::move(r);
    } else {
      result = ToAbslStatus(status);
    }
    auto promise = std::move(promise_);
    delete this;
    promise.set_value(std::move(result));
  }

 private:
  // Starts the next write (header, then chunks), or WritesDone after the last chunk.
  void WriteNext() {
    message_.Clear();
    if (!header_sent_) {
      *message_.mutable_header() = std::move(upload_.header);
      header_sent_ = true;
      ++messages_;
      StartWrite(&message_);
      return;
    }
    while (tensor_ < upload_.tensors.size() &&
           offset_ >= static_cast<int64_t>(upload_.tensors[tensor_].data.size())) {
      std::string().swap(upload_.tensors[tensor_].data);  // sent: free it
      ++tensor_;
      offset_ = 0;
    }
    if (tensor_ == upload_.tensors.size()) {
      StartWritesDone();
      return;
    }
    const ModelUpload::TensorData& t = upload_.tensors[tensor_];
    const int64_t n = std::min<int64_t>(chunk_bytes_, static_cast<int64_t>(t.data.size()) - offset_);
    v1::TensorChunk* chunk = message_.mutable_chunk();
    chunk->set_layer(t.layer);
    chunk->set_tensor(t.tensor);
    chunk->set_offset(offset_);
    chunk->set_data(t.data.data() + offset_, static_cast<size_t>(n));
    offset_ += n;
    bytes_sent_ += n;
    ++messages_;
    StartWrite(&message_);
  }

  grpc::ClientContext context_;
  ModelUpload upload_;
  const int64_t chunk_bytes_;
  v1::LoadModelChunk message_;  // the write in flight
  v1::ModelInfo info_;
  std::promise<absl::StatusOr<LoadModelResult>> promise_;
  absl::Time start_ = absl::Now();
  bool header_sent_ = false;
  size_t tensor_ = 0;   // tensor being sent
  int64_t offset_ = 0;  // its bytes sent so far
  int64_t bytes_sent_ = 0;
  int64_t messages_ = 0;
};

// Starts a unary call: `invoke(context, request, response, callback)` issues it on the stub;
// `make_result(call)` turns a successful call into Result.
template <typename Request, typename Response, typename Result, typename Invoke,
          typename MakeResult>
std::future<absl::StatusOr<Result>> StartUnary(
    Request request, const std::function<void(grpc::ClientContext*)>& configure, Invoke invoke,
    MakeResult make_result) {
  using Call = UnaryCall<Request, Response, Result>;
  auto call = std::make_unique<Call>();
  call->request = std::move(request);
  configure(&call->context);
  std::future<absl::StatusOr<Result>> future = call->promise.get_future();
  Call* raw = call.release();  // owned by the callback from here on
  invoke(&raw->context, &raw->request, &raw->response, [raw, make_result](grpc::Status status) {
    Complete(raw, status, [&](Call& c) -> absl::StatusOr<Result> { return make_result(c); });
  });
  return future;
}

}  // namespace

int64_t ModelUpload::tensor_bytes() const {
  int64_t n = 0;
  for (const TensorData& t : tensors) n += static_cast<int64_t>(t.data.size());
  return n;
}

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

std::future<absl::StatusOr<LoadModelResult>> Client::LoadModelAsync(ModelUpload model,
                                                                    CallOptions options,
                                                                    int64_t chunk_bytes) {
  if (chunk_bytes <= 0) {
    std::promise<absl::StatusOr<LoadModelResult>> failed;
    failed.set_value(absl::InvalidArgumentError(
        absl::StrCat("chunk_bytes must be positive, got ", chunk_bytes)));
    return failed.get_future();
  }
  auto* call = new LoadModelCall(std::move(model), chunk_bytes);  // deletes itself in OnDone
  Configure(options, call->context());
  std::future<absl::StatusOr<LoadModelResult>> future = call->future();
  call->Start(stub_.get());
  return future;
}

absl::StatusOr<LoadModelResult> Client::LoadModel(ModelUpload model, CallOptions options,
                                                  int64_t chunk_bytes) {
  return LoadModelAsync(std::move(model), std::move(options), chunk_bytes).get();
}

std::future<absl::StatusOr<UnloadModelResult>> Client::UnloadModelAsync(std::string name,
                                                                        CallOptions options) {
  using Call = UnaryCall<v1::UnloadModelRequest, v1::UnloadModelResponse, UnloadModelResult>;
  v1::UnloadModelRequest request;
  request.set_name(std::move(name));
  return StartUnary<v1::UnloadModelRequest, v1::UnloadModelResponse, UnloadModelResult>(
      std::move(request), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->UnloadModel(context, req, resp, std::move(callback));
      },
      [](Call& c) -> absl::StatusOr<UnloadModelResult> {
        UnloadModelResult result;
        result.timings = ParseServerTimings(c.context.GetServerTrailingMetadata());
        result.latency = absl::Now() - c.start;
        return result;
      });
}

absl::StatusOr<UnloadModelResult> Client::UnloadModel(std::string name, CallOptions options) {
  return UnloadModelAsync(std::move(name), std::move(options)).get();
}

std::future<absl::StatusOr<ListModelsResult>> Client::ListModelsAsync(CallOptions options) {
  using Call = UnaryCall<v1::ListModelsRequest, v1::ListModelsResponse, ListModelsResult>;
  return StartUnary<v1::ListModelsRequest, v1::ListModelsResponse, ListModelsResult>(
      v1::ListModelsRequest(), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->ListModels(context, req, resp, std::move(callback));
      },
      [](Call& c) -> absl::StatusOr<ListModelsResult> {
        ListModelsResult result;
        result.response = std::move(c.response);
        result.timings = ParseServerTimings(c.context.GetServerTrailingMetadata());
        result.latency = absl::Now() - c.start;
        return result;
      });
}

absl::StatusOr<ListModelsResult> Client::ListModels(CallOptions options) {
  return ListModelsAsync(std::move(options)).get();
}

std::future<absl::StatusOr<DenseResult>> Client::DenseAsync(v1::DenseRequest request,
                                                            CallOptions options) {
  using Call = UnaryCall<v1::DenseRequest, v1::DenseResponse, DenseResult>;
  return StartUnary<v1::DenseRequest, v1::DenseResponse, DenseResult>(
      std::move(request), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->Dense(context, req, resp, std::move(callback));
      },
      [](Call& c) -> absl::StatusOr<DenseResult> {
        DenseResult result;
        result.response = std::move(c.response);
        result.timings = ParseServerTimings(c.context.GetServerTrailingMetadata());
        result.latency = absl::Now() - c.start;
        return result;
      });
}

absl::StatusOr<DenseResult> Client::Dense(v1::DenseRequest request, CallOptions options) {
  return DenseAsync(std::move(request), std::move(options)).get();
}

std::future<absl::StatusOr<AssimilateResult>> Client::AssimilateAsync(v1::AssimilateRequest request,
                                                                      CallOptions options) {
  using Call = UnaryCall<v1::AssimilateRequest, v1::AssimilateResponse, AssimilateResult>;
  return StartUnary<v1::AssimilateRequest, v1::AssimilateResponse, AssimilateResult>(
      std::move(request), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->Assimilate(context, req, resp, std::move(callback));
      },
      [](Call& c) -> absl::StatusOr<AssimilateResult> {
        AssimilateResult result;
        result.response = std::move(c.response);
        result.timings = ParseServerTimings(c.context.GetServerTrailingMetadata());
        result.latency = absl::Now() - c.start;
        return result;
      });
}

absl::StatusOr<AssimilateResult> Client::Assimilate(v1::AssimilateRequest request,
                                                    CallOptions options) {
  return AssimilateAsync(std::move(request), std::move(options)).get();
}

std::future<absl::StatusOr<EchoResult>> Client::EchoAsync(v1::EchoRequest request,
                                                        CallOptions options) {
  using Call = UnaryCall<v1::EchoRequest, v1::EchoResponse, EchoResult>;
  return StartUnary<v1::EchoRequest, v1::EchoResponse, EchoResult>(
      std::move(request), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->Echo(context, req, resp, std::move(callback));
      },
      [](Call& c) -> absl::StatusOr<EchoResult> {
        EchoResult result;
        result.response = std::move(c.response);
        result.timings = ParseServerTimings(c.context.GetServerTrailingMetadata());
        result.latency = absl::Now() - c.start;
        return result;
      });
}

absl::StatusOr<EchoResult> Client::Echo(v1::EchoRequest request, CallOptions options) {
  return EchoAsync(std::move(request), std::move(options)).get();
}

}  // namespace gpucompute::client
