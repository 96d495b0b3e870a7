// The model-management handlers of ComputeService: LoadModel, UnloadModel, ListModels. Models
// are shared by all callers: any valid token may load, unload and list them.
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
  auto caller = Authenticate(*context, parts_.auth);
  const absl::Status status =
      caller.ok() ? parts_.models->Unload(request->name()) : caller.status();
  RecordCallEnd(parts_.metrics, "unload_model", status, JobTimings{}, start);
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* ComputeService::ListModels(grpc::CallbackServerContext* context,
                                                     const v1::ListModelsRequest* /*request*/,
                                                     v1::ListModelsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (auto caller = Authenticate(*context, parts_.auth); !caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  for (const dense::ModelInfo& info : parts_.models->List()) FillModelInfo(info, response->add_models());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace gpucompute
