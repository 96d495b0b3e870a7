// The resident-tensor and shared-memory handlers of ComputeService: CreateTensor, PutTensor,
// GetTensor, DeleteTensor, ListTensors, RegisterSharedMemory, UnregisterSharedMemory. Every one
// authenticates its caller and acts for it: a client sees and uses only its own tensors and
// regions. Every one holds one of its token's in-flight slots while it runs (the streaming
// ones until they finish), released before the reply.
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/service/call_timing.h"
#include "server/service/compute_service.h"
#include "server/service/raw_calls.h"
#include "server/transport/status_mapping.h"
#include "server/service/tensor_codec.h"
#include "server/service/tensor_reactors.h"

namespace gpucompute {

grpc::ServerUnaryReactor* ComputeService::CreateTensor(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return QuickCall<v1::CreateTensorRequest, v1::TensorInfo>(
      context, request, response,
      [&](const auto& r, auto* out) { return CreateTensorCall(context, r, out); });
}

absl::Status ComputeService::CreateTensorCall(grpc::CallbackServerContext* context,
                                              const v1::CreateTensorRequest& request,
                                              v1::TensorInfo* response) {
  auto admitted = AuthenticateAndEnter(*context, parts_.auth);
  if (!admitted.ok()) return admitted.status();
  auto& [caller, slot] = *admitted;
  if (DTypeSize(request.dtype()) == 0) {
    return absl::InvalidArgumentError(absl::StrCat("dtype: must be set to a known dtype (got ",
                                                   static_cast<int>(request.dtype()), ")"));
  }
  TensorSpec spec = ResidentSpec(request.dtype(), request.shape());
  auto expiry = IdleExpiry(request.idle_expiry_ms(), "idle_expiry_ms");
  if (!expiry.ok()) return expiry.status();
  auto created = parts_.tensors->Create(caller.id, std::move(spec), *expiry);
  if (!created.ok()) return created.status();
  FillTensorInfo(**created, parts_.tensors->Now(), response);
  return absl::OkStatus();
}

grpc::ServerReadReactor<grpc::ByteBuffer>* ComputeService::PutTensor(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new PutTensorReactor(context, &parts_, response);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ComputeService::GetTensor(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new GetTensorReactor(context, &parts_, *request);
}

grpc::ServerUnaryReactor* ComputeService::DeleteTensor(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return QuickCall<v1::DeleteTensorRequest, v1::DeleteTensorResponse>(
      context, request, response,
      [&](const auto& r, auto* out) { return DeleteTensorCall(context, r, out); });
}

absl::Status ComputeService::DeleteTensorCall(grpc::CallbackServerContext* context,
                                              const v1::DeleteTensorRequest& request,
                                              v1::DeleteTensorResponse* /*response*/) {
  auto admitted = AuthenticateAndEnter(*context, parts_.auth);
  if (!admitted.ok()) return admitted.status();
  auto& [caller, slot] = *admitted;
  return Prefixed("handle", parts_.tensors->Delete(caller.id, request.handle()));
}

grpc::ServerUnaryReactor* ComputeService::ListTensors(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  return QuickCall<v1::ListTensorsRequest, v1::ListTensorsResponse>(
      context, request, response,
      [&](const auto& r, auto* out) { return ListTensorsCall(context, r, out); });
}

absl::Status ComputeService::ListTensorsCall(grpc::CallbackServerContext* context,
                                             const v1::ListTensorsRequest& /*request*/,
                                             v1::ListTensorsResponse* response) {
  auto admitted = AuthenticateAndEnter(*context, parts_.auth);
  if (!admitted.ok()) return admitted.status();
  auto& [caller, slot] = *admitted;
  const absl::Time now = parts_.tensors->Now();
  int64_t bytes = 0;
  for (const auto& t : parts_.tensors->List(caller.id)) {
    FillTensorInfo(*t, now, response->add_tensors());
    bytes += t->bytes();
  }
  response->set_bytes(bytes);
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ComputeService::SharedMemoryProof(grpc::CallbackServerContext* context,
                                                            const grpc::ByteBuffer* request,
                                                            grpc::ByteBuffer* response) {
  return QuickCall<v1::SharedMemoryProofRequest, v1::SharedMemoryProofResponse>(
      context, request, response,
      [&](const auto& r, auto* out) { return SharedMemoryProofCall(context, r, out); });
}

absl::Status ComputeService::SharedMemoryProofCall(grpc::CallbackServerContext* context,
                                                   const v1::SharedMemoryProofRequest& request,
                                                   v1::SharedMemoryProofResponse* response) {
  auto admitted = AuthenticateAndEnter(*context, parts_.auth);
  if (!admitted.ok()) return admitted.status();
  auto& [caller, slot] = *admitted;
  auto proof = parts_.shared_memory->IssueProof(caller.id, request.key(), request.offset());
  if (!proof.ok()) return proof.status();
  response->set_proof(*std::move(proof));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ComputeService::RegisterSharedMemory(grpc::CallbackServerContext* context,
                                                               const grpc::ByteBuffer* request,
                                                               grpc::ByteBuffer* response) {
  if (parts_.front != nullptr && !parts_.front->FromFront(*context)) {
    return parts_.front->RelayUnary(context, "/gpucompute.v1.Compute/RegisterSharedMemory", request, response);
  }
  return QuickCall<v1::RegisterSharedMemoryRequest, v1::RegisterSharedMemoryResponse>(
      context, request, response,
      [&](const auto& r, auto* out) { return RegisterSharedMemoryCall(context, r, out); });
}

absl::Status ComputeService::RegisterSharedMemoryCall(grpc::CallbackServerContext* context,
                                                      const v1::RegisterSharedMemoryRequest& request,
                                                      v1::RegisterSharedMemoryResponse* /*response*/) {
  auto admitted = AuthenticateAndEnter(*context, parts_.auth);
  if (!admitted.ok()) return admitted.status();
  auto& [caller, slot] = *admitted;
  return parts_.shared_memory->Register(caller.id, request.name(), request.key(), request.offset(),
                                        request.byte_size(), request.proof());
}

grpc::ServerUnaryReactor* ComputeService::UnregisterSharedMemory(grpc::CallbackServerContext* context,
                                                                 const grpc::ByteBuffer* request,
                                                                 grpc::ByteBuffer* response) {
  if (parts_.front != nullptr && !parts_.front->FromFront(*context)) {
    return parts_.front->RelayUnary(context, "/gpucompute.v1.Compute/UnregisterSharedMemory", request, response);
  }
  return QuickCall<v1::UnregisterSharedMemoryRequest, v1::UnregisterSharedMemoryResponse>(
      context, request, response,
      [&](const auto& r, auto* out) { return UnregisterSharedMemoryCall(context, r, out); });
}

absl::Status ComputeService::UnregisterSharedMemoryCall(
    grpc::CallbackServerContext* context, const v1::UnregisterSharedMemoryRequest& request,
    v1::UnregisterSharedMemoryResponse* /*response*/) {
  auto admitted = AuthenticateAndEnter(*context, parts_.auth);
  if (!admitted.ok()) return admitted.status();
  auto& [caller, slot] = *admitted;
  return parts_.shared_memory->Unregister(caller.id, request.name());
}

}  // namespace gpucompute
