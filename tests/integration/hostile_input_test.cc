// What a peer that does not follow the protocol gets, through a real server on loopback: a
// precise status, nothing lost that the server had accepted, nothing left behind, and the next
// call served. Messages are written raw, so that they can be what no client library sends.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/create_channel.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/support/sync_stream.h>

#include "gmock/gmock.h"
#include "gpucompute/v1/compute.grpc.pb.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/shared_memory_region.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "tests/integration/loopback_server.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;

// A message's bytes as one buffer.
grpc::ByteBuffer Raw(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

template <typename Message>
grpc::ByteBuffer Wire(const Message& m) {
  return Raw(m.SerializeAsString());
}

template <typename Message>
bool Parse(grpc::ByteBuffer* buffer, Message* out) {
  return grpc::SerializationTraits<Message>::Deserialize(buffer, out).ok();
}

// Field 1, length-delimited, 200 bytes long, of which 3 follow: no protobuf parser takes it.
const std::string kTruncated = std::string("\x0a\xc8\x01", 3) + "abc";

// The first PutTensor message of a new float64 tensor of `elements`: its header, and `data`
// at `offset`.
// An inline float64 tensor of `shape` holding `values`.
void Fill(v1::Tensor* t, std::vector<int64_t> shape, const std::vector<double>& values) {
  t->set_dtype(v1::FLOAT64);
  for (int64_t d : shape) t->add_shape(d);
  t->set_data(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(double));
}

v1::PutTensorChunk NewTensorChunk(int64_t elements, std::string data, int64_t offset = 0) {
  v1::PutTensorChunk chunk;
  chunk.mutable_header()->set_dtype(v1::FLOAT64);
  chunk.mutable_header()->add_shape(elements);
  chunk.set_offset(offset);
  chunk.set_data(std::move(data));
  return chunk;
}

v1::SubmitRequest EchoJob(const std::string& id) {
  v1::SubmitRequest job;
  job.set_id(id);
  v1::Tensor* t = job.mutable_echo()->mutable_tensor();
  t->set_dtype(v1::FLOAT64);
  t->add_shape(2);
  t->set_data(std::string(16, '\0'));
  return job;
}

class HostileInput : public ::testing::Test {
 protected:
  void SetUp() override { Start(Config()); }

  static ServerConfig Config() {
    ServerConfig c = testing::LoopbackConfig();
    c.allow_shared_memory = true;
    return c;
  }
  void Start(const ServerConfig& c) {
    loopback_ = {};
    loopback_.Start(c);
    ASSERT_NE(loopback_.server, nullptr);
  }

  // A proof for `client` (x-gpucompute-client; empty: none, the caller is then its address)
  // to register `key` from `offset`.
  std::string Proof(const std::string& key, int64_t offset, const std::string& client) {
    grpc::ClientContext context;
    if (!client.empty()) context.AddMetadata("x-gpucompute-client", client);
    v1::SharedMemoryProofRequest request;
    request.set_key(key);
    request.set_offset(offset);
    v1::SharedMemoryProofResponse response;
    const grpc::Status status = loopback_.stub->SharedMemoryProof(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.proof();
  }

  // RegisterSharedMemory through the raw stub as `client` with `proof`.
  grpc::Status Register(const std::string& name, const std::string& key, int64_t offset,
                        int64_t bytes, const std::string& proof, const std::string& client) {
    grpc::ClientContext context;
    if (!client.empty()) context.AddMetadata("x-gpucompute-client", client);
    v1::RegisterSharedMemoryRequest request;
    request.set_name(name);
    request.set_key(key);
    request.set_offset(offset);
    request.set_byte_size(bytes);
    request.set_proof(proof);
    v1::RegisterSharedMemoryResponse response;
    return loopback_.stub->RegisterSharedMemory(&context, request, &response);
  }

  // As the clients register: a proof, written at `offset` in the object when it has room there,
  // then the registration with it.
  grpc::Status RegisterWithProof(const std::string& name, const std::string& key, int64_t offset,
                                 int64_t bytes, const std::string& client = "") {
    const std::string proof = Proof(key, offset, client);
    (void)client::SwapSharedMemoryBytes(key, offset, proof);
    return Register(name, key, offset, bytes, proof, client);
  }

  // Model "wide": float32, one layer 1 -> `out` of zero weights.
  void LoadWideModel(int64_t out) {
    grpc::ClientContext context;
    v1::ModelInfo info;
    auto writer = loopback_.stub->LoadModel(&context, &info);
    v1::LoadModelChunk header;
    header.mutable_header()->set_name("wide");
    header.mutable_header()->set_dtype(v1::FLOAT32);
    v1::TensorHeader* w = header.mutable_header()->add_layers()->mutable_weight();
    w->set_dtype(v1::FLOAT32);
    w->add_shape(1);
    w->add_shape(out);
    ASSERT_TRUE(writer->Write(header));
    v1::LoadModelChunk chunk;
    chunk.mutable_chunk()->set_layer(0);
    chunk.mutable_chunk()->set_tensor(v1::LAYER_TENSOR_WEIGHT);
    chunk.mutable_chunk()->set_data(std::string(out * 4, '\0'));
    ASSERT_TRUE(writer->Write(chunk));
    ASSERT_TRUE(writer->WritesDone());
    const grpc::Status loaded = writer->Finish();
    ASSERT_TRUE(loaded.ok()) << loaded.error_message();
  }

  // A complete resident tensor of `values` float64 values 0, 0.01, 0.02, ...: its handle.
  std::string PutSeries(int64_t values) {
    std::vector<double> t(static_cast<size_t>(values));
    for (int64_t i = 0; i < values; ++i) t[i] = 0.01 * static_cast<double>(i);
    grpc::ClientContext context;
    grpc::ByteBuffer response;
    auto upload = Upload("/gpucompute.v1.Compute/PutTensor", &context, &response);
    EXPECT_TRUE(upload->Write(
        Wire(NewTensorChunk(values, std::string(reinterpret_cast<const char*>(t.data()), t.size() * 8)))));
    EXPECT_TRUE(upload->WritesDone());
    EXPECT_TRUE(upload->Finish().ok());
    v1::TensorInfo info;
    EXPECT_TRUE(Parse(&response, &info));
    return info.handle();
  }

  // A periodogram of `series` series that all name tensor `handle` as t and y.
  grpc::Status PeriodogramOf(const std::string& handle, int series) {
    v1::PeriodogramRequest request;
    for (int i = 0; i < series; ++i) {
      v1::Series* s = request.add_series();
      s->mutable_t()->set_handle(handle);
      s->mutable_y()->set_handle(handle);
    }
    auto* grid = request.mutable_frequency()->mutable_uniform();
    grid->set_f0(0.1);
    grid->set_df(0.1);
    grid->set_n(4);
    grpc::ClientContext context;
    v1::PeriodogramResponse response;
    return loopback_.stub->Periodogram(&context, request, &response);
  }

  // A bidi or client-streaming call of `method` that reads and writes raw buffers.
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> Bidi(
      const char* method, grpc::ClientContext* context) {
    return std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>>(
        grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
            loopback_.channel.get(),
            grpc::internal::RpcMethod(method, grpc::internal::RpcMethod::BIDI_STREAMING), context));
  }
  std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> Upload(const char* method,
                                                               grpc::ClientContext* context,
                                                               grpc::ByteBuffer* response) {
    return std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>>(
        grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(
            loopback_.channel.get(),
            grpc::internal::RpcMethod(method, grpc::internal::RpcMethod::CLIENT_STREAMING), context,
            response));
  }

  // The server still answers: an Echo on a new call.
  void ExpectServing() {
    grpc::ClientContext context;
    v1::EchoResponse response;
    const grpc::Status s = loopback_.stub->Echo(&context, EchoJob("x").echo(), &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }

  testing::LoopbackServer loopback_;
};

// A corrupt message in a Submit stream: the job before it is answered, the stream ends
// INVALID_ARGUMENT naming the message (it used to end OK, as if the client had half-closed,
// and the job after it was lost without a word).
TEST_F(HostileInput, CorruptSubmitMessageEndsTheStreamAfterAnsweringTheJobsRead) {
  grpc::ClientContext context;
  auto stream = Bidi("/gpucompute.v1.Compute/Submit", &context);
  ASSERT_TRUE(stream->Write(Wire(EchoJob("1"))));
  (void)stream->Write(Raw(kTruncated));
  (void)stream->Write(Wire(EchoJob("2")));  // after the corrupt one: never read
  (void)stream->WritesDone();
  std::vector<std::string> answered;
  grpc::ByteBuffer buffer;
  while (stream->Read(&buffer)) {
    v1::SubmitResponse r;
    ASSERT_TRUE(Parse(&buffer, &r));
    EXPECT_EQ(r.code(), 0) << r.message();
    answered.push_back(r.id());
  }
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("message 2 of the stream is not a SubmitRequest"));
  EXPECT_THAT(answered, ::testing::ElementsAre("1"));
  ExpectServing();
}

// A corrupt first message: nothing to answer, the same status.
TEST_F(HostileInput, CorruptFirstSubmitMessage) {
  grpc::ClientContext context;
  auto stream = Bidi("/gpucompute.v1.Compute/Submit", &context);
  (void)stream->Write(Raw(kTruncated));
  (void)stream->WritesDone();
  grpc::ByteBuffer buffer;
  EXPECT_FALSE(stream->Read(&buffer));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("message 1 of the stream"));
  ExpectServing();
}

