// The Assimilate handler of ComputeService: decode and validate, hand the request to the
// assimilate scheduler, fill the response on the completion thread.
#include <utility>

#include "absl/time/clock.h"
#include "server/common/nvtx.h"
#include "server/service/assimilate_decode.h"
#include "server/service/call_timing.h"
#include "server/service/compute_service.h"
#include "server/service/status_mapping.h"
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

grpc::ServerUnaryReactor* ComputeService::Assimilate(grpc::CallbackServerContext* context,
                                                     const v1::AssimilateRequest* request,
                                                     v1::AssimilateResponse* response) {
  const absl::Time start = absl::Now();
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<assimilate::Request> decoded;
  {
    NVTX_RANGE("assimilate.decode");
    decoded = DecodeAssimilateRequest(*request, parts_.limits);
  }
  if (!decoded.ok()) {
    reactor->Finish(ToGrpcStatus(decoded.status()));
    return reactor;
  }
  if (decoded->problems.empty()) {
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  auto typed = std::make_shared<const assimilate::Request>(*std::move(decoded));
  AssimilateScheduler::Job job;
  job.request = typed;
  job.deadline = ToAbslTime(context->deadline());
  job.is_cancelled = [context] { return context->IsCancelled(); };
  job.done = [reactor, context, response, typed, start](absl::StatusOr<assimilate::Output> result,
                                                        const JobTimings& timings) {
    AddTimings(context, timings, start);
    if (!result.ok()) {
      reactor->Finish(ToGrpcStatus(result.status()));
      return;
    }
    if (!result->status.ok()) {
      reactor->Finish(ToGrpcStatus(result->status));
      return;
    }
    const v1::DType dtype = ToWireDType(typed->dtype);
    response->mutable_results()->Reserve(static_cast<int>(result->problems.size()));
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
      out->set_analysis_spread(r.analysis_spread);
      out->set_form(ToWireForm(r.form));
    }
    reactor->Finish(grpc::Status::OK);
  };
  const absl::Status enqueued = parts_.assimilate->Enqueue(std::move(job));
  if (!enqueued.ok()) reactor->Finish(ToGrpcStatus(enqueued));
  return reactor;
}

}  // namespace gpucompute
