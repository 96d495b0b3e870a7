// Client: unary calls on the gRPC callback API, each completing a std::promise.
#include "client/cpp/client.h"

#include <charconv>
#include <cstring>
#include <optional>
#include <algorithm>
#include <chrono>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/cpp/balance.h"
#include "client/cpp/large_tensors.h"
#include "client/cpp/shared_memory_region.h"
#include "client/cpp/tensor_util.h"
#include "client/cpp/uninitialized_string.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "wire/tensor_chunk.h"

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

// Starts a unary call whose result is only its status.
template <typename Request, typename Response, typename Invoke>
std::future<absl::Status> StartStatusUnary(
    Request request, const std::function<void(grpc::ClientContext*)>& configure, Invoke invoke) {
  struct Call {
    grpc::ClientContext context;
    Request request;
    Response response;
    std::promise<absl::Status> promise;
  };
  auto call = std::make_unique<Call>();
  call->request = std::move(request);
  configure(&call->context);
  std::future<absl::Status> future = call->promise.get_future();
  Call* raw = call.release();  // owned by the callback from here on
  invoke(&raw->context, &raw->request, &raw->response, [raw](grpc::Status status) {
    std::unique_ptr<Call> c(raw);
    auto promise = std::move(c->promise);
    c.reset();
    promise.set_value(ToAbslStatus(status));
  });
  return future;
}

// The Result of a call that is its response, the server's timings and the latency
// (PeriodogramResult, ListModelsResult, DenseResult, AssimilateResult, EchoResult).
template <typename Result, typename Call>
absl::StatusOr<Result> TimedResponse(Call& c) {
  Result result;
  result.response = std::move(c.response);
  result.timings = ParseServerTimings(c.context.GetServerTrailingMetadata());
  result.latency = absl::Now() - c.start;
  return result;
}

// One PutTensor stream: the header (with the first chunk's bytes), then the chunks of
// [begin, end) of `data`, one write in flight, each message carrying its bytes as a slice of
// `data` itself (proto/wire/tensor_chunk.h: no copy on this side); `done` runs after OnDone
// with the server's TensorInfo and the bytes sent. Deletes itself; holds no channel reference.
class PutTensorStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  using Done = std::function<void(absl::StatusOr<v1::TensorInfo>, int64_t bytes_sent)>;

  PutTensorStream(v1::PutTensorHeader header, absl::string_view data, int64_t begin, int64_t end,
                  int64_t chunk_bytes, Done done)
      : header_(header.SerializeAsString()),
        data_(data),
        next_(begin),
        end_(end),
        chunk_bytes_(chunk_bytes),
        done_(std::move(done)) {}

  grpc::ClientContext* context() { return &context_; }

  void Start(grpc::GenericStub* stub) {
    stub->PrepareBidiStreamingCall(&context_, "/gpucompute.v1.Compute/PutTensor", grpc::StubOptions(),
                                   this);
    StartRead(&reply_);
    WriteNext();
    StartCall();
  }

  void OnWriteDone(bool ok) override {
    if (ok) WriteNext();  // else OnDone follows with the server's status
  }

  void OnReadDone(bool ok) override { got_reply_ = ok; }

  void OnDone(const grpc::Status& status) override {
    absl::StatusOr<v1::TensorInfo> result = absl::InternalError("PutTensor: the server's reply is not a TensorInfo");
    v1::TensorInfo info;
    if (!status.ok()) {
      result = ToAbslStatus(status);
    } else if (got_reply_ && grpc::SerializationTraits<v1::TensorInfo>::Deserialize(&reply_, &info).ok()) {
      result = std::move(info);
    }
    Done done = std::move(done_);
    const int64_t bytes = bytes_sent_;
    delete this;
    done(std::move(result), bytes);
  }

 private:
  void WriteNext() {
    if (header_sent_ && next_ >= end_) {
      StartWritesDone();
      return;
    }
    const int64_t n = std::min(chunk_bytes_, end_ - next_);
    message_ = wire::ChunkMessage(wire::kPutTensorChunk, header_sent_ ? nullptr : &header_, next_,
                                  data_.substr(static_cast<size_t>(next_), static_cast<size_t>(n)),
                                  /*owner=*/nullptr);
    header_sent_ = true;
    next_ += n;
    bytes_sent_ += n;
    StartWrite(&message_);
  }

  grpc::ClientContext context_;
  const std::string header_;  // serialized PutTensorHeader
  const absl::string_view data_;
  int64_t next_;
  const int64_t end_;
  const int64_t chunk_bytes_;
  Done done_;
  grpc::ByteBuffer message_;  // the write in flight
  grpc::ByteBuffer reply_;    // the TensorInfo
  bool got_reply_ = false;
  bool header_sent_ = false;
  int64_t bytes_sent_ = 0;
};