// A corrupt PutTensor message after a good first one: INVALID_ARGUMENT, and the tensor the
// stream created is gone (nobody has its handle).
TEST_F(HostileInput, CorruptPutTensorMessageIsInvalidArgumentAndLeavesNothing) {
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  auto upload = Upload("/gpucompute.v1.Compute/PutTensor", &context, &response);
  ASSERT_TRUE(upload->Write(Wire(NewTensorChunk(4, std::string(16, '\0')))));
  (void)upload->Write(Raw(kTruncated));
  (void)upload->WritesDone();
  const grpc::Status status = upload->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();

  grpc::ClientContext list_context;
  v1::ListTensorsResponse listed;
  ASSERT_TRUE(loopback_.stub->ListTensors(&list_context, v1::ListTensorsRequest(), &listed).ok());
  EXPECT_EQ(listed.tensors_size(), 0);
  ExpectServing();
}

// A model 1 -> 1,048,576 (a 4 MB weight) and 32,768 rows of 1 feature (128 KiB): 128 GiB of
// output. Inline it is over the response limit; kept, discarded or in shared memory it used to
// be allocated before any bound was checked (std::bad_alloc, the server aborted). Now every
// placement is bounded before any work.
TEST_F(HostileInput, HugeDenseOutputIsRefusedBeforeItIsAllocatedWhateverItsPlacement) {
  constexpr int64_t kOut = int64_t{1} << 20, kRows = 32768;
  LoadWideModel(kOut);
  auto object = client::SharedMemoryRegion::Create(1 << 20);
  ASSERT_TRUE(object.ok()) << object.status();
  {
    const grpc::Status registered = RegisterWithProof("out", object->key(), 0, 1 << 20);
    ASSERT_TRUE(registered.ok()) << registered.error_message();
  }
  struct Case {
    const char* what;
    std::function<void(v1::OutputPlacement*)> place;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"inline", [](v1::OutputPlacement*) {}, "responses are limited to"},
      {"keep", [](v1::OutputPlacement* p) { p->set_keep(true); }, "--tensor_quota_bytes"},
      {"keep above", [](v1::OutputPlacement* p) { p->set_keep_above_bytes(0); }, "--tensor_quota_bytes"},
      {"discard", [](v1::OutputPlacement* p) { p->set_discard(true); }, "--tensor_quota_bytes"},
      {"shared memory", [](v1::OutputPlacement* p) { p->mutable_shared_memory()->set_region("out"); },
       "but the placement has 1048576"},
  };
  for (const Case& c : cases) {
    v1::DenseRequest request;
    request.set_model("wide");
    v1::Tensor* x = request.mutable_input();
    x->set_dtype(v1::FLOAT32);
    x->add_shape(kRows);
    x->add_shape(1);
    x->set_data(std::string(kRows * 4, '\0'));
    c.place(request.mutable_output_placement());
    grpc::ClientContext context;
    v1::DenseResponse response;
    const grpc::Status status = loopback_.stub->Dense(&context, request, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << c.what << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message)) << c.what;
  }
  ExpectServing();
}

