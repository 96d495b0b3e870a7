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
  // Places the filled output, then gives the inputs and the output's lease back before the
  // reply (the caller's next request may need them); `request` outlives the call.
  auto finish = [output, &request, context = resolver.context(), done](
                    absl::Status status, const JobTimings& timings, TensorPins& pins,
                    std::shared_ptr<MemoryLease>& held) {
    if (status.ok()) status = PlaceOutputs(context, request.output_placement(), {output});
    pins.reset();
    held.reset();
    done(status, timings);
  };
  TensorPins pins = resolver.TakePins();
  if (decoded->rows == 0) {
    output->set_data("");
    finish(absl::OkStatus(), JobTimings{}, pins, held);
    return;
  }
  // The pins keep resident or shared-memory input bytes alive until the result is in.
  auto on_result = [output, finish, pins = std::move(pins), held = std::move(held)](
                       absl::StatusOr<dense::Output> result, const JobTimings& timings) mutable {
    if (result.ok()) output->set_data(std::move(*result));
    finish(result.status(), timings, pins, held);
  };
  internal::EnqueueCall(*parts.dense, std::make_shared<const dense::Request>(*std::move(decoded)),
                        std::move(call), std::move(on_result), done);
}

}  // namespace gpucompute
