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

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/cpp/credentials.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "gpucompute/v1/compute.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace gpucompute::client {

class SubmitStream;  // submit_stream.h

// Names of the trailing-metadata keys the server reports its timings under.
inline constexpr char kDecodeUsKey[] = "x-gpucompute-decode-us";
inline constexpr char kQueueUsKey[] = "x-gpucompute-queue-us";
inline constexpr char kComputeUsKey[] = "x-gpucompute-compute-us";
inline constexpr char kTotalUsKey[] = "x-gpucompute-total-us";
inline constexpr char kBatchRequestsKey[] = "x-gpucompute-batch-requests";

struct ClientOptions {
  // Operation calls (Periodogram, Dense, Assimilate, Echo; not their Async forms) move every
  // inline input tensor and every output of more than this many bytes over several
  // connections at once (large_tensors.h); 0: everything inline.
  int64_t transfer_threshold_bytes = int64_t{4} << 20;
  // Deadline of a call whose CallOptions set none.
  absl::Duration default_timeout = absl::Seconds(30);
  // Message size limits of the channel (both directions); gRPC's default receive limit is 4 MiB.
  int max_send_message_bytes = 1 << 30;
  int max_receive_message_bytes = 1 << 30;
  // Channel credentials; null means `tls` below: plaintext (the server's default) unless it
  // names files or sets use_tls.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  // TLS or mutual TLS from PEM files (docs/security.md "TLS"); server_name applies to `credentials`
  // too.
  TlsOptions tls;
  // Bearer token of a server run with --auth_token_file, sent as "authorization: Bearer
  // <token>" with every call; empty: none. (ResolveToken reads it from a file or the
  // environment.)
  std::string token;
  // When positive, Connect waits up to this long for the channel to become ready and fails with
  // UNAVAILABLE otherwise. Zero connects lazily, on the first call.
  absl::Duration connect_timeout = absl::ZeroDuration();
  // A target of several addresses (resolved by Connect) is balanced: each operation call goes
  // to the next server in turn with every message it sends, models and shared-memory regions
  // are set up on every server, and resident tensors need Pin() (client/cpp/balance.h). False:
  // gRPC's pick_first, every call to one server.
  bool round_robin = true;
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
  std::optional<int64_t> decode_us;       // receipt to admission (parsing, decoding)
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

// ---------------------------------------------------------------- dense models

// What one LoadModel stream carries: the header, then each tensor's raw bytes (row-major,
// little-endian, in the dtype its TensorHeader names). ModelBuilder (model_builder.h) makes one
// from float vectors. Tensors are sent in this order, each in chunks; a tensor with no bytes
// sends no chunk.
struct ModelUpload {
  struct TensorData {
    int32_t layer = 0;
    v1::LayerTensor tensor = v1::LAYER_TENSOR_WEIGHT;
    std::string data;
  };
  v1::ModelHeader header;
  std::vector<TensorData> tensors;

