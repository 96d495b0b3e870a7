// The gpucompute.v1.Compute service on gRPC's callback API. Handlers decode and validate,
// hand a typed job to the scheduler and return the reactor; the backend's completion thread
// fills the response and calls Finish. No CUDA header is included here.
#pragma once

#include <memory>

#include "gpucompute/v1/compute.grpc.pb.h"
#include "server/service/service_parts.h"
#include "server/service/submit_reactor.h"

namespace gpucompute {

// The service. Taking their messages raw: PutTensor and GetTensor (tensor_wire.h), Submit (it
// parses each job itself, to tell a corrupt message from the end of the stream) and the four
// operations (a request that does not parse is INVALID_ARGUMENT, not gRPC's bare
// UNIMPLEMENTED).
namespace compute_service_internal {
using C = v1::Compute;
// Every method once: a raw method's handler takes the typed one's parameters, so the two
// cannot be stacked on CallbackService.
using Base = C::WithRawCallbackMethod_Periodogram<C::WithCallbackMethod_LoadModel<
    C::WithCallbackMethod_UnloadModel<C::WithCallbackMethod_ListModels<C::WithRawCallbackMethod_Dense<
        C::WithRawCallbackMethod_Assimilate<C::WithCallbackMethod_ServerInfo<C::WithRawCallbackMethod_Submit<
            C::WithRawCallbackMethod_Echo<C::WithCallbackMethod_CreateTensor<C::WithRawCallbackMethod_PutTensor<
                C::WithRawCallbackMethod_GetTensor<C::WithCallbackMethod_DeleteTensor<
                    C::WithCallbackMethod_ListTensors<C::WithCallbackMethod_RegisterSharedMemory<
                        C::WithCallbackMethod_UnregisterSharedMemory<C::Service>>>>>>>>>>>>>>>>;
}  // namespace compute_service_internal
using ComputeServiceBase = compute_service_internal::Base;

class ComputeService final : public ComputeServiceBase {
 public:
  explicit ComputeService(ServiceParts parts);

  grpc::ServerUnaryReactor* Periodogram(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerReadReactor<v1::LoadModelChunk>* LoadModel(grpc::CallbackServerContext* context,
                                                         v1::ModelInfo* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* context,
                                        const v1::UnloadModelRequest* request,
                                        v1::UnloadModelResponse* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
                                       const v1::ListModelsRequest* request,
                                       v1::ListModelsResponse* response) override;
  grpc::ServerUnaryReactor* Dense(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Assimilate(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Submit(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ServerInfo(grpc::CallbackServerContext* context,
                                       const v1::ServerInfoRequest* request,
                                       v1::ServerInfoResponse* response) override;

  // Resident tensors and shared memory (tensor_service.cc).
  grpc::ServerUnaryReactor* CreateTensor(grpc::CallbackServerContext* context,
                                         const v1::CreateTensorRequest* request,
                                         v1::TensorInfo* response) override;
  // PutTensor and GetTensor on their wire form (tensor_wire.h): PutTensorChunk in and
  // TensorInfo out, GetTensorRequest in and TensorData out.
  grpc::ServerReadReactor<grpc::ByteBuffer>* PutTensor(grpc::CallbackServerContext* context,
                                                       grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GetTensor(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* DeleteTensor(grpc::CallbackServerContext* context,
                                         const v1::DeleteTensorRequest* request,
                                         v1::DeleteTensorResponse* response) override;
  grpc::ServerUnaryReactor* ListTensors(grpc::CallbackServerContext* context,
                                        const v1::ListTensorsRequest* request,
                                        v1::ListTensorsResponse* response) override;
  grpc::ServerUnaryReactor* RegisterSharedMemory(grpc::CallbackServerContext* context,
                                                 const v1::RegisterSharedMemoryRequest* request,
                                                 v1::RegisterSharedMemoryResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterSharedMemory(
      grpc::CallbackServerContext* context, const v1::UnregisterSharedMemoryRequest* request,
      v1::UnregisterSharedMemoryResponse* response) override;

 // Shutdown has begun (before gRPC's own drain): open Submit streams stop reading and finish
  // once their running jobs are answered; new ones are refused UNAVAILABLE. Returns the number
  // of streams told to finish. Thread-safe.
  size_t BeginShutdown();

 private:
  const ServiceParts parts_;
  SubmitStreams submit_streams_;
};

}  // namespace gpucompute