// The streams of one PutTensor upload: the promise is fulfilled when the last one is done,
// with the first error or else the reply that saw the tensor complete.
struct PutTensorUpload {
  absl::Mutex mu;
  int remaining ABSL_GUARDED_BY(mu) = 0;
  absl::Status error ABSL_GUARDED_BY(mu);
  std::optional<v1::TensorInfo> info ABSL_GUARDED_BY(mu);
  int64_t bytes ABSL_GUARDED_BY(mu) = 0;
  absl::Time start = absl::Now();
  std::promise<absl::StatusOr<PutTensorResult>> promise;

  void StreamDone(absl::StatusOr<v1::TensorInfo> result, int64_t bytes_sent) {
    absl::StatusOr<PutTensorResult> out;
    {
      absl::MutexLock lock(&mu);
      bytes += bytes_sent;
      if (!result.ok()) {
        if (error.ok()) error = result.status();
      } else if (!info.has_value() || result->complete()) {
        info = *std::move(result);
      }
      if (--remaining > 0) return;
      if (!error.ok()) {
        out = error;
      } else {
        PutTensorResult r;
        r.info = *std::move(info);
        r.latency = absl::Now() - start;
        r.bytes_sent = bytes;
        out = std::move(r);
      }
    }
    promise.set_value(std::move(out));
  }
};

// The streams of one GetTensor download, each filling its own slice of `result.data`; the
// promise is fulfilled when the last one is done, with the first error or the whole range.
struct GetTensorDownload {
  absl::Mutex mu;
  int remaining ABSL_GUARDED_BY(mu) = 0;
  absl::Status error ABSL_GUARDED_BY(mu);
  bool sized ABSL_GUARDED_BY(mu) = false;  // result.data has the range's length
  GetTensorResult result;  // data written by the streams at disjoint slices once sized
  int64_t offset = 0;      // of the whole range in the tensor
  absl::Time start = absl::Now();
  std::promise<absl::StatusOr<GetTensorResult>> promise;

  // The first stream's TensorInfo sizes the buffer unless the caller sized it (SizeFor).
  void Size(const v1::TensorInfo& info, int64_t length) {
    absl::MutexLock lock(&mu);
    if (!sized) {
      ResizeUninitialized(&result.data, static_cast<size_t>(std::max<int64_t>(0, length)));
      sized = true;
    }
    result.info = info;
  }

  // Sizes the buffer for `length` bytes before the streams start, unwritten: each stream's
  // copies first touch its own slice's pages, in parallel.
  void SizeFor(int64_t length) {
    absl::MutexLock lock(&mu);
    ResizeUninitialized(&result.data, static_cast<size_t>(std::max<int64_t>(0, length)));
    sized = true;
  }

  // False before the buffer is sized (data before the TensorInfo).
  bool Sized() {
    absl::MutexLock lock(&mu);
    return sized;
  }

  void StreamDone(const absl::Status& status) {
    absl::StatusOr<GetTensorResult> out;
    {
      absl::MutexLock lock(&mu);
      if (!status.ok() && error.ok()) error = status;
      if (--remaining > 0) return;
      if (!error.ok()) {
        out = error;
      } else {
        result.latency = absl::Now() - start;
        out = std::move(result);
      }
    }
    promise.set_value(std::move(out));
  }
};

