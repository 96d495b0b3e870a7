// LoadModel (see load_model_reactor.h).
#include "server/service/load_model_reactor.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/nvtx.h"
#include "server/service/call_timing.h"
#include "server/service/raw_calls.h"
#include "server/transport/status_mapping.h"
#include "server/service/tensor_codec.h"
#include "spdlog/spdlog.h"

namespace gpucompute {

void FillModelInfo(const dense::ModelInfo& info, v1::ModelInfo* out) {
  out->set_name(info.name);
  out->set_dtype(ToWireDType(info.dtype));
  out->set_allow_tf32(info.allow_tf32);
  for (const dense::LayerInfo& l : info.layers) {
    v1::LayerInfo* li = out->add_layers();
    li->set_in_features(l.in);
    li->set_out_features(l.out);
    li->set_layernorm(l.layernorm);
    li->set_eps(l.layernorm ? l.eps : 0);
    li->set_activation(static_cast<v1::Activation>(l.activation));
  }
  out->set_device_bytes(info.device_bytes);
  out->set_load_ms(info.load_ms);
  for (int d : info.devices) out->add_devices(d);
}

LoadModelReactor::LoadModelReactor(grpc::CallbackServerContext* context, const ServiceParts* parts,
                                   grpc::ByteBuffer* response)
    : context_(context), parts_(parts), response_(response), start_(absl::Now()) {
  auto admitted = AuthenticateAndEnter(*context, parts->auth);
  if (!admitted.ok()) {
    Fail(admitted.status());
    return;
  }
  slot_ = std::move(admitted->second);
  if (parts_->idle_uploads != nullptr) watch_ = parts_->idle_uploads->Join(context_);
  StartRead(&chunk_);
}

bool LoadModelReactor::LeaveWatch() {
  if (watch_ == 0) return false;
  const bool idle = parts_->idle_uploads->Leave(watch_);
  watch_ = 0;
  return idle;
}

void LoadModelReactor::OnReadDone(bool ok) {
  if (!ok) {
    // The client has sent everything, or gave up (or sent nothing for too long): then nothing
    // is loaded.
    if (LeaveWatch()) {
      Fail(absl::DeadlineExceededError(absl::StrCat(
          "LoadModel: nothing received for ", absl::FormatDuration(parts_->idle_uploads->idle()),
          " (--upload_idle_timeout_s); nothing is loaded")));
      return;
    }
    if (context_->IsCancelled()) {
      Fail(absl::CancelledError("LoadModel cancelled by the client before its end"));
      return;
    }
    if (!upload_) {
      Fail(absl::InvalidArgumentError("the LoadModel stream ended before its header"));
      return;
    }
    parts_->loader->Post([this] { Load(); });
    return;
  }
  if (watch_ != 0) parts_->idle_uploads->Touch(watch_);
  ++messages_read_;
  v1::LoadModelChunk chunk;
  absl::Status status = ParseRequest(chunk_, &chunk);
  chunk_.Clear();
  if (!status.ok()) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "LoadModel: message ", messages_read_, " of the stream is not a LoadModelChunk (it does not "
        "parse); nothing is loaded"));
  } else {
    status = Accept(chunk);
  }
  if (!status.ok()) {
    Fail(status);
    return;
  }
  StartRead(&chunk_);
}

absl::Status LoadModelReactor::Accept(const v1::LoadModelChunk& chunk) {
  if (chunk.has_header()) {
    if (upload_) return absl::InvalidArgumentError("header: sent twice (it must be the first message, once)");
    auto upload = ModelUpload::Start(chunk.header(), parts_->limits.dense);
    if (!upload.ok()) return upload.status();
    upload_ = *std::move(upload);
    if (absl::Status s = parts_->models->Reserve(upload_->name(), upload_->stored_bytes()); !s.ok()) {
      return s;
    }
    reserved_ = true;
    name_ = upload_->name();
    // Beside the other loads in progress, which have not taken their memory yet.
    const int64_t others = parts_->models->loading_bytes() - upload_->stored_bytes();
    absl::Status fits = parts_->backend->CheckModelFits(upload_->stored_bytes() + others);
    if (!fits.ok() && others > 0) {
      fits = absl::Status(fits.code(), absl::StrCat(fits.message(), " (counting the ", others,
                                                    " bytes of the other loads in progress)"));
    }
    return fits;
  }
  if (!upload_) return absl::InvalidArgumentError("header: the first LoadModel message must be the header");
  if (!chunk.has_chunk()) return absl::InvalidArgumentError("chunk: a message after the header must be a chunk");
  return upload_->Add(chunk.chunk());
}

absl::StatusOr<std::shared_ptr<const dense::LoadedModel>> LoadUploadedModel(
    std::unique_ptr<ModelUpload> upload, Backend& backend,
    std::chrono::steady_clock::time_point start) {
  auto spec = upload->Finish();
  upload.reset();  // the received bytes
  if (!spec.ok()) return spec.status();
  auto model = backend.LoadDenseModel(*std::move(spec));
  if (!model.ok()) return model.status();
  (*model)->set_load_ms(
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return model;
}

void LoadModelReactor::Load() {
  NVTX_RANGE("dense.load_model");
  auto model = LoadUploadedModel(std::move(upload_), *parts_->backend,
                                 std::chrono::steady_clock::now());
  if (!model.ok()) {
    Fail(model.status());
    return;
  }
  const double ms = (*model)->info().load_ms;
  v1::ModelInfo info;
  FillModelInfo((*model)->info(), &info);
  SerializeResponse(info, response_);
  parts_->models->Publish(*std::move(model));
  reserved_ = false;
  spdlog::info("model '{}' loaded: {} layers, {} bytes resident, {:.1f} ms", name_,
               info.layers_size(), info.device_bytes(), ms);
  RecordCallEnd(*parts_, *context_, "load_model", absl::OkStatus(), JobTimings{}, start_);
  slot_.Release();
  Finish(grpc::Status::OK);
}

void LoadModelReactor::Fail(const absl::Status& status) {
  LeaveWatch();
  if (reserved_) {
    parts_->models->Release(name_);
  }
  reserved_ = false;
  RecordCallEnd(*parts_, *context_, "load_model", status, JobTimings{}, start_);
  slot_.Release();
  Finish(ToGrpcStatus(status));
}

void LoadModelReactor::OnDone() { delete this; }

}  // namespace gpucompute
