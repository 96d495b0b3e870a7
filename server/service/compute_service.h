// The gpucompute.v1.Compute service on gRPC's callback API. Handlers decode and validate,
// hand a typed job to the scheduler and return the reactor; the backend's completion thread
// fills the response and calls Finish. No CUDA header is included here.
#pragma once

#include <memory>

#include "gpucompute/v1/compute.grpc.pb.h"
#include "server/runtime/backend.h"
#include "server/runtime/scheduler.h"
#include "server/service/limits.h"

namespace gpucompute {

class ComputeService final : public v1::Compute::CallbackService {
 public:
  // Borrows `backend` and `scheduler`; both must outlive the service.
  ComputeService(Backend* backend, PeriodogramScheduler* scheduler, ServiceLimits limits);

  grpc::ServerUnaryReactor* Periodogram(grpc::CallbackServerContext* context,
                                        const v1::PeriodogramRequest* request,
                                        v1::PeriodogramResponse* response) override;
  grpc::ServerUnaryReactor* ServerInfo(grpc::CallbackServerContext* context,
                                       const v1::ServerInfoRequest* request,
                                       v1::ServerInfoResponse* response) override;

 private:
  Backend* const backend_;
  PeriodogramScheduler* const scheduler_;
  const ServiceLimits limits_;
};

}  // namespace gpucompute