// One GetTensor stream: copies its range's chunks into the download's buffer, from where
// gRPC received them (proto/wire/tensor_chunk.h: one copy on this side).
class GetTensorStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  GetTensorStream(v1::GetTensorRequest request, std::shared_ptr<GetTensorDownload> download)
      : request_(std::move(request)), download_(std::move(download)) {}

  grpc::ClientContext* context() { return &context_; }

  void Start(grpc::GenericStub* stub) {
    stub->PrepareBidiStreamingCall(&context_, "/gpucompute.v1.Compute/GetTensor", grpc::StubOptions(),
                                   this);
    bool own_buffer = false;
    (void)grpc::SerializationTraits<v1::GetTensorRequest>::Serialize(request_, &request_bytes_, &own_buffer);
    StartWriteLast(&request_bytes_, grpc::WriteOptions());
    StartRead(&message_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // OnDone follows
    if (absl::Status s = Accept(); !s.ok()) {
      error_ = s;
      context_.TryCancel();
      return;
    }
    StartRead(&message_);
  }

  void OnDone(const grpc::Status& status) override {
    const absl::Status result = !error_.ok() ? error_ : ToAbslStatus(status);
    auto download = std::move(download_);
    delete this;
    download->StreamDone(result);
  }

 private:
  absl::Status Accept() {
    absl::StatusOr<wire::ChunkView> chunk = wire::ParseChunk(message_, wire::kTensorData);
    message_.Clear();
    if (!chunk.ok()) return absl::InternalError(absl::StrCat("GetTensor: ", chunk.status().message()));
    if (chunk->submessage) {
      v1::TensorInfo info;
      if (!info.ParseFromString(*chunk->submessage)) {
        return absl::InternalError("GetTensor: the server's TensorInfo does not parse");
      }
      const int64_t length =
          request_.length() > 0 ? request_.length() : info.bytes() - request_.offset();
      download_->Size(info, length);
    }
    if (!download_->Sized()) {
      return absl::InternalError("GetTensor: the server sent bytes before the TensorInfo");
    }
    const int64_t offset = chunk->offset;
    const int64_t at = offset - download_->offset;
    const int64_t n = chunk->data_bytes();
    const int64_t mine_end = request_.offset() + (request_.length() > 0 ? request_.length() : INT64_MAX / 2);
    if (offset < request_.offset() || offset + n > mine_end || at < 0 ||
        at + n > static_cast<int64_t>(download_->result.data.size())) {
      return absl::InternalError(absl::StrCat("GetTensor: the server sent bytes [", offset, ", ",
                                              offset + n, ") outside the range"));
    }
    char* out = download_->result.data.data() + at;
    for (absl::string_view piece : chunk->data) {
      std::memcpy(out, piece.data(), piece.size());
      out += piece.size();
    }
    return absl::OkStatus();
  }

  grpc::ClientContext context_;
  v1::GetTensorRequest request_;
  grpc::ByteBuffer request_bytes_;
  grpc::ByteBuffer message_;  // the read in flight (a TensorData)
  std::shared_ptr<GetTensorDownload> download_;
  absl::Status error_;
};

template <typename T>
std::future<T> Ready(T value) {
  std::promise<T> p;
  p.set_value(std::move(value));
  return p.get_future();
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
  timings.decode_us = get(kDecodeUsKey);
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

namespace {

grpc::ChannelArguments ChannelArgs(const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(options.max_send_message_bytes);
  args.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  SetTlsChannelArguments(options.tls, &args);
  return args;
}

std::shared_ptr<grpc::ChannelCredentials> Credentials(const ClientOptions& options) {
  return options.credentials ? options.credentials : grpc::InsecureChannelCredentials();
}

// An explicit `credentials`, else those of `tls` (kept in options.credentials for the transfer
// channels).
absl::Status ResolveCredentials(ClientOptions& options) {
  if (options.credentials != nullptr || !options.tls.enabled()) return absl::OkStatus();
  auto credentials = MakeChannelCredentials(options.tls);
  if (!credentials.ok()) return credentials.status();
  options.credentials = *std::move(credentials);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const std::string& target,
                                                        ClientOptions options) {
  if (target.empty()) return absl::InvalidArgumentError("empty target");
  if (options.default_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("default_timeout must be positive");
  }
  if (absl::Status s = ResolveCredentials(options); !s.ok()) return s;
  const std::vector<std::string> servers =
      options.round_robin ? TargetAddresses(target) : std::vector<std::string>{target};
  grpc::ChannelArguments args = ChannelArgs(options);
  if (servers.size() > 1) args.SetLoadBalancingPolicyName("round_robin");
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(target, Credentials(options), args);
  if (channel == nullptr) return absl::InternalError("could not create a channel to " + target);
  if (options.connect_timeout > absl::ZeroDuration()) {
    if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + options.connect_timeout))) {
      return absl::UnavailableError(absl::StrCat("could not connect to ", target, " within ",
                                                 absl::FormatDuration(options.connect_timeout)));
    }
  }
  auto client = std::unique_ptr<Client>(new Client(target, std::move(channel), options));
  if (servers.size() > 1) {
    ClientOptions one = std::move(options);
    one.round_robin = false;
    one.connect_timeout = absl::ZeroDuration();  // the balanced channel has waited
    if (const auto host = TargetHost(target); host && one.tls.server_name.empty()) {
      one.tls.server_name = *host;  // TLS checks the name asked for, not the address
    }
    for (const std::string& server : servers) {
      absl::StatusOr<std::unique_ptr<Client>> member = Connect(server, one);
      if (!member.ok()) return member.status();
      client->members_.push_back(*std::move(member));
    }
  }
  return client;
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

std::vector<std::string> Client::servers() const {
  if (members_.empty()) return {target_};
  std::vector<std::string> all;
  for (const auto& m : members_) all.push_back(m->target());
  return all;
}

Client& Client::Pin() {
  Client* next = Next();
  return next != nullptr ? *next : *this;
}

Client* Client::Next() {
  if (members_.empty()) return nullptr;
  return members_[turn_.fetch_add(1, std::memory_order_relaxed) % members_.size()].get();
}

