// The worker's relay of handed connections' fan-out calls to the front (see front_relay.h).
#include "server/service/front_relay.h"

#include <atomic>
#include <utility>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "absl/strings/string_view.h"
#include "server/transport/caller.h"

namespace gpucompute {
namespace {

absl::string_view View(const grpc::string_ref& s) { return absl::string_view(s.data(), s.size()); }

// The upstream call's context: the client's metadata (PassedOnMetadata), its caller id and
// deadline. Before the call is prepared (its deadline is read
// then).
void PrepareContext(const grpc::CallbackServerContext& from, grpc::ClientContext* to) {
  for (const auto& [key, value] : from.client_metadata()) {
    if (PassedOnMetadata(View(key))) to->AddMetadata(std::string(View(key)), std::string(View(value)));
  }
  to->AddMetadata(kClientIdKey, CallerId(from));
  if (from.deadline() != std::chrono::system_clock::time_point::max()) to->set_deadline(from.deadline());
}

// A relayed client stream: each message read from the client is written to the front before
// the next is read (so one of the two is pending at a time, and the callbacks never overlap);
// the client's end closes the front's side; the front's one reply and its status finish the
// call. The upstream call holds a hold (AddHold) until this starts nothing more on it, so that
// its OnDone cannot come while a write or the close is still to be started. Deletes itself
// when both calls are done.
class StreamRelay final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  StreamRelay(const grpc::CallbackServerContext& from, grpc::GenericStub* stub, const char* method,
              grpc::ByteBuffer* response)
      : response_(response), upstream_(this) {
    PrepareContext(from, &client_);
    stub->PrepareBidiStreamingCall(&client_, method, grpc::StubOptions(), &upstream_);
    upstream_.AddHold();
    upstream_.StartRead(&reply_);
    upstream_.StartCall();
    StartRead(&message_);
  }

 private:
  void OnReadDone(bool ok) override {
    if (!ok) {  // the client has sent everything (or is gone)
      upstream_.StartWritesDone();
      upstream_.RemoveHold();
      return;
    }
    forwarding_ = std::move(message_);
    upstream_.StartWrite(&forwarding_);
  }
  void OnCancel() override { client_.TryCancel(); }
  void OnDone() override { Release(); }

  class Upstream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
   public:
    explicit Upstream(StreamRelay* relay) : relay_(relay) {}
    void OnWriteDone(bool ok) override { relay_->Wrote(ok); }
    void OnReadDone(bool ok) override { relay_->Replied(ok); }
    void OnDone(const grpc::Status& status) override { relay_->UpstreamDone(status); }

   private:
    StreamRelay* const relay_;
  };

  void Wrote(bool ok) {
    if (ok) {
      StartRead(&message_);
    } else {
      upstream_.RemoveHold();  // the front's call failed: its OnDone finishes this one
    }
  }
  void Replied(bool ok) {
    if (ok) *response_ = reply_;
  }
  void UpstreamDone(const grpc::Status& status) {
    Finish(status);
    Release();
  }
  void Release() {
    if (references_.fetch_sub(1) == 1) delete this;
  }

  grpc::ByteBuffer* const response_;
  grpc::ClientContext client_;
  Upstream upstream_;
  grpc::ByteBuffer message_;     // read from the client
  grpc::ByteBuffer forwarding_;  // being written to the front
  grpc::ByteBuffer reply_;       // the front's reply
  std::atomic<int> references_{2};  // this call's OnDone and the front's
};

}  // namespace

FrontRelay::FrontRelay(const std::string& front_address, std::string secret) : secret_(std::move(secret)) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);  // the front's replies are bounded by the workers'
  args.SetMaxSendMessageSize(-1);     // this worker already bounded what it received
  channel_ = grpc::CreateCustomChannel(front_address, grpc::InsecureChannelCredentials(), args);
  stub_ = std::make_unique<grpc::GenericStub>(channel_);
}

bool FrontRelay::FromFront(const grpc::CallbackServerContext& context) const {
  const auto [begin, end] = context.client_metadata().equal_range(kFrontCallKey);
  if (begin == end || std::next(begin) != end) return false;
  const absl::string_view value = View(begin->second);
  if (value.size() != secret_.size()) return false;
  unsigned char differ = 0;  // compared in constant time
  for (size_t i = 0; i < value.size(); ++i) differ |= static_cast<unsigned char>(value[i] ^ secret_[i]);
  return differ == 0;
}

grpc::ServerUnaryReactor* FrontRelay::RelayUnary(grpc::CallbackServerContext* context, const char* method,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto* client = new grpc::ClientContext();
  PrepareContext(*context, client);
  stub_->UnaryCall(client, method, grpc::StubOptions(), request, response,
                   [reactor, client](grpc::Status status) {
                     reactor->Finish(status);
                     delete client;
                   });
  return reactor;
}

grpc::ServerReadReactor<grpc::ByteBuffer>* FrontRelay::RelayClientStream(grpc::CallbackServerContext* context,
                                                                         const char* method,
                                                                         grpc::ByteBuffer* response) {
  return new StreamRelay(*context, stub_.get(), method, response);
}

}  // namespace gpucompute
