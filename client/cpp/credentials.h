// Client-side security (docs/security.md "Clients"): TLS or mutual TLS from PEM files, and the
// bearer token of a server run with --auth_token_file.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"

namespace gpucompute::client {

// The metadata key and scheme of bearer tokens: "authorization: Bearer <token>".
inline constexpr char kAuthorizationKey[] = "authorization";
inline constexpr char kBearerPrefix[] = "Bearer ";

struct TlsOptions {
  bool use_tls = false;     // TLS even without files (the system's root certificates)
  std::string ca_file;      // CA certificates (PEM) the server's certificate must chain to
  std::string cert_file;    // client certificate chain (PEM) for mutual TLS; with key_file
  std::string key_file;     // its private key (PEM)
  std::string server_name;  // checks the server's certificate against this name instead of
                            // the target's host (a target given as an IP address, tests)

  bool enabled() const {
    return use_tls || !ca_file.empty() || !cert_file.empty() || !key_file.empty();
  }
};

// SSL channel credentials from `options`' files; insecure credentials when !enabled().
// INVALID_ARGUMENT when a file cannot be read, or only one of cert_file and key_file is set.
// (server_name is a channel argument: see SetTlsChannelArguments.)
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsOptions& options);

// Sets the SSL target-name override of `args` when options.server_name is set.
void SetTlsChannelArguments(const TlsOptions& options, grpc::ChannelArguments* args);

// The token to send: the contents of `token_file` without surrounding blanks when it is set,
// else $GPUCOMPUTE_TOKEN, else "" (no token). INVALID_ARGUMENT for an unreadable or empty file.
absl::StatusOr<std::string> ResolveToken(const std::string& token_file);

// A channel whose every call carries "authorization: Bearer <token>" (none when `token` is
// empty), for code that makes its calls on raw or generic stubs. (Client adds the token
// itself, from ClientOptions::token.)
std::shared_ptr<grpc::Channel> CreateChannelWithToken(
    const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, const std::string& token);

}  // namespace gpucompute::client
