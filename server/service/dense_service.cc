// The dense-model handlers of ComputeService: LoadModel, UnloadModel, ListModels, Dense.
#include <utility>

#include "absl/time/clock.h"
#include "server/common/nvtx.h"
#include "server/service/call_timing.h"
#include "server/service/compute_service.h"
#include "server/service/dense_decode.h"
#include "server/service/load_model_reactor.h"
#include "server/service/status_mapping.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

grpc::ServerReadReactor<v1::LoadModelChunk>* ComputeService::LoadModel(
    grpc::CallbackServerContext* context, v1::ModelInfo* response) {
  return new LoadModelReactor(context, &parts_, response);
}

grpc::ServerUnaryReactor* ComputeService::UnloadModel(grpc::CallbackServerContext* context,
                                                      const v1::UnloadModelRequest* request,
                                                      v1::UnloadModelResponse* /*response*/) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(parts_.models->Unload(request->name())));
  return reactor;
}

grpc::ServerUnaryReactor* ComputeService::ListModels(grpc::CallbackServerContext* context,
                                                     const v1::ListModelsRequest* /*request*/,
                                                     v1::ListModelsResponse* response) {
  for (const dense::ModelInfo& info : parts_.models->List()) FillModelInfo(info, response->add_models());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* ComputeService::Dense(grpc::CallbackServerContext* context,
                                                const v1::DenseRequest* request,
                                                v1::DenseResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<dense::Request> decoded;
  {
    NVTX_RANGE("dense.decode");
    decoded = DecodeDenseRequest(*request, *parts_.models, parts_.limits);
  }
  if (!decoded.ok()) {
    reactor->Finish(ToGrpcStatus(decoded.status()));
    return reactor;
  }
  const dense::ModelInfo& info = decoded->model->info();
  v1::Tensor* output = response->mutable_output();
  output->set_dtype(ToWireDType(info.dtype));
  output->add_shape(decoded->rows);
  output->add_shape(info.out_features());
  if (decoded->rows == 0) {
    output->set_data("");
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  DenseScheduler::Job job;
  job.request = std::make_shared<const dense::Request>(*std::move(decoded));
  job.deadline = ToAbslTime(context->deadline());
  job.is_cancelled = [context] { return context->IsCancelled(); };
  job.done = [reactor, context, output, start](absl::StatusOr<dense::Output> result,
                                               const JobTimings& timings) {
    AddTimings(context, timings, start);
    if (!result.ok()) {
      reactor->Finish(ToGrpcStatus(result.status()));
      return;
    }
    output->set_data(std::move(*result));
    reactor->Finish(grpc::Status::OK);
  };
  const absl::Status enqueued = parts_.dense->Enqueue(std::move(job));
  if (!enqueued.ok()) reactor->Finish(ToGrpcStatus(enqueued));
  return reactor;
}

}  // namespace gpucompute
