// RunPeriodogram (see operation_calls.h).
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "server/service/operation_call_util.h"
#include "server/service/operation_calls.h"
#include "server/service/periodogram_decode.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {

void RunPeriodogram(const ServiceParts& parts, const v1::PeriodogramRequest& request,
                    v1::PeriodogramResponse* response, CallContext call, CallDone done) {
  // Inputs are copied into the decoded request, so nothing needs pinning past the decode.
  TensorResolver resolver(TensorContextOf(parts, call));
  std::optional<periodogram::Request> decoded = internal::DecodeCall(
      "periodogram.decode", resolver, request.output_placement(), done,
      [&] { return DecodePeriodogramRequest(request, parts.limits, &resolver); });
  if (!decoded) return;
  auto typed = std::make_shared<const periodogram::Request>(*std::move(decoded));
  auto on_result = [response, typed, done, &request, context = resolver.context()](
                       absl::StatusOr<std::vector<periodogram::SeriesPower>> result,
                       const JobTimings& timings) {
    if (!result.ok()) {
      done(result.status(), timings);
      return;
    }
    const v1::DType dtype =
        typed->dtype == periodogram::ComputeType::kFloat32 ? v1::FLOAT32 : v1::FLOAT64;
    response->mutable_results()->Reserve(static_cast<int>(result->size()));
    std::vector<v1::Tensor*> outputs;
    outputs.reserve(result->size());
    for (size_t i = 0; i < result->size(); ++i) {
      periodogram::SeriesPower& p = (*result)[i];
      const periodogram::SeriesSpec& s = typed->series[i];
      v1::SeriesResult* out = response->add_results();
      EncodeVector(dtype, s.grid.size(), std::move(p.power), out->mutable_power());
      outputs.push_back(out->mutable_power());
      if (s.grid.uniform) {
        out->mutable_grid()->set_f0(s.grid.uniform->f0);
        out->mutable_grid()->set_df(s.grid.uniform->df);
        out->mutable_grid()->set_n(s.grid.uniform->n);
      }
      out->set_peak_frequency(p.peak_frequency);
      out->set_peak_power(p.peak_power);
      out->set_peak_index(p.peak_index);
    }
    done(PlaceOutputs(context, request.output_placement(), outputs), timings);
  };
  internal::EnqueueCall(*parts.periodogram, std::move(typed), std::move(call), std::move(on_result),
                        done);
}

}  // namespace gpucompute
