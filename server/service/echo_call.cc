// RunEcho (see operation_calls.h): the tensor is resolved like any operation's input and placed
// like any output, so that Echo costs what the wire, the codec and the placement cost and
// nothing else. Copies of the bytes: request -> response (inline, one), region -> the
// resolver's memory -> region (shared memory, two, in parallel: client memory is only touched
// by guarded copies, tensor_codec.h), or into a resident tensor (keep, one).
#include "server/service/operation_calls.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

void RunEcho(const ServiceParts& parts, const v1::EchoRequest& request,
             v1::EchoResponse* response, CallContext call, CallDone done) {
  // The resolver, with the copies it holds and their memory-budget leases, goes before the
  // reply: the caller's next request may need them.
  absl::Status status = [&] {
    TensorResolver resolver(TensorContextOf(parts, call));
    absl::StatusOr<TensorView> view = resolver.Resolve(request.tensor(), "tensor");
    if (!view.ok()) return view.status();
    if (request.discard()) return absl::OkStatus();
    v1::Tensor* out = response->mutable_tensor();
    out->set_dtype(view->dtype);
    out->mutable_shape()->Add(view->shape.begin(), view->shape.end());
    // The resolver's pins keep the source bytes alive until here.
    const absl::string_view source = view->bytes;
    return PlaceOutputs(resolver.context(), request.output_placement(),
                        {OutputTensor{out, &source}});
  }();
  done(status, JobTimings{});
}

}  // namespace gpucompute