  // Sum of the tensors' bytes.
  int64_t tensor_bytes() const;
};

// Tensor bytes per LoadModelChunk unless the call says otherwise: 4 MiB less 1 KiB, so that a
// chunk with its framing stays under gRPC's default 4 MiB message limit (a server or proxy
// that keeps the default still takes it).
inline constexpr int64_t kDefaultChunkBytes = (int64_t{4} << 20) - 1024;

struct LoadModelResult {
  v1::ModelInfo info;      // the model as the server registered it
  ServerTimings timings;
  absl::Duration latency;  // call start to ModelInfo received, upload included
  int64_t bytes_sent = 0;  // tensor bytes streamed
  int64_t messages = 0;    // LoadModelChunk messages streamed, the header included
};

struct UnloadModelResult {
  ServerTimings timings;
  absl::Duration latency;
};

struct ListModelsResult {
  v1::ListModelsResponse response;
  ServerTimings timings;
  absl::Duration latency;
};

struct DenseResult {
  v1::DenseResponse response;  // output: [rows, out_features of the last layer], model dtype
  ServerTimings timings;
  absl::Duration latency;
};

// ---------------------------------------------------------------- data assimilation

struct AssimilateResult {
  v1::AssimilateResponse response;  // one AssimilationResult per problem, in order
  ServerTimings timings;
  absl::Duration latency;
};

// ---------------------------------------------------------------- transport

struct EchoResult {
  v1::EchoResponse response;
  ServerTimings timings;
  absl::Duration latency;
};

// ---------------------------------------------------------------- resident tensors

struct PutTensorOptions {
  // Tensor bytes per PutTensorChunk (the default keeps every message under gRPC's default
  // 4 MiB limit).
  int64_t chunk_bytes = kDefaultChunkBytes;
  // Upload over this many PutTensor streams at once, each sending a contiguous slice, after
  // reserving the tensor with CreateTensor; 1: one stream, no CreateTensor. Each stream has
  // its own connection (one TCP connection moves ~0.5 GB/s whatever the HTTP/2 settings; 8-16
  // move several GB/s): the client's channel and up to 15 more to the same target, made on
  // first use and kept (a client made by FromChannel uses its one channel).
  int streams = 1;
  // The connection of the first stream (the others follow it), so that several uploads at
  // once use different connections.
  int first_stream = 0;
  // Write into this tensor, reserved by CreateTensor, instead of making one.
  std::string handle;
};

struct PutTensorResult {
  v1::TensorInfo info;     // handle, dtype, shape, bytes; complete once every byte arrived
  absl::Duration latency;  // call start to the last stream's reply
  int64_t bytes_sent = 0;
};

struct GetTensorOptions {
  int64_t offset = 0;       // first byte of the range
  int64_t length = 0;       // 0: to the end
  int64_t chunk_bytes = 0;  // bytes per streamed message; 0: the server's default (~4 MiB)
  // Fetch over this many GetTensor streams at once, each a contiguous slice of the range on a
  // connection of its own (as PutTensorOptions::streams); with length 0 the tensor's size is
  // looked up first (ListTensors). 1: one stream.
  int streams = 1;
  int first_stream = 0;  // the connection of the first stream, as PutTensorOptions's
};

struct GetTensorResult {
  v1::TensorInfo info;  // the whole tensor's description
  std::string data;     // the range's bytes
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

  // Uploads a dense model over one client-streaming LoadModel call: the header, then every
  // tensor in chunks of at most `chunk_bytes` bytes, so a model of many GiB never meets a
  // message size limit. `model`'s buffers are released tensor by tensor as they are sent.
  // The server validates (INVALID_ARGUMENT with a field path such as
  // "header.layers[1].weight.shape"), refuses a loaded name (ALREADY_EXISTS) or a model over
  // its limits or device memory (RESOURCE_EXHAUSTED); nothing is registered on failure.
  // INVALID_ARGUMENT here when chunk_bytes is not positive. Large models need a deadline to
  // match (CallOptions::timeout).
  std::future<absl::StatusOr<LoadModelResult>> LoadModelAsync(
      ModelUpload model, CallOptions options = {}, int64_t chunk_bytes = kDefaultChunkBytes);
  absl::StatusOr<LoadModelResult> LoadModel(ModelUpload model, CallOptions options = {},
                                            int64_t chunk_bytes = kDefaultChunkBytes);

  // Removes a resident model (NOT_FOUND when none has that name). Requests already admitted
  // for it still complete.
  std::future<absl::StatusOr<UnloadModelResult>> UnloadModelAsync(std::string name,
                                                                  CallOptions options = {});
  absl::StatusOr<UnloadModelResult> UnloadModel(std::string name, CallOptions options = {});

  // Every resident model: name, dtype, layer shapes, device bytes.
  std::future<absl::StatusOr<ListModelsResult>> ListModelsAsync(CallOptions options = {});
  absl::StatusOr<ListModelsResult> ListModels(CallOptions options = {});

