// The gpucompute.v1.Compute service on gRPC's callback API. Handlers decode and validate,
// hand a typed job to the scheduler and return the reactor; the backend's completion thread
// fills the response and calls Finish. No CUDA header is included here.
#pragma once

#include <memory>

#include "gpucompute/v1/compute.grpc.pb.h"
#include "server/runtime/backend.h"
#include "server/runtime/completion_queue.h"
#include "server/runtime/model_registry.h"
#include "server/runtime/scheduler.h"
#include "server/service/limits.h"

namespace gpucompute {

// What the service borrows; everything must outlive it.
struct ServiceParts {
  Backend* backend = nullptr;
  PeriodogramScheduler* periodogram = nullptr;
  DenseScheduler* dense = nullptr;
  AssimilateScheduler* assimilate = nullptr;
  ModelRegistry* models = nullptr;
  CompletionQueue* loader = nullptr;  // runs model loads (long, blocking) off the gRPC threads
  ServiceLimits limits;
};

class ComputeService final : public v1::Compute::CallbackService {
 public:
  explicit ComputeService(ServiceParts parts);

  grpc::ServerUnaryReactor* Periodogram(grpc::CallbackServerContext* context,
                                        const v1::PeriodogramRequest* request,
                                        v1::PeriodogramResponse* response) override;
  grpc::ServerReadReactor<v1::LoadModelChunk>* LoadModel(grpc::CallbackServerContext* context,
                                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* context,
                                        const v1::UnloadModelRequest* request,
                                        v1::UnloadModelResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* Dense(grpc::CallbackServerContext* context,
                                  const v1::DenseRequest* request,
                                  v1::DenseResponse* response) override;
  grpc::ServerUnaryReactor* Assimilate(grpc::CallbackServerContext* context,
                                       const v1::AssimilateRequest* request,
                                       v1::AssimilateResponse* response) override;
  grpc::ServerUnaryReactor* ServerInfo(grpc::CallbackServerContext* context,
                                       const v1::ServerInfoRequest* request,
                                       v1::ServerInfoResponse* response) override;

 private:
  const ServiceParts parts_;
};

}  // namespace gpucompute
