// RunAssimilate (see operation_calls.h).
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/service/assimilate_decode.h"
#include "server/service/operation_call_util.h"
#include "server/service/operation_calls.h"
#include "server/service/tensor_codec.h"

namespace gpucompute {
namespace {

v1::AnalysisForm ToWireForm(assimilate::Form f) {
  switch (f) {
    case assimilate::Form::kObservationSpace: return v1::ANALYSIS_FORM_OBSERVATION_SPACE;
    case assimilate::Form::kEnsembleSpace: return v1::ANALYSIS_FORM_ENSEMBLE_SPACE;
    default: return v1::ANALYSIS_FORM_AUTO;
  }
}

}  // namespace

void RunAssimilate(const ServiceParts& parts, const v1::AssimilateRequest& request,
                   v1::AssimilateResponse* response, CallContext call, CallDone done) {
  TensorResolver resolver(TensorContextOf(parts, call));
  std::optional<assimilate::Request> decoded = internal::DecodeCall(
      "assimilate.decode", resolver, request.output_placement(), done,
      [&] { return DecodeAssimilateRequest(request, parts.limits, &resolver); });
  if (!decoded) return;
  for (size_t i = 0; i < decoded->problems.size(); ++i) {
    const assimilate::Problem& p = decoded->problems[i];
    if (p.method != assimilate::Method::kLetkf || p.N <= parts.backend->LetkfMaxMembers()) continue;
    done(absl::UnimplementedError(absl::StrCat(
             "problems[", i, "].x: the ", parts.backend->name(), " backend runs the LETKF with at most ",
             parts.backend->LetkfMaxMembers(), " members, not ", p.N, "; the CPU backend (--backend=cpu) takes any")),
         JobTimings{});
    return;
  }
  if (decoded->problems.empty()) {
    done(absl::OkStatus(), JobTimings{});
    return;
  }
  // The analyses and innovation means are leased from the server's memory budget while they
  // are computed.
  int64_t output_bytes = 0;
  for (const assimilate::Problem& p : decoded->problems) {
    output_bytes += p.n * p.N * ElementSize(decoded->dtype) + p.m * 8;
  }
  absl::StatusOr<MemoryLease> lease = LeaseOutputs(resolver.context(), output_bytes, "the analyses");
  if (!lease.ok()) {
    done(lease.status(), JobTimings{});
    return;
  }
  auto held = std::make_shared<MemoryLease>(*std::move(lease));
  auto typed = std::make_shared<const assimilate::Request>(*std::move(decoded));
  // The pins keep resident or shared-memory input bytes alive until the result is in; they and
  // the outputs' lease go before the reply, which the caller's next request may be waiting for.
  auto on_result = [response, typed, done, &request, context = resolver.context(),
                    pins = resolver.TakePins(), held = std::move(held)](
                       absl::StatusOr<assimilate::Output> result, const JobTimings& timings) mutable {
    pins.reset();  // the inputs are no longer read
    if (!result.ok() || !result->status.ok()) {
      held.reset();
      done(result.ok() ? result->status : result.status(), timings);
      return;
    }
    const v1::DType dtype = ToWireDType(typed->dtype);
    response->mutable_results()->Reserve(static_cast<int>(result->problems.size()));
    std::vector<v1::Tensor*> outputs;
    outputs.reserve(2 * result->problems.size());
    for (size_t i = 0; i < result->problems.size(); ++i) {
      assimilate::ProblemResult& r = result->problems[i];
      const assimilate::Problem& p = typed->problems[i];
      v1::AssimilationResult* out = response->add_results();
      v1::Tensor* analysis = out->mutable_analysis();
      analysis->set_dtype(dtype);
      analysis->add_shape(p.n);
      analysis->add_shape(p.N);
      analysis->set_data(std::move(r.analysis));
      std::string innovation(reinterpret_cast<const char*>(r.innovation_mean.data()),
                             r.innovation_mean.size() * sizeof(double));
      EncodeVector(v1::FLOAT64, p.m, std::move(innovation), out->mutable_innovation_mean());
      outputs.push_back(analysis);
      outputs.push_back(out->mutable_innovation_mean());
      out->set_analysis_spread(r.analysis_spread);
      out->set_form(ToWireForm(r.form));
    }
    const absl::Status placed = PlaceOutputs(context, request.output_placement(), outputs);
    held.reset();  // after placing, before the reply
    done(placed, timings);
  };
  internal::EnqueueCall(*parts.assimilate, std::move(typed), std::move(call), std::move(on_result),
                        done);
}

}  // namespace gpucompute