absl::Status Client::NeedsPin(absl::string_view what) const {
  return absl::FailedPreconditionError(absl::StrCat(
      what, ": resident tensors live on one server and this client balances over ",
      members_.size(), " (", target_, "); call through Pin(), a client of one of them"));
}

absl::Status Client::RefuseResident(google::protobuf::Message& request) const {
  if (members_.empty()) return absl::OkStatus();
  bool names = false;
  ForEachTensor(request, [&](v1::Tensor& t) { names |= t.payload_case() == v1::Tensor::kHandle; });
  if (names) return NeedsPin("a request naming a resident tensor");
  const auto* field = request.GetDescriptor()->FindFieldByName("output_placement");
  if (field != nullptr && request.GetReflection()->HasField(request, field)) {
    const auto& placement = static_cast<const v1::OutputPlacement&>(
        request.GetReflection()->GetMessage(request, field));
    if (placement.keep()) return NeedsPin("outputs kept on the server");
  }
  return absl::OkStatus();
}

grpc::GenericStub* Client::TransferStub(int i) {
  std::lock_guard<std::mutex> lock(transfer_mu_);
  if (i <= 0 || target_.empty()) {
    if (generic_ == nullptr) generic_ = std::make_unique<grpc::GenericStub>(channel_);
    return generic_.get();
  }
  const int extra = (i - 1) % (kMaxTransferChannels - 1);
  while (static_cast<int>(transfer_.size()) <= extra) {
    grpc::ChannelArguments args = ChannelArgs(options_);
    // Channels with equal arguments share a connection through the global subchannel pool: a
    // local pool and an argument of its own give each transfer channel its own connection.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("gpucompute.transfer_channel", static_cast<int>(transfer_.size()) + 1);
    auto channel = grpc::CreateCustomChannel(target_, Credentials(options_), args);
    transfer_.push_back(std::make_unique<grpc::GenericStub>(std::move(channel)));
  }
  return transfer_[extra].get();
}

void Client::Configure(const CallOptions& options, grpc::ClientContext* context) const {
  absl::Time deadline;
  if (options.deadline.has_value()) {
    deadline = *options.deadline;
  } else {
    deadline = absl::Now() + options.timeout.value_or(options_.default_timeout);
  }
  context->set_deadline(absl::ToChronoTime(deadline));
  context->set_wait_for_ready(options.wait_for_ready);
  if (!options_.token.empty()) context->AddMetadata(kAuthorizationKey, kBearerPrefix + options_.token);
  for (const auto& [key, value] : options.metadata) context->AddMetadata(key, value);
}

std::future<absl::StatusOr<PeriodogramResult>> Client::PeriodogramAsync(
    v1::PeriodogramRequest request, CallOptions options) {
  if (absl::Status s = RefuseResident(request); !s.ok()) {
    return Ready<absl::StatusOr<PeriodogramResult>>(std::move(s));
  }
  if (Client* member = Next()) return member->PeriodogramAsync(std::move(request), std::move(options));
  using Call = UnaryCall<v1::PeriodogramRequest, v1::PeriodogramResponse, PeriodogramResult>;
  auto call = std::make_unique<Call>();
  call->request = std::move(request);
  Configure(options, &call->context);
  std::future<absl::StatusOr<PeriodogramResult>> future = call->promise.get_future();
  Call* raw = call.release();  // owned by the callback from here on
  stub_->async()->Periodogram(
      &raw->context, &raw->request, &raw->response, [raw](grpc::Status status) {
        Complete(raw, status, TimedResponse<PeriodogramResult, Call>);
      });
  return future;
}

absl::StatusOr<PeriodogramResult> Client::Periodogram(v1::PeriodogramRequest request,
                                                      CallOptions options) {
  if (absl::Status s = RefuseResident(request); !s.ok()) return s;
  if (Client* member = Next()) return member->Periodogram(std::move(request), std::move(options));
  return CallMovingLargeTensors<PeriodogramResult>(
      std::move(request), std::move(options),
      [this](auto r, auto o) { return PeriodogramAsync(std::move(r), std::move(o)); });
}