// A gzip-compressed message (1 MiB of zeros: ~1 KB on the wire) is refused before it is
// inflated: compression is off on the server, so no small message becomes a large one.
TEST_F(HostileInput, CompressedMessagesAreRefused) {
  v1::EchoRequest request;
  v1::Tensor* t = request.mutable_tensor();
  t->set_dtype(v1::FLOAT64);
  t->add_shape(1 << 17);
  t->set_data(std::string(1 << 20, '\0'));
  grpc::ClientContext context;
  context.set_compression_algorithm(GRPC_COMPRESS_GZIP);
  v1::EchoResponse response;
  const grpc::Status status = loopback_.stub->Echo(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("gzip"));
  ExpectServing();
}

// A few hundred bytes naming one resident tensor many times: each name decodes it again, so the
// decoded inputs are bounded by the server's memory budget, across requests, before they are
// allocated; the leases are given back when a request ends.
TEST_F(HostileInput, ResidentTensorNamedManyTimesIsBoundedByTheServersMemoryBudget) {
  ServerConfig c = Config();
  c.limits.memory_budget_bytes = int64_t{64} << 20;
  Start(c);
  const std::string handle = PutSeries(int64_t{1} << 20);  // 8 MiB
  // 8 series x (t, y) x 8 MiB, twice (the working copies): 256 MiB.
  const grpc::Status refused = PeriodogramOf(handle, 8);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("(--memory_budget_bytes)"));
  // One series (32 MiB with its copies) fits, again and again: nothing was left held.
  for (int i = 0; i < 3; ++i) {
    const grpc::Status fits = PeriodogramOf(handle, 1);
    EXPECT_TRUE(fits.ok()) << fits.error_message();
  }
  EXPECT_EQ(loopback_.server->memory_in_use(), 0);
  ExpectServing();
}

