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
  absl::StatusOr<dense::Request> decoded;
  {
    NVTX_RANGE("dense.decode");
    decoded = DecodeDenseRequest(request, *parts.models, parts.limits);
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
  if (decoded->rows == 0) {
    output->set_data("");
    done(absl::OkStatus(), JobTimings{});
    return;
  }
  DenseScheduler::Job job;
  job.request = std::make_shared<const dense::Request>(*std::move(decoded));
  job.deadline = call.deadline;
  job.is_cancelled = std::move(call.is_cancelled);
  job.done = [output, done](absl::StatusOr<dense::Output> result, const JobTimings& timings) {
    if (result.ok()) output->set_data(std::move(*result));
    done(result.status(), timings);
  };
  const absl::Status enqueued = parts.dense->Enqueue(std::move(job));
  if (!enqueued.ok()) done(enqueued, JobTimings{});
}

}  // namespace gpucompute