std::future<absl::StatusOr<ServerInfoResult>> Client::ServerInfoAsync(CallOptions options) {
  if (Client* member = Next()) return member->ServerInfoAsync(std::move(options));
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
  if (!members_.empty()) {  // every server, one after another (LoadModel)
    return std::async(std::launch::async, [this, model = std::move(model), options,
                                           chunk_bytes]() mutable {
      return LoadModel(std::move(model), std::move(options), chunk_bytes);
    });
  }
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
  if (!members_.empty()) {  // on every server, so that any runs the next Dense
    absl::StatusOr<LoadModelResult> first;
    const std::string name = model.header.name();
    for (size_t i = 0; i < members_.size(); ++i) {
      auto loaded = members_[i]->LoadModel(i + 1 < members_.size() ? model : std::move(model),
                                           options, chunk_bytes);
      if (!loaded.ok()) {  // nothing stays loaded on some servers only
        for (size_t j = 0; j < i; ++j) (void)members_[j]->UnloadModel(name, options);
        return loaded.status();
      }
      if (i == 0) first = std::move(loaded);
    }
    return first;
  }
  return LoadModelAsync(std::move(model), std::move(options), chunk_bytes).get();
}

std::future<absl::StatusOr<UnloadModelResult>> Client::UnloadModelAsync(std::string name,
                                                                        CallOptions options) {
  if (!members_.empty()) {
    return std::async(std::launch::async, [this, name = std::move(name), options]() mutable {
      return UnloadModel(std::move(name), std::move(options));
    });
  }
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
  if (!members_.empty()) {
    absl::StatusOr<UnloadModelResult> first;
    for (size_t i = 0; i < members_.size(); ++i) {
      auto unloaded = members_[i]->UnloadModel(name, options);
      if (!unloaded.ok()) return unloaded.status();
      if (i == 0) first = std::move(unloaded);
    }
    return first;
  }
  return UnloadModelAsync(std::move(name), std::move(options)).get();
}

std::future<absl::StatusOr<ListModelsResult>> Client::ListModelsAsync(CallOptions options) {
  if (Client* member = Next()) return member->ListModelsAsync(std::move(options));
  using Call = UnaryCall<v1::ListModelsRequest, v1::ListModelsResponse, ListModelsResult>;
  return StartUnary<v1::ListModelsRequest, v1::ListModelsResponse, ListModelsResult>(
      v1::ListModelsRequest(), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->ListModels(context, req, resp, std::move(callback));
      },
      TimedResponse<ListModelsResult, Call>);
}

absl::StatusOr<ListModelsResult> Client::ListModels(CallOptions options) {
  return ListModelsAsync(std::move(options)).get();
}

std::future<absl::StatusOr<DenseResult>> Client::DenseAsync(v1::DenseRequest request,
                                                            CallOptions options) {
  if (absl::Status s = RefuseResident(request); !s.ok()) {
    return Ready<absl::StatusOr<DenseResult>>(std::move(s));
  }
  if (Client* member = Next()) return member->DenseAsync(std::move(request), std::move(options));
  using Call = UnaryCall<v1::DenseRequest, v1::DenseResponse, DenseResult>;
  return StartUnary<v1::DenseRequest, v1::DenseResponse, DenseResult>(
      std::move(request), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->Dense(context, req, resp, std::move(callback));
      },
      TimedResponse<DenseResult, Call>);
}

absl::StatusOr<DenseResult> Client::Dense(v1::DenseRequest request, CallOptions options) {
  if (absl::Status s = RefuseResident(request); !s.ok()) return s;
  if (Client* member = Next()) return member->Dense(std::move(request), std::move(options));
  return CallMovingLargeTensors<DenseResult>(
      std::move(request), std::move(options),
      [this](auto r, auto o) { return DenseAsync(std::move(r), std::move(o)); });
}

std::future<absl::StatusOr<AssimilateResult>> Client::AssimilateAsync(v1::AssimilateRequest request,
                                                                      CallOptions options) {
  if (absl::Status s = RefuseResident(request); !s.ok()) {
    return Ready<absl::StatusOr<AssimilateResult>>(std::move(s));
  }
  if (Client* member = Next()) return member->AssimilateAsync(std::move(request), std::move(options));
  using Call = UnaryCall<v1::AssimilateRequest, v1::AssimilateResponse, AssimilateResult>;
  return StartUnary<v1::AssimilateRequest, v1::AssimilateResponse, AssimilateResult>(
      std::move(request), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->Assimilate(context, req, resp, std::move(callback));
      },
      TimedResponse<AssimilateResult, Call>);
}

absl::StatusOr<AssimilateResult> Client::Assimilate(v1::AssimilateRequest request,
                                                    CallOptions options) {
  if (absl::Status s = RefuseResident(request); !s.ok()) return s;
  if (Client* member = Next()) return member->Assimilate(std::move(request), std::move(options));
  return CallMovingLargeTensors<AssimilateResult>(
      std::move(request), std::move(options),
      [this](auto r, auto o) { return AssimilateAsync(std::move(r), std::move(o)); });
}

