// A worker's relay to the worker-mode front, with --worker_connections=handoff. A client's
// connection then belongs to one worker, but some calls change what every worker holds:
// LoadModel, UnloadModel, RegisterSharedMemory and UnregisterSharedMemory. A worker sends those
// that arrive on a handed connection to the front (on its internal socket), which runs them on
// every worker as in proxy mode (this one included, as a call marked with the front's secret,
// which the worker runs itself) and answers for all; the relay passes the answer back, status
// and message as the front gave them. The caller's id goes with the call, so that a region
// registered through the front belongs to the same caller on every worker.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/server_context.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/server_callback.h>

namespace gpucompute {

class FrontRelay {
 public:
  // `front_address`: the front's internal socket ("unix:/path"); `secret`: the value of
  // kFrontCallKey on the front's own calls.
  FrontRelay(const std::string& front_address, std::string secret);

  // Whether the call carries the front's secret (it came from the front: run it here).
  bool FromFront(const grpc::CallbackServerContext& context) const;

  // Relays a unary call of `method` ("/gpucompute.v1.Compute/UnloadModel") to the front.
  grpc::ServerUnaryReactor* RelayUnary(grpc::CallbackServerContext* context, const char* method,
                                       const grpc::ByteBuffer* request, grpc::ByteBuffer* response);
  // Relays a client-streaming call of `method` (LoadModel) to the front, message by message.
  grpc::ServerReadReactor<grpc::ByteBuffer>* RelayClientStream(grpc::CallbackServerContext* context,
                                                               const char* method,
                                                               grpc::ByteBuffer* response);

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<grpc::GenericStub> stub_;
  const std::string secret_;
};

}  // namespace gpucompute