// A shared-memory region named by many tensors of one request: each is copied out of the
// client's memory, so each copy is leased from the server's budget first, and a request that
// would hold more is refused before it copies; the leases go with the request.
TEST_F(HostileInput, SharedMemoryNamedManyTimesIsBoundedByTheServersMemoryBudget) {
  ServerConfig c = Config();
  c.limits.memory_budget_bytes = int64_t{34} << 20;
  c.limits.memory_budget_share = 0.5;  // one caller: 17 MiB
  Start(c);
  constexpr int64_t kN = 512, kn = 1024;  // x: 1024 x 512 doubles, 4 MiB (and so each analysis)
  auto object = client::SharedMemoryRegion::Create(int64_t{8} << 20);
  ASSERT_TRUE(object.ok()) << object.status();
  ASSERT_TRUE(RegisterWithProof("in", object->key(), 0, int64_t{8} << 20).ok());
  double* x = reinterpret_cast<double*>(object->data());
  for (int64_t i = 0; i < kn * kN; ++i) x[i] = static_cast<double>(i % 7);
  auto assimilate = [&](int problems) {
    v1::AssimilateRequest request;
    for (int p = 0; p < problems; ++p) {
      v1::AssimilationProblem* problem = request.add_problems();
      v1::Tensor* t = problem->mutable_x();
      t->set_dtype(v1::FLOAT64);
      t->add_shape(kn);
      t->add_shape(kN);
      t->mutable_shared_memory()->set_region("in");
      t->mutable_shared_memory()->set_length(kn * kN * 8);
      std::vector<double> hx(2 * kN, 1.0), y(2, 0.0), r(2, 1.0);
      for (int64_t j = 0; j < kN; ++j) hx[j] = static_cast<double>(j % 5);
      Fill(problem->mutable_hx(), {2, kN}, hx);
      Fill(problem->mutable_y(), {2}, y);
      Fill(problem->mutable_obs_error_variance(), {2}, r);
    }
    grpc::ClientContext context;
    v1::AssimilateResponse response;
    return loopback_.stub->Assimilate(&context, request, &response);
  };
  const grpc::Status refused = assimilate(8);  // 8 copies of 4 MiB
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("copied out of the region"));
  EXPECT_THAT(refused.error_message(), HasSubstr("--memory_budget_bytes)"));
  // 3 copies and their 3 analyses (24 MiB) fit the budget but not one caller's share of it.
  const grpc::Status over_share = assimilate(3);
  EXPECT_EQ(over_share.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over_share.error_message();
  EXPECT_THAT(over_share.error_message(), HasSubstr("the analyses would hold 12582960 bytes"));
  EXPECT_THAT(over_share.error_message(), HasSubstr("one caller may hold 17825792 bytes (--memory_budget_share"));
  for (int i = 0; i < 3; ++i) {  // two fit (16 MiB and 32 bytes), again and again: nothing left held
    const grpc::Status fits = assimilate(2);
    EXPECT_TRUE(fits.ok()) << fits.error_message();
    EXPECT_EQ(loopback_.server->memory_in_use(), 0);
  }
  ExpectServing();
}

