// The model-management handlers of ComputeService: LoadModel, UnloadModel, ListModels. Models
// are shared by all callers: any valid token may load, unload and list them. Each call holds
// one of its token's in-flight slots while it runs, released before the reply.
#include <utility>

#include "absl/time/clock.h"
#include "server/service/call_timing.h"
#include "server/service/compute_service.h"
#include "server/service/load_model_reactor.h"
#include "server/service/raw_calls.h"
#include "server/transport/status_mapping.h"

namespace gpucompute {

grpc::ServerReadReactor<grpc::ByteBuffer>* ComputeService::LoadModel(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  if (parts_.front != nullptr && !parts_.front->FromFront(*context)) {
    return parts_.front->RelayClientStream(context, "/gpucompute.v1.Compute/LoadModel", response);
  }
  return new LoadModelReactor(context, &parts_, response);
}

grpc::ServerUnaryReactor* ComputeService::UnloadModel(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  if (parts_.front != nullptr && !parts_.front->FromFront(*context)) {
    return parts_.front->RelayUnary(context, "/gpucompute.v1.Compute/UnloadModel", request, response);
  }
  return QuickCall<v1::UnloadModelRequest, v1::UnloadModelResponse>(
      context, request, response,
      [&](const auto& r, auto* out) { return UnloadModelCall(context, r, out); });
}

absl::Status ComputeService::UnloadModelCall(grpc::CallbackServerContext* context,
                                             const v1::UnloadModelRequest& request,
                                             v1::UnloadModelResponse* /*response*/) {
  const absl::Time start = absl::Now();
  auto admitted = AuthenticateAndEnter(*context, parts_.auth);
  const absl::Status status = admitted.ok() ? parts_.models->Unload(request.name()) : admitted.status();
  if (admitted.ok()) admitted->second.Release();
  RecordCallEnd(parts_, *context, "unload_model", status, JobTimings{}, start);
  return status;
}

grpc::ServerUnaryReactor* ComputeService::ListModels(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return QuickCall<v1::ListModelsRequest, v1::ListModelsResponse>(
      context, request, response,
      [&](const auto& r, auto* out) { return ListModelsCall(context, r, out); });
}

absl::Status ComputeService::ListModelsCall(grpc::CallbackServerContext* context,
                                            const v1::ListModelsRequest& /*request*/,
                                            v1::ListModelsResponse* response) {
  auto admitted = AuthenticateAndEnter(*context, parts_.auth);
  if (!admitted.ok()) return admitted.status();
  for (const dense::ModelInfo& info : parts_.models->List()) FillModelInfo(info, response->add_models());
  return absl::OkStatus();
}

}  // namespace gpucompute