std::future<absl::StatusOr<EchoResult>> Client::EchoAsync(v1::EchoRequest request,
                                                        CallOptions options) {
  if (absl::Status s = RefuseResident(request); !s.ok()) {
    return Ready<absl::StatusOr<EchoResult>>(std::move(s));
  }
  if (Client* member = Next()) return member->EchoAsync(std::move(request), std::move(options));
  using Call = UnaryCall<v1::EchoRequest, v1::EchoResponse, EchoResult>;
  return StartUnary<v1::EchoRequest, v1::EchoResponse, EchoResult>(
      std::move(request), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->Echo(context, req, resp, std::move(callback));
      },
      TimedResponse<EchoResult, Call>);
}

absl::StatusOr<EchoResult> Client::Echo(v1::EchoRequest request, CallOptions options) {
  if (absl::Status s = RefuseResident(request); !s.ok()) return s;
  if (Client* member = Next()) return member->Echo(std::move(request), std::move(options));
  return CallMovingLargeTensors<EchoResult>(
      std::move(request), std::move(options),
      [this](auto r, auto o) { return EchoAsync(std::move(r), std::move(o)); });
}

template <typename Result, typename Request, typename Start>
absl::StatusOr<Result> Client::CallMovingLargeTensors(Request request, CallOptions options,
                                                      Start start) {
  const absl::Time begin = absl::Now();
  LargeTensors moved(*this, options_.transfer_threshold_bytes, options);
  if (absl::Status s = moved.Send(request); !s.ok()) return s;
  absl::StatusOr<Result> result = start(std::move(request), options).get();
  moved.ReleaseInputs();
  if (!result.ok()) return result;
  if (absl::Status s = moved.Receive(result->response); !s.ok()) return s;
  result->latency = absl::Now() - begin;  // the user's whole call
  return result;
}

// ---------------------------------------------------------------- resident tensors

std::future<absl::StatusOr<PutTensorResult>> Client::PutTensorAsync(v1::DType dtype,
                                                                    std::vector<int64_t> shape,
                                                                    absl::string_view data,
                                                                    PutTensorOptions put,
                                                                    CallOptions options) {
  if (!members_.empty()) return Ready<absl::StatusOr<PutTensorResult>>(NeedsPin("PutTensor"));
  using Out = absl::StatusOr<PutTensorResult>;
  if (put.chunk_bytes <= 0 || put.streams <= 0) {
    return Ready<Out>(absl::InvalidArgumentError(absl::StrCat(
        "chunk_bytes and streams must be positive, got ", put.chunk_bytes, " and ", put.streams)));
  }
  absl::StatusOr<int64_t> n = NumElements(shape);
  if (!n.ok()) return Ready<Out>(n.status());
  const int64_t total = *n * DTypeSize(dtype);
  if (DTypeSize(dtype) == 0 || static_cast<int64_t>(data.size()) != total) {
    return Ready<Out>(absl::InvalidArgumentError(absl::StrCat(
        "PutTensor: ", data.size(), " bytes given but ", DTypeName(dtype), " of that shape needs ",
        total)));
  }
  // No more streams than chunks: a stream with nothing to send would only cost a round trip.
  // Slices start at multiples of 64 bytes, so that no element is split between two streams
  // (the server checks the values of whole elements as they arrive).
  const int64_t chunks = std::max<int64_t>(1, (total + put.chunk_bytes - 1) / put.chunk_bytes);
  int streams = static_cast<int>(std::min<int64_t>(put.streams, chunks));
  const int64_t slice = std::max<int64_t>(64, ((total + streams - 1) / streams + 63) / 64 * 64);
  streams = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(streams, (total + slice - 1) / slice)));
  v1::PutTensorHeader header;
  if (!put.handle.empty()) {
    header.set_handle(put.handle);
  } else if (streams == 1) {
    header.set_dtype(dtype);
    for (int64_t d : shape) header.add_shape(d);
  } else {
    absl::StatusOr<v1::TensorInfo> reserved = CreateTensor(dtype, shape, options);
    if (!reserved.ok()) return Ready<Out>(reserved.status());
    header.set_handle(reserved->handle());
  }
  auto upload = std::make_shared<PutTensorUpload>();
  std::future<Out> future = upload->promise.get_future();
  {
    absl::MutexLock lock(&upload->mu);
    upload->remaining = streams;
  }
  for (int i = 0; i < streams; ++i) {
    const int64_t begin = std::min(total, i * slice), end = std::min(total, begin + slice);
    auto* stream = new PutTensorStream(  // deletes itself in OnDone
        header, data, begin, end, put.chunk_bytes,
        [upload](absl::StatusOr<v1::TensorInfo> info, int64_t bytes) {
          upload->StreamDone(std::move(info), bytes);
        });
    Configure(options, stream->context());
    stream->Start(TransferStub(put.first_stream + i));
  }
  return future;
}