// Outputs computed are leased from the server's memory budget too: a Dense request whose output
// would take more than the caller's share of it is refused before it runs, one that fits runs,
// again and again.
TEST_F(HostileInput, DenseOutputsAreBoundedByTheServersMemoryBudget) {
  ServerConfig c = Config();
  c.limits.memory_budget_bytes = int64_t{16} << 20;
  c.limits.memory_budget_share = 0.5;  // one caller: 8 MiB
  Start(c);
  constexpr int64_t kOut = int64_t{1} << 20;  // 4 MiB of float32 output a row
  LoadWideModel(kOut);
  auto dense = [&](int rows) {
    v1::DenseRequest request;
    request.set_model("wide");
    Fill(request.mutable_input(), {rows, 1}, std::vector<double>(rows, 1.0));
    grpc::ClientContext context;
    v1::DenseResponse response;
    return loopback_.stub->Dense(&context, request, &response);
  };
  const grpc::Status refused = dense(3);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
  EXPECT_THAT(refused.error_message(), HasSubstr("the dense output would hold 12582912 bytes"));
  for (int i = 0; i < 3; ++i) {
    const grpc::Status fits = dense(2);
    EXPECT_TRUE(fits.ok()) << fits.error_message();
    EXPECT_EQ(loopback_.server->memory_in_use(), 0);
  }
  ExpectServing();
}

