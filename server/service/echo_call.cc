// RunEcho (see operation_calls.h): the tensor is checked like any operation's input and sent
// back, so that Echo costs what the wire and the codec cost and nothing else.
#include "server/service/operation_calls.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

void RunEcho(const ServiceParts& /*parts*/, const v1::EchoRequest& request,
             v1::EchoResponse* response, CallContext /*call*/, CallDone done) {
  const absl::StatusOr<int64_t> count = CheckTensor(request.tensor(), "tensor");
  if (!count.ok()) {
    done(count.status(), JobTimings{});
    return;
  }
  if (!request.discard()) *response->mutable_tensor() = request.tensor();
  done(absl::OkStatus(), JobTimings{});
}

}  // namespace gpucompute
