// RunDense (see operation_calls.h).
#include <memory>
#include <optional>
#include <utility>

#include "server/service/dense_decode.h"
#include "server/service/operation_call_util.h"
#include "server/service/operation_calls.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

void RunDense(const ServiceParts& parts, const v1::DenseRequest& request,
              v1::DenseResponse* response, CallContext call, CallDone done) {
  TensorResolver resolver(TensorContextOf(parts, call));
  std::optional<dense::Request> decoded = internal::DecodeCall(
      "dense.decode", resolver, request.output_placement(), done,
      [&] { return DecodeDenseRequest(request, *parts.models, parts.limits, &resolver); });
  if (!decoded) return;
  const dense::ModelInfo& info = decoded->model->info();
  // The output is leased from the server's memory budget while it is computed.
  absl::StatusOr<MemoryLease> lease = LeaseOutputs(
      resolver.context(), decoded->rows * info.out_features() * ElementSize(info.dtype),
      "the dense output");
  if (!lease.ok()) {
    done(lease.status(), JobTimings{});
    return;
  }
  auto held = std::make_shared<MemoryLease>(*std::move(lease));
  v1::Tensor* output = response->mutable_output();
  output->set_dtype(ToWireDType(info.dtype));
  output->add_shape(decoded->rows);
  output->add_shape(info.out_features());
  // Places the filled output; `request` outlives the call.
  auto finish = [output, &request, context = resolver.context(), done](
                    absl::Status status, const JobTimings& timings) {
    if (status.ok()) status = PlaceOutputs(context, request.output_placement(), {output});
    done(status, timings);
  };
  if (decoded->rows == 0) {
    output->set_data("");
    finish(absl::OkStatus(), JobTimings{});
    return;
  }
  // The pins keep resident or shared-memory input bytes alive until the result is in; then they
  // go (with the memory-budget leases of shared-memory copies and of the output) before the reply.
  auto on_result = [output, finish, pins = resolver.pins(), held](
                       absl::StatusOr<dense::Output> result, const JobTimings& timings) mutable {
    pins.reset();
    held.reset();
    if (result.ok()) output->set_data(std::move(*result));
    finish(result.status(), timings);
  };
  internal::EnqueueCall(*parts.dense, std::make_shared<const dense::Request>(*std::move(decoded)),
                        std::move(call), std::move(on_result), done);
}

}  // namespace gpucompute