  // Rows through a resident model's stack (MakeDenseRequest in model_builder.h builds one).
  // NOT_FOUND for an unknown model; INVALID_ARGUMENT naming both sizes for a wrong feature
  // count. Concurrent calls on one model are batched by rows on the server.
  std::future<absl::StatusOr<DenseResult>> DenseAsync(v1::DenseRequest request,
                                                      CallOptions options = {});
  absl::StatusOr<DenseResult> Dense(v1::DenseRequest request, CallOptions options = {});

  // Ensemble Kalman analyses, a batch of independent problems per call
  // (assimilation_request.h builds them; conventions in server/ops/assimilate/assimilate.h).
  // INVALID_ARGUMENT names the problem, field and rule (problems[i].obs_error: the covariance
  // R is not positive definite, ...); RESOURCE_EXHAUSTED over the server's AssimilateLimits.
  std::future<absl::StatusOr<AssimilateResult>> AssimilateAsync(v1::AssimilateRequest request,
                                                                CallOptions options = {});
  absl::StatusOr<AssimilateResult> Assimilate(v1::AssimilateRequest request,
                                              CallOptions options = {});

  // Transport diagnostic: the tensor comes back (or, with request.discard, only its receipt).
  std::future<absl::StatusOr<EchoResult>> EchoAsync(v1::EchoRequest request,
                                                    CallOptions options = {});
  absl::StatusOr<EchoResult> Echo(v1::EchoRequest request, CallOptions options = {});

  // Opens a Submit stream (submit_stream.h): jobs of any operation, each result handed to
  // `on_result` on a gRPC thread as it finishes. The options' deadline bounds the whole stream
  // (none unless set: the client default does not apply to streams).
  std::unique_ptr<SubmitStream> OpenSubmitStream(std::function<void(v1::SubmitResponse&&)> on_result,
                                                 CallOptions options = {});

  // ---- resident tensors (docs/python.md "Resident tensors and shared memory"). They belong to the
  // caller: the "x-gpucompute-client" metadata value (CallOptions::metadata), else the
  // connection's address without its port. Pass a handle as any operation's input with
  // HandleTensor(handle), keep outputs with KeepOutputs() (tensor_util.h).

  // Uploads `data` (product(shape) * sizeof(dtype) bytes, borrowed: it must stay alive and
  // unchanged until the future is ready) as a new resident tensor, in chunks; with
  // put.streams > 1 over that many parallel streams after a CreateTensor call (made
  // synchronously by PutTensorAsync). RESOURCE_EXHAUSTED over the caller's quota. A failed
  // parallel upload may leave the reserved tensor incomplete until DeleteTensor or its expiry.
  std::future<absl::StatusOr<PutTensorResult>> PutTensorAsync(v1::DType dtype,
                                                              std::vector<int64_t> shape,
                                                              absl::string_view data,
                                                              PutTensorOptions put = {},
                                                              CallOptions options = {});
  absl::StatusOr<PutTensorResult> PutTensor(v1::DType dtype, std::vector<int64_t> shape,
                                            absl::string_view data, PutTensorOptions put = {},
                                            CallOptions options = {});

  // Reserves an empty resident tensor whose bytes come through PutTensor streams that name
  // its handle (several may upload disjoint ranges at once). A positive `idle_expiry` shorter
  // than the server's frees it sooner when unused.
  std::future<absl::StatusOr<v1::TensorInfo>> CreateTensorAsync(
      v1::DType dtype, std::vector<int64_t> shape, CallOptions options = {},
      absl::Duration idle_expiry = absl::ZeroDuration());
  absl::StatusOr<v1::TensorInfo> CreateTensor(v1::DType dtype, std::vector<int64_t> shape,
                                              CallOptions options = {},
                                              absl::Duration idle_expiry = absl::ZeroDuration());