// A LoadModel header and then nothing: the stream is cancelled after the idle timeout, and
// its name and share of --max_models are free again.
TEST_F(HostileInput, SilentModelUploadIsCancelledAndReleasesItsName) {
  ServerConfig c = Config();
  c.limits.upload_idle_timeout = absl::Milliseconds(300);
  c.limits.dense.max_models = 1;
  Start(c);
  auto header = [](const std::string& name) {
    v1::LoadModelChunk h;
    h.mutable_header()->set_name(name);
    v1::TensorHeader* w = h.mutable_header()->add_layers()->mutable_weight();
    w->set_dtype(v1::FLOAT32);
    w->add_shape(2);
    w->add_shape(2);
    return h;
  };
  const absl::Time start = absl::Now();
  grpc::ClientContext silent;
  v1::ModelInfo info;
  auto writer = loopback_.stub->LoadModel(&silent, &info);
  ASSERT_TRUE(writer->Write(header("held")));
  const grpc::Status ended = writer->Finish();  // waits: the client sends nothing more
  EXPECT_NE(ended.error_code(), grpc::StatusCode::OK);
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  // The name and the one model slot are free (once the server has seen the cancellation, a
  // moment after the client): a complete load of the same name succeeds.
  auto load = [&] {
    grpc::ClientContext context;
    auto writer = loopback_.stub->LoadModel(&context, &info);
    (void)writer->Write(header("held"));
    v1::LoadModelChunk chunk;
    chunk.mutable_chunk()->set_layer(0);
    chunk.mutable_chunk()->set_tensor(v1::LAYER_TENSOR_WEIGHT);
    chunk.mutable_chunk()->set_data(std::string(16, '\0'));
    (void)writer->Write(chunk);
    (void)writer->WritesDone();
    return writer->Finish();
  };
  grpc::Status loaded = load();
  for (int i = 0; i < 250 && loaded.error_code() == grpc::StatusCode::ALREADY_EXISTS; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
    loaded = load();
  }
  EXPECT_TRUE(loaded.ok()) << loaded.error_message();
}

