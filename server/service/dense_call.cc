// RunDense (see operation_calls.h).
#include <memory>
#include <utility>

#include "server/common/nvtx.h"
#include "server/service/dense_decode.h"
#include "server/service/operation_calls.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

void RunDense(const ServiceParts& parts, const v1::DenseRequest& request,
              v1::DenseResponse* response, CallContext call, CallDone done) {
  TensorResolver resolver(TensorContextOf(parts, call));
  absl::StatusOr<dense::Request> decoded;
  {
    NVTX_RANGE("dense.decode");
    decoded = DecodeDenseRequest(request, *parts.models, parts.limits, &resolver);
  }
  if (decoded.ok()) {
    if (absl::Status s = CheckOutputPlacement(resolver.context(), request.output_placement()); !s.ok()) {
      decoded = s;
    }
  }
  if (!decoded.ok()) {
    done(decoded.status(), JobTimings{});
    return;
  }
  const dense::ModelInfo& info = decoded->model->info();
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
  DenseScheduler::Job job;
  job.request = std::make_shared<const dense::Request>(*std::move(decoded));
  job.deadline = call.deadline;
  job.is_cancelled = std::move(call.is_cancelled);
  // The pins keep resident or shared-memory input bytes alive until the result is in.
  job.done = [output, finish, pins = resolver.pins()](absl::StatusOr<dense::Output> result,
                                                      const JobTimings& timings) {
    if (result.ok()) output->set_data(std::move(*result));
    finish(result.status(), timings);
  };
  const absl::Status enqueued = parts.dense->Enqueue(std::move(job));
  if (!enqueued.ok()) done(enqueued, JobTimings{});
}

}  // namespace gpucompute
