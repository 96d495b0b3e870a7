// The worker-mode front's pure parts: what it reads from requests to route them, how it merges
// the workers' replies and their metrics.
#include <gtest/gtest.h>

#include <string>

#include <grpcpp/impl/codegen/proto_utils.h>

#include "gpucompute/v1/compute.pb.h"
#include "server/front/request_route.h"
#include "server/front/response_merge.h"
#include "server/front/worker_metrics.h"

namespace gpucompute::front {
namespace {

template <typename Message>
grpc::ByteBuffer Serialize(const Message& m) {
  grpc::ByteBuffer out;
  bool own = false;
  EXPECT_TRUE(grpc::SerializationTraits<Message>::Serialize(m, &out, &own).ok());
  return out;
}

template <typename Message>
Message Parse(const grpc::ByteBuffer& b) {
  grpc::ByteBuffer copy(b);
  Message m;
  EXPECT_TRUE(grpc::SerializationTraits<Message>::Deserialize(&copy, &m).ok());
  return m;
}

TEST(RequestRoute, MethodsAndFanout) {
  EXPECT_EQ(MethodOf("/gpucompute.v1.Compute/Dense"), Method::kDense);
  EXPECT_EQ(MethodOf("/gpucompute.v1.Compute/Submit"), Method::kSubmit);
  EXPECT_EQ(MethodOf("/gpucompute.v1.Compute/NoSuch"), Method::kOther);
  EXPECT_EQ(MethodOf("/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"), Method::kOther);
  EXPECT_EQ(FanoutOf(Method::kLoadModel), Fanout::kAll);
  EXPECT_EQ(FanoutOf(Method::kRegisterSharedMemory), Fanout::kAll);
  // Any one worker issues a registration proof; every worker checks it (one secret).
  EXPECT_EQ(MethodOf("/gpucompute.v1.Compute/SharedMemoryProof"), Method::kSharedMemoryProof);
  EXPECT_EQ(FanoutOf(Method::kSharedMemoryProof), Fanout::kOne);
  EXPECT_EQ(FanoutOf(Method::kListTensors), Fanout::kMerge);
  EXPECT_EQ(FanoutOf(Method::kServerInfo), Fanout::kMerge);
  EXPECT_EQ(FanoutOf(Method::kPeriodogram), Fanout::kOne);
  EXPECT_STREQ(MethodLabel(Method::kUnloadModel), "unload_model");
}

TEST(RequestRoute, HandlePrefixRoundTrips) {
  for (int w : {0, 1, 7, 123}) {
    EXPECT_EQ(WorkerOfHandle(HandlePrefix(w) + "0123456789abcdef"), w);
  }
  EXPECT_EQ(WorkerOfHandle("0123456789abcdef"), -1);
  EXPECT_EQ(WorkerOfHandle("w-12"), -1);
  EXPECT_EQ(WorkerOfHandle("wx-12"), -1);
  EXPECT_EQ(WorkerOfHandle("w12"), -1);
  EXPECT_EQ(WorkerOfHandle(""), -1);
}

TEST(RequestRoute, DenseNamesModelHandleAndKeep) {
  v1::DenseRequest r;
  r.set_model("mlp");
  r.mutable_input()->set_handle("w1-abc");
  r.mutable_output_placement()->set_keep(true);
  const RequestFacts f = InspectRequest(Method::kDense, Serialize(r));
  EXPECT_EQ(f.model, "mlp");
  ASSERT_EQ(f.handles.size(), 1u);
  EXPECT_EQ(f.handles[0], "w1-abc");
  EXPECT_TRUE(f.keeps_output);
  EXPECT_FALSE(f.creates_tensor);
}

TEST(RequestRoute, InlineBytesAreNotHandles) {
  v1::DenseRequest r;
  r.set_model("m");
  r.mutable_input()->set_data(std::string(1 << 20, 'x'));  // skipped, not copied
  const RequestFacts f = InspectRequest(Method::kDense, Serialize(r));
  EXPECT_EQ(f.model, "m");
  EXPECT_TRUE(f.handles.empty());
  EXPECT_FALSE(f.keeps_output);
}

TEST(RequestRoute, PeriodogramSeriesHandlesNestedDeep) {
  v1::PeriodogramRequest r;
  v1::Series* s = r.add_series();
  s->mutable_t()->set_handle("w0-t");
  s->mutable_y()->set_handle("w0-y");
  r.add_series()->mutable_dy()->set_handle("w2-dy");
  const RequestFacts f = InspectRequest(Method::kPeriodogram, Serialize(r));
  EXPECT_EQ(f.handles, (std::vector<std::string>{"w0-t", "w0-y", "w2-dy"}));
}

TEST(RequestRoute, SubmitJobIdAndItsDenseModel) {
  v1::SubmitRequest r;
  r.set_id("job-7");
  r.mutable_dense()->set_model("m2");
  r.mutable_dense()->mutable_input()->set_handle("w3-x");
  const RequestFacts f = InspectRequest(Method::kSubmit, Serialize(r));
  EXPECT_EQ(f.job_id, "job-7");
  EXPECT_EQ(f.model, "m2");
  EXPECT_EQ(f.handles, (std::vector<std::string>{"w3-x"}));
}

TEST(RequestRoute, TensorCallsName) {
  v1::GetTensorRequest get;
  get.set_handle("w4-g");
  EXPECT_EQ(InspectRequest(Method::kGetTensor, Serialize(get)).handles,
            (std::vector<std::string>{"w4-g"}));
  v1::PutTensorChunk put;
  put.mutable_header()->set_handle("w5-p");
  put.set_data("bytes");
  RequestFacts f = InspectRequest(Method::kPutTensor, Serialize(put));
  EXPECT_EQ(f.handles, (std::vector<std::string>{"w5-p"}));
  EXPECT_FALSE(f.creates_tensor);
  v1::PutTensorChunk fresh;
  fresh.mutable_header()->set_dtype(v1::FLOAT32);
  fresh.mutable_header()->add_shape(3);
  EXPECT_TRUE(InspectRequest(Method::kPutTensor, Serialize(fresh)).creates_tensor);
  EXPECT_TRUE(InspectRequest(Method::kCreateTensor, Serialize(v1::CreateTensorRequest())).creates_tensor);
}

TEST(RequestRoute, GarbageGivesWhatWasReadAndNeverCrashes) {
  v1::DenseRequest r;
  r.set_model("m");
  r.mutable_input()->set_handle("w1-h");
  grpc::ByteBuffer good = Serialize(r);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(good.Dump(&slices).ok());
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {  // every truncation
    grpc::Slice slice(bytes.data(), cut);
    (void)InspectRequest(Method::kDense, grpc::ByteBuffer(&slice, 1));
  }
  const std::string junk = "\xff\xff\xff\xff\x0f\x12\x80\x80\x80\x80\x08";
  grpc::Slice slice(junk.data(), junk.size());
  const RequestFacts f = InspectRequest(Method::kDense, grpc::ByteBuffer(&slice, 1));
  EXPECT_TRUE(f.handles.empty());
  EXPECT_TRUE(InspectRequest(Method::kDense, grpc::ByteBuffer()).model.empty());
}

TEST(ResponseMerge, ModelListsByNameWithEveryWorkersGpu) {
  v1::ListModelsResponse a, b;
  v1::ModelInfo* m = a.add_models();
  m->set_name("x");
  m->add_devices(0);
  *b.add_models() = *m;
  v1::ModelInfo* only_b = b.add_models();
  only_b->set_name("y");
  only_b->add_devices(0);
  std::vector<WorkerReply> replies(2);
  replies[0].worker = 0;
  replies[0].device_index = 0;
  replies[0].messages.push_back(Serialize(a));
  replies[1].worker = 1;
  replies[1].device_index = 1;
  replies[1].messages.push_back(Serialize(b));
  MergedReply merged = MergeReplies(Method::kListModels, replies, {}, {0, 1});
  ASSERT_TRUE(merged.status.ok());
  auto list = Parse<v1::ListModelsResponse>(merged.message);
  ASSERT_EQ(list.models_size(), 2);
  EXPECT_EQ(list.models(0).name(), "x");
  EXPECT_EQ(std::vector<int>(list.models(0).devices().begin(), list.models(0).devices().end()),
            (std::vector<int>{0, 1}));
  EXPECT_EQ(std::vector<int>(list.models(1).devices().begin(), list.models(1).devices().end()),
            (std::vector<int>{1}));
}

TEST(ResponseMerge, LoadNeedsEveryWorkerUnloadAnyAndPreciseErrorsWin) {
  v1::ModelInfo info;
  info.set_name("m");
  std::vector<WorkerReply> replies(2);
  replies[0].messages.push_back(Serialize(info));
  replies[1].status = grpc::Status(grpc::StatusCode::UNAVAILABLE, "gone");
  replies.push_back(WorkerReply{});
  replies[2].status = grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "no memory");
  MergedReply load = MergeReplies(Method::kLoadModel, replies, {}, {});
  EXPECT_EQ(load.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  MergedReply unload = MergeReplies(Method::kUnloadModel, replies, {}, {});
  EXPECT_TRUE(unload.status.ok());
  EXPECT_EQ(ModelNameOf(replies[0].messages[0]), "m");
}

TEST(ResponseMerge, ServerInfoListsWorkersAndDownGpus) {
  v1::ServerInfoResponse info;
  info.set_backend("cuda");
  v1::DeviceInfo* d = info.add_devices();
  d->set_index(0);
  d->set_healthy(true);
  info.mutable_dense_batching()->set_requests(5);
  std::vector<WorkerReply> replies(1);
  replies[0].worker = 0;
  replies[0].device_index = 0;
  replies[0].messages.push_back(Serialize(info));
  std::vector<WorkerSnapshot> workers(2);
  workers[0].index = 0;
  workers[0].state = WorkerState::kServing;
  workers[1].index = 1;
  workers[1].state = WorkerState::kDown;
  workers[1].restarts = 1;
  workers[1].message = "killed by signal 9";
  MergedReply merged = MergeReplies(Method::kServerInfo, replies, workers, {0, 1});
  ASSERT_TRUE(merged.status.ok());
  auto out = Parse<v1::ServerInfoResponse>(merged.message);
  ASSERT_EQ(out.devices_size(), 2);
  EXPECT_TRUE(out.devices(0).healthy());
  EXPECT_FALSE(out.devices(1).healthy());
  EXPECT_NE(out.devices(1).health_message().find("worker 1 is down"), std::string::npos);
  ASSERT_EQ(out.workers_size(), 2);
  EXPECT_EQ(out.workers(1).state(), "down");
  EXPECT_EQ(out.workers(1).restarts(), 1);
  EXPECT_EQ(out.dense_batching().requests(), 5);
}

TEST(WorkerMetrics, FamiliesOnceSamplesOfEveryWorkerLabelled) {
  const std::string a =
      "# HELP x_total calls\n# TYPE x_total counter\nx_total{op=\"a\"} 1\nx_total{op=\"b\"} 2\n"
      "# HELP h a histogram\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 3\nh_count 1\n"
      "# HELP g plain\n# TYPE g gauge\ng 7\n";
  const std::string b = "# HELP x_total calls\n# TYPE x_total counter\nx_total{op=\"a\"} 10\n";
  const std::string merged = MergeWorkerExpositions({{"0", a}, {"1", b}});
  EXPECT_EQ(merged,
            "# HELP x_total calls\n# TYPE x_total counter\n"
            "x_total{worker=\"0\",op=\"a\"} 1\nx_total{worker=\"0\",op=\"b\"} 2\n"
            "x_total{worker=\"1\",op=\"a\"} 10\n"
            "# HELP h a histogram\n# TYPE h histogram\n"
            "h_bucket{worker=\"0\",le=\"1\"} 1\nh_sum{worker=\"0\"} 3\nh_count{worker=\"0\"} 1\n"
            "# HELP g plain\n# TYPE g gauge\ng{worker=\"0\"} 7\n");
  EXPECT_EQ(MergeWorkerExpositions({}), "");
}

}  // namespace
}  // namespace gpucompute::front
