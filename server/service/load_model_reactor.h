// The LoadModel call: reads the header (validates it, reserves the name, checks that the model
// fits before any byte of weights arrives), then the chunks; when the client has sent
// everything, the loader thread converts, folds and uploads the model and publishes it.
// Any failure releases the name: nothing is half-loaded. Messages are parsed here, so that one
// that does not parse fails the load INVALID_ARGUMENT instead of reading as the stream's end. A stream that sends nothing for the
// idle timeout (--upload_idle_timeout_s) is cancelled and fails DEADLINE_EXCEEDED. A load
// must fit beside the loads in progress (their bytes are reserved from the header on). The call authenticates its caller and
// holds one of its token's in-flight slots until it finishes.
#pragma once

#include <chrono>
#include <memory>

#include <grpcpp/support/server_callback.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gpucompute/v1/compute.pb.h"
#include "server/service/compute_service.h"
#include "server/service/idle_streams.h"
#include "server/service/model_upload.h"

namespace gpucompute {

class LoadModelReactor final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  // Starts reading at once; deletes itself when the call is done.
  // `response` receives the ModelInfo.
  LoadModelReactor(grpc::CallbackServerContext* context, const ServiceParts* parts,
                   grpc::ByteBuffer* response);

  void OnReadDone(bool ok) override;
  void OnDone() override;

 private:
  absl::Status Accept(const v1::LoadModelChunk& chunk);
  void Load();  // on the loader thread
  void Fail(const absl::Status& status);
  bool LeaveWatch();  // leaves the idle watch; true when it cancelled this call

  grpc::CallbackServerContext* const context_;
  const ServiceParts* const parts_;
  grpc::ByteBuffer* const response_;
  grpc::ByteBuffer chunk_;  // the read buffer (a LoadModelChunk, parsed here)
  int64_t messages_read_ = 0;
  std::unique_ptr<ModelUpload> upload_;
  bool reserved_ = false;
  std::string name_;  // reserved in the registry
  const absl::Time start_;  // the call's arrival (metrics)
  InFlightSlot slot_;
  IdleStreams::Id watch_ = 0;  // in parts_->idle_uploads until the last read (0: not watched)
};

// A load's last step, shared by LoadModel and the models of --model_manifest: converts the
// received tensors (freeing them), puts the model on the backend and records its load time
// since `start`. The caller publishes it (or releases its name).
absl::StatusOr<std::shared_ptr<const dense::LoadedModel>> LoadUploadedModel(
    std::unique_ptr<ModelUpload> upload, Backend& backend,
    std::chrono::steady_clock::time_point start);

// The proto form of a model's description.
void FillModelInfo(const dense::ModelInfo& info, v1::ModelInfo* out);

}  // namespace gpucompute
