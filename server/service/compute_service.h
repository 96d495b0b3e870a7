// The gpucompute.v1.Compute service on gRPC's callback API. Handlers decode and validate,
// hand a typed job to the scheduler and return the reactor; the backend's completion thread
// fills the response and calls Finish. No CUDA header is included here.
#pragma once

#include <memory>

#include "gpucompute/v1/compute.grpc.pb.h"
#include "server/service/service_parts.h"
#include "server/service/submit_reactor.h"

namespace gpucompute {

// The service. Every method takes its messages raw: PutTensor and GetTensor on their wire form
// (tensor_wire.h); Submit and LoadModel parse each message themselves, to tell a corrupt one
// from the end of the stream; the unary calls parse their request (raw_calls.h: one that does
// not parse is INVALID_ARGUMENT, not gRPC's bare UNIMPLEMENTED).
namespace compute_service_internal {
using C = v1::Compute;
// Every method once: a raw method's handler takes the typed one's parameters, so the two
// cannot be stacked on CallbackService.
using Base = C::WithRawCallbackMethod_Periodogram<C::WithRawCallbackMethod_LoadModel<
    C::WithRawCallbackMethod_UnloadModel<C::WithRawCallbackMethod_ListModels<C::WithRawCallbackMethod_Dense<
        C::WithRawCallbackMethod_Assimilate<C::WithRawCallbackMethod_ServerInfo<C::WithRawCallbackMethod_Submit<
            C::WithRawCallbackMethod_Echo<C::WithRawCallbackMethod_CreateTensor<C::WithRawCallbackMethod_PutTensor<
                C::WithRawCallbackMethod_GetTensor<C::WithRawCallbackMethod_DeleteTensor<
                    C::WithRawCallbackMethod_ListTensors<C::WithRawCallbackMethod_SharedMemoryProof<
                        C::WithRawCallbackMethod_RegisterSharedMemory<
                            C::WithRawCallbackMethod_UnregisterSharedMemory<C::Service>>>>>>>>>>>>>>>>>;
}  // namespace compute_service_internal
using ComputeServiceBase = compute_service_internal::Base;

class ComputeService final : public ComputeServiceBase {
 public:
  explicit ComputeService(ServiceParts parts);

  grpc::ServerUnaryReactor* Periodogram(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* LoadModel(grpc::CallbackServerContext* context,
                                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UnloadModel(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListModels(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Dense(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Assimilate(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Submit(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* ServerInfo(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;

  // Resident tensors and shared memory (tensor_service.cc).
  grpc::ServerUnaryReactor* CreateTensor(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  // PutTensor and GetTensor on their wire form (tensor_wire.h): PutTensorChunk in and
  // TensorInfo out, GetTensorRequest in and TensorData out.
  grpc::ServerReadReactor<grpc::ByteBuffer>* PutTensor(grpc::CallbackServerContext* context,
                                                       grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* GetTensor(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* DeleteTensor(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListTensors(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SharedMemoryProof(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RegisterSharedMemory(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* UnregisterSharedMemory(grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request, grpc::ByteBuffer* response) override;

 // Shutdown has begun (before gRPC's own drain): open Submit streams stop reading and finish
  // once their running jobs are answered; new ones are refused UNAVAILABLE. Returns the number
  // of streams told to finish. Thread-safe.
  size_t BeginShutdown();

 private:
  // The unary management calls' bodies (answered at once; raw_calls.h QuickCall parses and
  // serializes around them).
  absl::Status UnloadModelCall(grpc::CallbackServerContext* context,
                      const v1::UnloadModelRequest& request, v1::UnloadModelResponse* response);
  absl::Status ListModelsCall(grpc::CallbackServerContext* context,
                      const v1::ListModelsRequest& request, v1::ListModelsResponse* response);
  absl::Status ServerInfoCall(grpc::CallbackServerContext* context,
                      const v1::ServerInfoRequest& request, v1::ServerInfoResponse* response);
  absl::Status CreateTensorCall(grpc::CallbackServerContext* context,
                      const v1::CreateTensorRequest& request, v1::TensorInfo* response);
  absl::Status DeleteTensorCall(grpc::CallbackServerContext* context,
                      const v1::DeleteTensorRequest& request, v1::DeleteTensorResponse* response);
  absl::Status ListTensorsCall(grpc::CallbackServerContext* context,
                      const v1::ListTensorsRequest& request, v1::ListTensorsResponse* response);
  absl::Status SharedMemoryProofCall(grpc::CallbackServerContext* context,
                      const v1::SharedMemoryProofRequest& request, v1::SharedMemoryProofResponse* response);
  absl::Status RegisterSharedMemoryCall(grpc::CallbackServerContext* context,
                      const v1::RegisterSharedMemoryRequest& request, v1::RegisterSharedMemoryResponse* response);
  absl::Status UnregisterSharedMemoryCall(grpc::CallbackServerContext* context,
                      const v1::UnregisterSharedMemoryRequest& request, v1::UnregisterSharedMemoryResponse* response);
  const ServiceParts parts_;
  SubmitStreams submit_streams_;
};

}  // namespace gpucompute
