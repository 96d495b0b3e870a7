// RunPeriodogram (see operation_calls.h).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/service/operation_call_util.h"
#include "server/service/operation_calls.h"
#include "server/service/periodogram_columns.h"
#include "server/service/periodogram_decode.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {
namespace {

// Top-k peaks and false-alarm values (what FinishResults added besides the model).
void EncodePeaksAndFalseAlarm(const periodogram::SeriesPower& p, v1::SeriesResult* out) {
  for (const periodogram::Peak& peak : p.peaks) {
    v1::PeriodogramPeak* o = out->add_peaks();
    o->set_frequency(peak.frequency);
    o->set_power(peak.power);
    o->set_index(peak.index);
    o->set_false_alarm_probability(peak.false_alarm_probability);
  }
  if (p.false_alarm) {
    v1::FalseAlarmResult* f = out->mutable_false_alarm();
    f->set_peak_probability(p.false_alarm->peak_probability);
    f->mutable_probabilities()->Add(p.false_alarm->probabilities.begin(),
                                    p.false_alarm->probabilities.end());
    f->mutable_levels()->Add(p.false_alarm->levels.begin(), p.false_alarm->levels.end());
  }
}

// The best-fit model, when asked for.
void EncodeModel(const periodogram::SeriesPower& p, v1::SeriesResult* out) {
  if (p.model) {
    v1::ModelResult* m = out->mutable_model();
    m->set_frequency(p.model->frequency);
    m->mutable_parameters()->Add(p.model->parameters.begin(), p.model->parameters.end());
    m->set_offset(p.model->offset);
    if (!p.model->y.empty()) {
      std::string bytes(reinterpret_cast<const char*>(p.model->y.data()), p.model->y.size() * 8);
      EncodeVector(v1::FLOAT64, static_cast<int64_t>(p.model->y.size()), std::move(bytes),
                   m->mutable_y());
    }
  }
}

}  // namespace

void RunPeriodogram(const ServiceParts& parts, const v1::PeriodogramRequest& request,
                    v1::PeriodogramResponse* response, CallContext call, CallDone done) {
  // Inputs are copied into the decoded request, so nothing needs pinning past the decode.
  TensorResolver resolver(TensorContextOf(parts, call));
  auto leases = std::make_shared<std::vector<MemoryLease>>();  // of the server's memory budget
  std::optional<periodogram::Request> decoded = internal::DecodeCall(
      "periodogram.decode", resolver, request.output_placement(), done,
      [&] { return DecodePeriodogramRequest(request, parts.limits, &resolver, leases.get()); });
  if (!decoded) return;
  auto typed = std::make_shared<const periodogram::Request>(*std::move(decoded));
  auto on_result = [response, typed, done, leases, &request, context = resolver.context()](
                       absl::StatusOr<std::vector<periodogram::SeriesPower>> result,
                       const JobTimings& timings) {
    if (!result.ok()) {
      leases->clear();  // before the reply: the caller's next request may need them
      done(result.status(), timings);
      return;
    }
    periodogram::FinishResults(*typed, &*result);  // drops the bootstrap series' results
    const v1::DType dtype = ToWireDType(typed->dtype);
    response->mutable_results()->Reserve(static_cast<int>(result->size()));
    std::vector<v1::Tensor*> outputs;
    outputs.reserve(result->size());
    for (size_t i = 0; i < result->size(); ++i) {
      periodogram::SeriesPower& p = (*result)[i];
      const periodogram::SeriesSpec& s = typed->series[i];
      v1::SeriesResult* out = response->add_results();
      EncodeVector(dtype, s.grid.size(), std::move(p.power), out->mutable_power());
      outputs.push_back(out->mutable_power());
      EncodeModel(p, out);
      if (request.result_columns()) continue;  // the rest goes in columns, below
      if (s.grid.uniform) {
        out->mutable_grid()->set_f0(s.grid.uniform->f0);
        out->mutable_grid()->set_df(s.grid.uniform->df);
        out->mutable_grid()->set_n(s.grid.uniform->n);
      }
      out->set_peak_frequency(p.peak_frequency);
      out->set_peak_power(p.peak_power);
      out->set_peak_index(p.peak_index);
      out->set_method(s.method == periodogram::Method::kFast ? v1::PERIODOGRAM_METHOD_FAST
                                                             : v1::PERIODOGRAM_METHOD_DIRECT);
      EncodePeaksAndFalseAlarm(p, out);
    }
    if (request.result_columns()) {
      EncodePeriodogramColumns(*typed, *result, response->mutable_columns());
    }
    const absl::Status placed = PlaceOutputs(context, request.output_placement(), outputs);
    leases->clear();  // before the reply: the caller's next request may need them
    done(placed, timings);
  };
  internal::EnqueueCall(*parts.periodogram, std::move(typed), std::move(call), std::move(on_result),
                        done);
}

}  // namespace gpucompute