absl::StatusOr<PutTensorResult> Client::PutTensor(v1::DType dtype, std::vector<int64_t> shape,
                                                  absl::string_view data, PutTensorOptions put,
                                                  CallOptions options) {
  return PutTensorAsync(dtype, std::move(shape), data, put, std::move(options)).get();
}

std::future<absl::StatusOr<v1::TensorInfo>> Client::CreateTensorAsync(v1::DType dtype,
                                                                      std::vector<int64_t> shape,
                                                                      CallOptions options,
                                                                      absl::Duration idle_expiry) {
  if (!members_.empty()) return Ready<absl::StatusOr<v1::TensorInfo>>(NeedsPin("CreateTensor"));
  using Call = UnaryCall<v1::CreateTensorRequest, v1::TensorInfo, v1::TensorInfo>;
  v1::CreateTensorRequest request;
  request.set_dtype(dtype);
  for (int64_t d : shape) request.add_shape(d);
  if (idle_expiry > absl::ZeroDuration()) {
    request.set_idle_expiry_ms(std::max<int64_t>(1, absl::ToInt64Milliseconds(idle_expiry)));
  }
  return StartUnary<v1::CreateTensorRequest, v1::TensorInfo, v1::TensorInfo>(
      std::move(request), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->CreateTensor(context, req, resp, std::move(callback));
      },
      [](Call& c) -> absl::StatusOr<v1::TensorInfo> { return std::move(c.response); });
}

absl::StatusOr<v1::TensorInfo> Client::CreateTensor(v1::DType dtype, std::vector<int64_t> shape,
                                                    CallOptions options,
                                                    absl::Duration idle_expiry) {
  return CreateTensorAsync(dtype, std::move(shape), std::move(options), idle_expiry).get();
}

std::future<absl::StatusOr<GetTensorResult>> Client::GetTensorAsync(std::string handle,
                                                                    GetTensorOptions get,
                                                                    CallOptions options) {
  if (!members_.empty()) return Ready<absl::StatusOr<GetTensorResult>>(NeedsPin("GetTensor"));
  using Out = absl::StatusOr<GetTensorResult>;
  auto download = std::make_shared<GetTensorDownload>();
  download->offset = get.offset;
  int streams = 1;
  int64_t length = get.length;
  if (get.streams > 1) {
    // Slicing needs the range's length: from the caller, else from the tensor's description.
    if (length <= 0) {
      absl::StatusOr<v1::ListTensorsResponse> listed = ListTensors(options);
      if (!listed.ok()) return Ready<Out>(listed.status());
      const auto& all = listed->tensors();
      auto it = std::find_if(all.begin(), all.end(),
                             [&](const v1::TensorInfo& t) { return t.handle() == handle; });
      // Not listed: one stream, which gets the server's own answer (NOT_FOUND).
      length = it == all.end() ? 0 : it->bytes() - get.offset;
    }
    // No more streams than messages of the server's default size.
    const int64_t chunk = get.chunk_bytes > 0 ? get.chunk_bytes : kDefaultChunkBytes;
    streams = static_cast<int>(std::clamp<int64_t>((length + chunk - 1) / chunk, 1, get.streams));
  }
  {
    absl::MutexLock lock(&download->mu);
    download->remaining = streams;
  }
  if (streams > 1) download->SizeFor(length);
  std::future<Out> future = download->promise.get_future();
  const int64_t slice = streams > 1 ? (length + streams - 1) / streams : get.length;
  for (int i = 0; i < streams; ++i) {
    v1::GetTensorRequest request;
    request.set_handle(handle);
    request.set_offset(get.offset + i * slice);
    request.set_length(streams > 1 ? std::min(slice, length - i * slice) : get.length);
    request.set_chunk_bytes(get.chunk_bytes);
    auto* stream = new GetTensorStream(std::move(request), download);  // deletes itself in OnDone
    Configure(options, stream->context());
    stream->Start(TransferStub(get.first_stream + (streams > 1 ? i : 0)));
  }
  return future;
}

absl::StatusOr<GetTensorResult> Client::GetTensor(std::string handle, GetTensorOptions get,
                                                  CallOptions options) {
  return GetTensorAsync(std::move(handle), get, std::move(options)).get();
}

std::future<absl::Status> Client::DeleteTensorAsync(std::string handle, CallOptions options) {
  if (!members_.empty()) return Ready<absl::Status>(NeedsPin("DeleteTensor"));
  v1::DeleteTensorRequest request;
  request.set_handle(std::move(handle));
  return StartStatusUnary<v1::DeleteTensorRequest, v1::DeleteTensorResponse>(
      std::move(request), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->DeleteTensor(context, req, resp, std::move(callback));
      });
}

absl::Status Client::DeleteTensor(std::string handle, CallOptions options) {
  return DeleteTensorAsync(std::move(handle), std::move(options)).get();
}

