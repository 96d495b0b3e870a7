// Compute service reactors (see compute_service.h).
#include "server/service/compute_service.h"

#include <chrono>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/version.h"
#include "server/service/call_timing.h"
#include "server/service/operation_calls.h"
#include "server/service/raw_calls.h"
#include "server/transport/status_mapping.h"
#include "server/service/submit_reactor.h"

namespace gpucompute {
namespace {

// A request up to this size that finds the server idle is parsed, decoded and launched on the
// backend's idle thread (Backend::RunOnIdleThread: a GPU's completion poller, awake on a hot core)
// instead of on the gRPC thread that has just woken up to receive it. On an H100 machine's host (16
// cores) a 1,000-sample periodogram's parse and decode took 39 us on the gRPC thread and 15 us on
// the poller (10 us in a hot loop: tests/bench/decode_bench). Larger requests stay where they are:
// their decode is long enough to be worth doing on the receiving thread while the poller watches
// other batches. The size is the message's: a small request that names a large resident tensor is
// still decoded (the tensor copied) on the poller, and batches launched meanwhile by other threads
// are seen finishing only after it.
inline constexpr size_t kIdleThreadMaxRequestBytes = size_t{256} << 10;

// A unary call of an operation, on its raw messages (raw_calls.h): the request is parsed here,
// the response serialized once the operation is done. The
// reactor finishes then, with the server-side timings in trailing metadata. The call holds one
// of its token's in-flight slots until then; a caller refused a token or a slot, or a request
// that does not parse, is recorded like any failed call. With `idle_thread`, a small request
// may run from here on the backend's idle thread (kIdleThreadMaxRequestBytes).
template <typename Request, typename Response, typename Run>
grpc::ServerUnaryReactor* RunUnary(const char* op, Run run, const ServiceParts& parts,
                                   grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* raw_request, grpc::ByteBuffer* raw_response,
                                   bool idle_thread = true) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const absl::Time start = absl::Now();
  auto call_now = [op, run, &parts, context, raw_request, raw_response, reactor, start] {
    auto admitted = AuthenticateAndEnter(*context, parts.auth);
    absl::Status refused = admitted.status();
    auto messages = std::make_shared<std::pair<Request, Response>>();  // until the reply
    if (refused.ok()) refused = ParseRequest(*raw_request, &messages->first);
    if (!refused.ok()) {
      RecordCallEnd(parts, *context, op, refused, JobTimings{}, start);
      reactor->Finish(ToGrpcStatus(refused));
      return;
    }
    const Request& request = messages->first;
    Response* response = &messages->second;
    CallContext call;
    call.start = start;
    call.deadline = ToAbslTime(context->deadline());
    call.is_cancelled = [context] { return context->IsCancelled(); };
    call.client = std::move(admitted->first.id);
    auto slot = std::make_shared<InFlightSlot>(std::move(admitted->second));
    run(parts, request, response, std::move(call),
        [op, reactor, context, start, &parts, slot, messages,
         raw_response](const absl::Status& status, const JobTimings& t) {
          slot->Release();  // before the reply: the caller's next call may take it
          AddTimings(context, t, start);
          RecordCallEnd(parts, *context, op,
                        RecordedStatus(status, context->IsCancelled(), ToAbslTime(context->deadline())),
                        t, start);
          if (status.ok()) SerializeResponse(messages->second, raw_response);
          reactor->Finish(ToGrpcStatus(status));
        });
  };
  if (idle_thread && raw_request->Length() <= kIdleThreadMaxRequestBytes &&
      parts.backend->RunOnIdleThread(call_now)) {
    return reactor;
  }
  call_now();
  return reactor;
}

void FillBatchingStats(const BatchingStats& b, v1::BatchingStats* out) {
  out->set_requests(b.requests);
  out->set_batches(b.batches);
  out->set_largest_batch(b.largest_batch);
  out->set_rejected_queue_full(b.rejected_queue_full);
  out->set_expired_before_dispatch(b.expired_before_dispatch);
  out->set_queued(b.queued);
}

}  // namespace

ComputeService::ComputeService(ServiceParts parts) : parts_(std::move(parts)) {}

grpc::ServerUnaryReactor* ComputeService::Periodogram(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return RunUnary<v1::PeriodogramRequest, v1::PeriodogramResponse>(
      "periodogram", RunPeriodogram, parts_, context, request, response);
}

grpc::ServerUnaryReactor* ComputeService::Dense(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return RunUnary<v1::DenseRequest, v1::DenseResponse>(
      "dense", RunDense, parts_, context, request, response);
}

grpc::ServerUnaryReactor* ComputeService::Assimilate(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  return RunUnary<v1::AssimilateRequest, v1::AssimilateResponse>(
      "assimilate", RunAssimilate, parts_, context, request, response);
}

