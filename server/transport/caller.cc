// Callers from call metadata (see caller.h).
#include "server/transport/caller.h"

#include <iterator>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace gpucompute {

std::string CallerId(const grpc::CallbackServerContext& context) {
  const auto& metadata = context.client_metadata();
  if (auto it = metadata.find(kClientIdKey); it != metadata.end() && it->second.size() > 0) {
    return std::string(it->second.data(), it->second.size());
  }
  // "ipv4:127.0.0.1:5678", "ipv6:[::1]:5678", "unix:/path": drop the port of inet peers.
  std::string peer = context.peer();
  if (peer.rfind("ipv4:", 0) == 0 || peer.rfind("ipv6:", 0) == 0) {
    if (const size_t colon = peer.rfind(':'); colon != std::string::npos && colon > 4) {
      peer.resize(colon);
    }
  }
  return peer;
}

bool PassedOnMetadata(absl::string_view key) {
  return key != kAuthorizationKey && key != kClientIdKey && key != kFrontCallKey &&
         key != "user-agent" && key != "te" && key != "content-type" &&
         !absl::StartsWith(key, "grpc-") && !absl::StartsWith(key, ":");
}

absl::StatusOr<Caller> Authenticate(const grpc::CallbackServerContext& context,
                                    const TokenAuthenticator* auth) {
  if (auth == nullptr) return Caller{CallerId(context), nullptr};
  const auto& metadata = context.client_metadata();
  std::optional<absl::string_view> authorization;
  if (auto [begin, end] = metadata.equal_range(kAuthorizationKey); begin != end) {
    if (std::next(begin) != end) {
      return absl::UnauthenticatedError("more than one authorization metadata value");
    }
    authorization = absl::string_view(begin->second.data(), begin->second.size());
  }
  auto token = auth->Authenticate(authorization);
  if (!token.ok()) return token.status();
  return Caller{(*token)->name(), *token};
}

absl::StatusOr<std::pair<Caller, InFlightSlot>> AuthenticateAndEnter(
    const grpc::CallbackServerContext& context, const TokenAuthenticator* auth) {
  auto caller = Authenticate(context, auth);
  if (!caller.ok()) return caller.status();
  auto slot = TokenAuthenticator::Enter(caller->token);
  if (!slot.ok()) return slot.status();
  return std::make_pair(*std::move(caller), *std::move(slot));
}

}  // namespace gpucompute