// Headers whose models fit one at a time but not together: the second is refused while the
// first is still uploading (its bytes are reserved from its header on).
TEST_F(HostileInput, ModelUploadsReserveTheirBytesFromTheHeader) {
  // The CPU backend needs 4 x the stored bytes of host memory: two models of 3/16 of what is
  // free now fit one at a time (3/4) but not together (3/2).
  if (testing::TestBackend() != "cpu") GTEST_SKIP() << "sized for the CPU backend's host check";
  const int64_t free_bytes = static_cast<int64_t>(sysconf(_SC_AVPHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  const int64_t out = free_bytes * 3 / 16 / 4 / 1024;  // float32 weight [1024, out]
  auto header = [&](const std::string& name) {
    v1::LoadModelChunk h;
    h.mutable_header()->set_name(name);
    v1::TensorHeader* w = h.mutable_header()->add_layers()->mutable_weight();
    w->set_dtype(v1::FLOAT32);
    w->add_shape(1024);
    w->add_shape(out);
    return h;
  };
  ServerConfig c = Config();
  c.limits.dense.max_features = int64_t{1} << 40;
  Start(c);
  // The second header is sent once the first is on the wire; on a loaded machine the server
  // may still read the second first, and then refuses the first instead: that order is tried
  // again (the refusal is the same, the roles swapped).
  for (int attempt = 0; attempt < 10; ++attempt) {
    grpc::ClientContext first_context;
    v1::ModelInfo first_info;
    auto first = loopback_.stub->LoadModel(&first_context, &first_info);
    ASSERT_TRUE(first->Write(header("first")));
    absl::SleepFor(absl::Milliseconds(200));  // most often enough for the server to read it
    grpc::ClientContext second_context;
    v1::ModelInfo second_info;
    auto second = loopback_.stub->LoadModel(&second_context, &second_info);
    (void)second->Write(header("second"));
    (void)second->WritesDone();
    const grpc::Status refused = second->Finish();
    first_context.TryCancel();
    const grpc::Status first_status = first->Finish();
    if (first_status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      if (absl::StrContains(first_status.error_message(), "of the other loads in progress")) continue;
      // The host's free memory fell by a quarter meanwhile (other processes): not this test's case.
      GTEST_SKIP() << "the host's free memory changed under the test: " << first_status.error_message();
    }
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << refused.error_message();
    EXPECT_THAT(refused.error_message(), HasSubstr("of the other loads in progress"));
    return;
  }
  FAIL() << "the server read the second header first ten times in a row";
}

// A unary call whose body does not parse: INVALID_ARGUMENT naming the message type (gRPC
// itself answers UNIMPLEMENTED with no message).
TEST_F(HostileInput, UnparsableUnaryRequestsAreInvalidArgument) {
  for (const char* method :
       {"/gpucompute.v1.Compute/Periodogram", "/gpucompute.v1.Compute/Dense",
        "/gpucompute.v1.Compute/Assimilate", "/gpucompute.v1.Compute/Echo",
        "/gpucompute.v1.Compute/ServerInfo", "/gpucompute.v1.Compute/UnloadModel",
        "/gpucompute.v1.Compute/ListModels", "/gpucompute.v1.Compute/CreateTensor",
        "/gpucompute.v1.Compute/DeleteTensor", "/gpucompute.v1.Compute/ListTensors",
        "/gpucompute.v1.Compute/SharedMemoryProof", "/gpucompute.v1.Compute/RegisterSharedMemory",
        "/gpucompute.v1.Compute/UnregisterSharedMemory"}) {
    grpc::ClientContext context;
    grpc::ByteBuffer response;
    const grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        loopback_.channel.get(), grpc::internal::RpcMethod(method, grpc::internal::RpcMethod::NORMAL_RPC),
        &context, Raw(kTruncated), &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << method << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("the request does not parse as a gpucompute.v1.")) << method;
  }
  ExpectServing();
}

// A caller names an object that gpucompute's clients did not create (another process's
// semaphore, an object of another user): refused before it is opened, whatever it is.
TEST_F(HostileInput, SharedMemoryObjectsNotNamedAsTheClientsNameThemAreRefused) {
  const std::string key = absl::StrCat("/hostile-input-test-", getpid());
  const int fd = shm_open(key.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  close(fd);
  const grpc::Status status = Register("theirs", key, 0, 4096, "", "");
  shm_unlink(key.c_str());
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("the server opens only objects named \"/gpucompute-...\""));
  ExpectServing();
}

// Another process's object, even one named as the clients name theirs: the server maps only
// regions whose first bytes hold a proof it issued to this caller for this key and offset,
// which only a process that can write the object can put there. Every way a caller without
// that access might try is PERMISSION_DENIED, and nothing is registered.
TEST_F(HostileInput, SharedMemoryOfAnotherProcessCannotBeRegistered) {
  auto victim = client::SharedMemoryRegion::Create(1 << 16);
  ASSERT_TRUE(victim.ok()) << victim.status();
  std::memset(victim->data(), 7, 1 << 16);  // the victim's own data
  const std::string key = victim->key();
  const std::string mine = Proof(key, 0, "mallory");
  const std::string victims = Proof(key, 0, "victim");
  std::string tampered = mine;
  tampered.back() ^= 1;
  struct Case {
    const char* what;
    std::string proof;
    std::string written;  // what the region starts with ("": the victim's data)
    int64_t offset;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {"no proof", "", "", 0, "proof: missing"},
           {"a proof of its own, not in the region", mine, "", 0, "does not start with it"},
           {"another caller's proof, in the region", victims, victims, 0,
            "not one this server gave this caller"},
           {"a proof for another offset", Proof(key, 4096, "mallory"), "", 0,
            "not one this server gave this caller"},
           {"a tampered proof", tampered, tampered, 0, "not one this server gave this caller"},
           {"a proof of the wrong size", mine.substr(1), "", 0, "bytes, not 56"}}) {
    SCOPED_TRACE(c.what);
    std::memset(victim->data(), 7, 64);
    if (!c.written.empty()) std::memcpy(victim->data(), c.written.data(), c.written.size());
    const grpc::Status status = Register("stolen", key, c.offset, 1 << 16, c.proof, "mallory");
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message));
  }
  // Nothing of mallory's is registered: a tensor naming the region is NOT_FOUND.
  {
    grpc::ClientContext context;
    context.AddMetadata("x-gpucompute-client", "mallory");
    v1::EchoRequest echo;
    echo.mutable_tensor()->set_dtype(v1::UINT8);
    echo.mutable_tensor()->add_shape(8);
    echo.mutable_tensor()->mutable_shared_memory()->set_region("stolen");
    echo.mutable_tensor()->mutable_shared_memory()->set_length(8);
    v1::EchoResponse response;
    EXPECT_EQ(loopback_.stub->Echo(&context, echo, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  // The owner, who can write its object, registers it.
  const grpc::Status owner = RegisterWithProof("mine", key, 0, 1 << 16, "victim");
  EXPECT_TRUE(owner.ok()) << owner.error_message();
  ExpectServing();
}

// A corrupt LoadModel message, even after a complete model: INVALID_ARGUMENT naming the
// message, nothing loaded, the name free.
TEST_F(HostileInput, CorruptModelUploadMessageLoadsNothing) {
  v1::LoadModelChunk header;
  header.mutable_header()->set_name("m");
  v1::TensorHeader* w = header.mutable_header()->add_layers()->mutable_weight();
  w->set_dtype(v1::FLOAT32);
  w->add_shape(2);
  w->add_shape(2);
  v1::LoadModelChunk chunk;
  chunk.mutable_chunk()->set_layer(0);
  chunk.mutable_chunk()->set_tensor(v1::LAYER_TENSOR_WEIGHT);
  chunk.mutable_chunk()->set_data(std::string(16, '\0'));
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  auto upload = Upload("/gpucompute.v1.Compute/LoadModel", &context, &response);
  ASSERT_TRUE(upload->Write(Wire(header)));
  ASSERT_TRUE(upload->Write(Wire(chunk)));  // the model is complete here
  (void)upload->Write(Raw(kTruncated));
  (void)upload->WritesDone();
  const grpc::Status status = upload->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("message 3 of the stream is not a LoadModelChunk"));
  grpc::ClientContext list_context;
  v1::ListModelsResponse listed;
  ASSERT_TRUE(loopback_.stub->ListModels(&list_context, v1::ListModelsRequest(), &listed).ok());
  EXPECT_EQ(listed.models_size(), 0);
  ExpectServing();
}

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Offsets and lengths near 2^63: INVALID_ARGUMENT, and the range in the message is the one sent
// (its end computed without overflowing).
TEST_F(HostileInput, RangesNearTheTopOfInt64AreRefusedExactly) {
  // PutTensor: a chunk at an offset whose end passes INT64_MAX.
  {
    grpc::ClientContext context;
    grpc::ByteBuffer response;
    auto upload = Upload("/gpucompute.v1.Compute/PutTensor", &context, &response);
    (void)upload->Write(Wire(NewTensorChunk(4, std::string(16, '\0'), kMax - 3)));
    (void)upload->WritesDone();
    const grpc::Status status = upload->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(),
                HasSubstr("[9223372036854775804, 9223372036854775820) are outside the tensor's 32 bytes"));
  }
  // GetTensor: a length whose end passes INT64_MAX, on a complete tensor.
  {
    const std::string handle = PutSeries(4);
    grpc::ClientContext get_context;
    v1::GetTensorRequest get;
    get.set_handle(handle);
    get.set_offset(8);
    get.set_length(kMax - 2);
    auto reader = loopback_.stub->GetTensor(&get_context, get);
    v1::TensorData data;
    while (reader->Read(&data)) {
    }
    const grpc::Status status = reader->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("[8, 9223372036854775813) are outside the tensor's 32 bytes"));
  }
  // RegisterSharedMemory: a region whose end passes INT64_MAX, in a real object.
  {
    auto object = client::SharedMemoryRegion::Create(4096);
    ASSERT_TRUE(object.ok()) << object.status();
    // No proof can be there: refused before any range is computed or anything is mapped.
    const grpc::Status status = RegisterWithProof("far", object->key(), kMax - 10, 100);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::PERMISSION_DENIED) << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr("at offset 9223372036854775797 does not start with it"));
  }
  ExpectServing();
}

}  // namespace
}  // namespace gpucompute