  // A range of a complete resident tensor (NOT_FOUND for an unknown handle or another
  // client's, FAILED_PRECONDITION while incomplete).
  std::future<absl::StatusOr<GetTensorResult>> GetTensorAsync(std::string handle,
                                                              GetTensorOptions get = {},
                                                              CallOptions options = {});
  absl::StatusOr<GetTensorResult> GetTensor(std::string handle, GetTensorOptions get = {},
                                            CallOptions options = {});

  std::future<absl::Status> DeleteTensorAsync(std::string handle, CallOptions options = {});
  absl::Status DeleteTensor(std::string handle, CallOptions options = {});

  // The caller's resident tensors and their bytes in all.
  std::future<absl::StatusOr<v1::ListTensorsResponse>> ListTensorsAsync(CallOptions options = {});
  absl::StatusOr<v1::ListTensorsResponse> ListTensors(CallOptions options = {});

  // ---- shared memory (server started with --allow_shared_memory; FAILED_PRECONDITION
  // otherwise). Registers [offset, offset + byte_size) of the POSIX object `key`
  // (SharedMemoryRegion::key()) as region `name`; tensors then name (region, offset, length)
  // with SharedMemoryTensor(), outputs go there with SharedMemoryOutputs(). The server
  // registers only objects the caller can write: this asks for a proof (SharedMemoryProof),
  // writes it at `offset` in the object (56 bytes, put back as they were once registered) and
  // registers with it. Two calls.
  absl::Status RegisterSharedMemory(std::string name, std::string key, int64_t offset,
                                    int64_t byte_size, CallOptions options = {});
  // Unregisters region `name`, or every region of the caller when `name` is empty.
  std::future<absl::Status> UnregisterSharedMemoryAsync(std::string name, CallOptions options = {});
  absl::Status UnregisterSharedMemory(std::string name, CallOptions options = {});

  const std::string& target() const { return target_; }
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  // The targets this client calls: its target, or each of its addresses when balanced.
  std::vector<std::string> servers() const;
  // A client of one server, for resident tensors and calls that name them: this client when it
  // has one server, else the next in turn (owned by this client, which must outlive it).
  Client& Pin();

 private:
  Client(std::string target, std::shared_ptr<grpc::Channel> channel, ClientOptions options);

  // On a balanced client, the member that runs the next operation call (nullptr: this client
  // has one server and runs it itself).
  Client* Next();
  // On a balanced client, FAILED_PRECONDITION for an operation request that names resident
  // tensors or keeps its outputs (they would live on a server the caller cannot name).
  absl::Status RefuseResident(google::protobuf::Message& request) const;
  // On a balanced client, the status of the resident-tensor call `what`, which needs Pin().
  absl::Status NeedsPin(absl::string_view what) const;

  // An operation call with its large tensors moved in parallel (LargeTensors); `start`
  // begins the plain call.
  template <typename Result, typename Request, typename Start>
  absl::StatusOr<Result> CallMovingLargeTensors(Request request, CallOptions options, Start start);

  // Fills deadline, wait_for_ready and metadata of `context` from `options`.
  void Configure(const CallOptions& options, grpc::ClientContext* context) const;

  // The (generic: PutTensor and GetTensor go in their wire form) stub for parallel transfer
  // stream `i`: 0 is the client's own channel; others are extra channels to the target with
  // their own connections, made on first use (at most kMaxTransferChannels in all).
  grpc::GenericStub* TransferStub(int i);

  static constexpr int kMaxTransferChannels = 16;

  std::string target_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Compute::Stub> stub_;
  ClientOptions options_;
  std::mutex transfer_mu_;  // guards generic_ and transfer_
  std::unique_ptr<grpc::GenericStub> generic_;               // on channel_
  std::vector<std::unique_ptr<grpc::GenericStub>> transfer_;  // each on a channel of its own
  // Balanced (several servers): a client of each address, and the turn.
  std::vector<std::unique_ptr<Client>> members_;
  std::atomic<uint64_t> turn_{0};
};

}  // namespace gpucompute::client