grpc::ServerUnaryReactor* ComputeService::Echo(grpc::CallbackServerContext* context,
    const grpc::ByteBuffer* request, grpc::ByteBuffer* response) {
  // Nothing to launch: answered on the receiving thread.
  return RunUnary<v1::EchoRequest, v1::EchoResponse>(
      "echo", RunEcho, parts_, context, request, response, /*idle_thread=*/false);
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* ComputeService::Submit(
    grpc::CallbackServerContext* context) {
  return new SubmitReactor(context, &parts_, &submit_streams_);
}

size_t ComputeService::BeginShutdown() {
  const size_t open = submit_streams_.open();
  submit_streams_.BeginShutdown();
  return open;
}

// Open to every caller, token or not: version, devices and limits (docs/security.md
// "Bearer tokens").
grpc::ServerUnaryReactor* ComputeService::ServerInfo(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return QuickCall<v1::ServerInfoRequest, v1::ServerInfoResponse>(
      context, request, response,
      [&](const auto& r, auto* out) { return ServerInfoCall(context, r, out); });
}

absl::Status ComputeService::ServerInfoCall(grpc::CallbackServerContext* /*context*/,
                                            const v1::ServerInfoRequest& /*request*/,
                                            v1::ServerInfoResponse* response) {
  response->set_version(GPUCOMPUTE_VERSION);
  response->set_backend(parts_.backend->name());
  response->set_nvrtc_version(parts_.backend->NvrtcVersion());
  for (const DeviceDescription& d : parts_.backend->Devices()) {
    v1::DeviceInfo* out = response->add_devices();
    out->set_index(d.index);
    out->set_name(d.name);
    out->set_compute_capability_major(d.cc_major);
    out->set_compute_capability_minor(d.cc_minor);
    out->set_total_memory_bytes(d.total_memory_bytes);
    out->set_multiprocessors(d.multiprocessors);
    out->set_streams(d.streams);
    out->set_healthy(d.healthy);
    out->set_health_message(d.health_message);
  }
  v1::Limits* limits = response->mutable_limits();
  limits->set_max_request_bytes(parts_.limits.max_request_bytes);
  limits->set_max_series_per_request(parts_.limits.max_series_per_request);
  limits->set_max_samples_per_series(parts_.limits.max_samples_per_series);
  limits->set_max_frequencies_per_series(parts_.limits.max_frequencies_per_series);
  limits->set_max_pairs_per_request(parts_.limits.max_pairs_per_request);
  limits->set_max_bootstrap_samples(parts_.limits.max_bootstrap_samples);
  const SchedulerOptions& so = parts_.periodogram->options();
  limits->set_max_batch_size(so.max_batch_size);
  limits->set_max_queue_delay_us(absl::ToInt64Microseconds(so.max_queue_delay));
  limits->set_max_queue_depth(so.max_queue_depth);

  const KernelCacheStats k = parts_.backend->KernelStats();
  v1::KernelCacheInfo* kc = response->mutable_kernel_cache();
  kc->set_entries(k.entries);
  kc->set_hits(k.hits);
  kc->set_misses(k.misses);
  kc->set_disk_hits(k.disk_hits);
  kc->set_compile_ms_total(k.compile_ms_total);
  for (const auto& name : k.kernels) kc->add_kernels(name);
  kc->set_directory(k.directory);

  FillBatchingStats(parts_.periodogram->Stats(), response->mutable_periodogram_batching());
  FillBatchingStats(parts_.dense->Stats(), response->mutable_dense_batching());
  v1::DenseLimits* dl = response->mutable_dense_limits();
  const DenseLimits& d = parts_.limits.dense;
  dl->set_max_model_bytes(d.max_model_bytes);
  dl->set_max_models(parts_.models->max_models());
  dl->set_max_layers(d.max_layers);
  dl->set_max_rows_per_request(d.max_rows_per_request);
  dl->set_max_batch_rows(parts_.dense->options().max_batch_cost);
  dl->set_max_batch_size(parts_.dense->options().max_batch_size);
  FillBatchingStats(parts_.assimilate->Stats(), response->mutable_assimilate_batching());
  v1::AssimilateLimits* al = response->mutable_assimilate_limits();
  const assimilate::Limits& a = parts_.limits.assimilate;
  al->set_max_problems_per_request(a.max_problems_per_request);
  al->set_max_members(a.max_members);
  al->set_max_covariance_obs(a.max_covariance_obs);
  al->set_max_letkf_candidates(a.max_letkf_candidates);
  al->set_max_batch_size(parts_.assimilate->options().max_batch_size);
  al->set_max_queue_depth(parts_.assimilate->options().max_queue_depth);
  response->mutable_stream_limits()->set_max_jobs_in_flight(parts_.limits.stream.max_jobs_in_flight);
  if (parts_.tensors != nullptr) {
    const TensorStoreOptions& t = parts_.tensors->options();
    v1::TensorLimits* tl = response->mutable_tensor_limits();
    tl->set_max_bytes_per_client(t.max_bytes_per_client);
    tl->set_max_tensors_per_client(t.max_tensors_per_client);
    tl->set_idle_expiry_ms(absl::ToInt64Milliseconds(t.idle_expiry));
  }
  response->set_shared_memory_enabled(parts_.shared_memory != nullptr &&
                                      parts_.shared_memory->enabled());
  return absl::OkStatus();
}

}  // namespace gpucompute
