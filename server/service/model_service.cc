// The model-management handlers of ComputeService: LoadModel, UnloadModel, ListModels.
#include <utility>

#include "absl/time/clock.h"
#include "server/service/call_timing.h"
#include "server/service/compute_service.h"
#include "server/service/load_model_reactor.h"
#include "server/service/status_mapping.h"

namespace gpucompute {

grpc::ServerReadReactor<v1::LoadModelChunk>* ComputeService::LoadModel(
    grpc::CallbackServerContext* context, v1::ModelInfo* response) {
  return new LoadModelReactor(context, &parts_, response);
}

grpc::ServerUnaryReactor* ComputeService::UnloadModel(grpc::CallbackServerContext* context,
                                                      const v1::UnloadModelRequest* request,
                                                      v1::UnloadModelResponse* /*response*/) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Status status = parts_.models->Unload(request->name());
  RecordCallEnd(parts_.metrics, "unload_model", status, JobTimings{}, start);
  reactor->Finish(ToGrpcStatus(status));
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

}  // namespace gpucompute