std::future<absl::StatusOr<v1::ListTensorsResponse>> Client::ListTensorsAsync(CallOptions options) {
  if (!members_.empty()) return Ready<absl::StatusOr<v1::ListTensorsResponse>>(NeedsPin("ListTensors"));
  using Call = UnaryCall<v1::ListTensorsRequest, v1::ListTensorsResponse, v1::ListTensorsResponse>;
  return StartUnary<v1::ListTensorsRequest, v1::ListTensorsResponse, v1::ListTensorsResponse>(
      v1::ListTensorsRequest(), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->ListTensors(context, req, resp, std::move(callback));
      },
      [](Call& c) -> absl::StatusOr<v1::ListTensorsResponse> { return std::move(c.response); });
}

absl::StatusOr<v1::ListTensorsResponse> Client::ListTensors(CallOptions options) {
  return ListTensorsAsync(std::move(options)).get();
}

// ---------------------------------------------------------------- shared memory

absl::Status Client::RegisterSharedMemory(std::string name, std::string key, int64_t offset,
                                          int64_t byte_size, CallOptions options) {
  if (!members_.empty()) {  // on every server, so that any reads the region
    for (size_t i = 0; i < members_.size(); ++i) {
      absl::Status s = members_[i]->RegisterSharedMemory(name, key, offset, byte_size, options);
      if (!s.ok()) {  // nothing stays registered on some servers only
        for (size_t j = 0; j < i; ++j) (void)members_[j]->UnregisterSharedMemory(name, options);
        return s;
      }
    }
    return absl::OkStatus();
  }
  v1::SharedMemoryProofRequest ask;
  ask.set_key(key);
  ask.set_offset(offset);
  using ProofCall = UnaryCall<v1::SharedMemoryProofRequest, v1::SharedMemoryProofResponse, std::string>;
  absl::StatusOr<std::string> proof =
      StartUnary<v1::SharedMemoryProofRequest, v1::SharedMemoryProofResponse, std::string>(
          std::move(ask), [&](grpc::ClientContext* c) { Configure(options, c); },
          [this](auto* context, auto* req, auto* resp, auto callback) {
            stub_->async()->SharedMemoryProof(context, req, resp, std::move(callback));
          },
          [](ProofCall& c) -> absl::StatusOr<std::string> {
            return std::move(*c.response.mutable_proof());
          })
          .get();
  if (!proof.ok()) return proof.status();
  // The proof goes where the region starts for as long as the call takes; the bytes it covers
  // are put back after (the server has read it by then, every worker of a worker-mode front too).
  absl::StatusOr<std::string> covered = SwapSharedMemoryBytes(key, offset, *proof);
  if (!covered.ok()) return covered.status();
  v1::RegisterSharedMemoryRequest request;
  request.set_name(std::move(name));
  request.set_key(key);
  request.set_offset(offset);
  request.set_byte_size(byte_size);
  request.set_proof(*std::move(proof));
  absl::Status registered =
      StartStatusUnary<v1::RegisterSharedMemoryRequest, v1::RegisterSharedMemoryResponse>(
          std::move(request), [&](grpc::ClientContext* c) { Configure(options, c); },
          [this](auto* context, auto* req, auto* resp, auto callback) {
            stub_->async()->RegisterSharedMemory(context, req, resp, std::move(callback));
          })
          .get();
  absl::StatusOr<std::string> restored = SwapSharedMemoryBytes(key, offset, *covered);
  if (registered.ok() && !restored.ok()) return restored.status();
  return registered;
}

std::future<absl::Status> Client::UnregisterSharedMemoryAsync(std::string name,
                                                              CallOptions options) {
  if (!members_.empty()) {
    return std::async(std::launch::async, [this, name = std::move(name), options]() mutable {
      return UnregisterSharedMemory(std::move(name), std::move(options));
    });
  }
  v1::UnregisterSharedMemoryRequest request;
  request.set_name(std::move(name));
  return StartStatusUnary<v1::UnregisterSharedMemoryRequest, v1::UnregisterSharedMemoryResponse>(
      std::move(request), [&](grpc::ClientContext* c) { Configure(options, c); },
      [this](auto* context, auto* req, auto* resp, auto callback) {
        stub_->async()->UnregisterSharedMemory(context, req, resp, std::move(callback));
      });
}

absl::Status Client::UnregisterSharedMemory(std::string name, CallOptions options) {
  if (!members_.empty()) {
    absl::Status status;
    for (const auto& m : members_) status.Update(m->UnregisterSharedMemory(name, options));
    return status;
  }
  return UnregisterSharedMemoryAsync(std::move(name), std::move(options)).get();
}

}  // namespace gpucompute::client
