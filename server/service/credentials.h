// The service port's transport security: plaintext, TLS or mutual TLS from PEM files
// (README "Security").
#pragma once

#include <memory>
#include <string>

#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace gpucompute {

struct TlsFiles {
  std::string cert_file;       // the server's certificate chain (PEM); with key_file: TLS
  std::string key_file;        // its private key (PEM)
  std::string client_ca_file;  // CA certificates (PEM): clients must present a certificate
                               // that chains to one of them (mutual TLS)

  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

// Insecure credentials when no file is set, else SSL server credentials (client certificates
// required and verified when client_ca_file is set). INVALID_ARGUMENT when only one of
// cert_file and key_file is set, client_ca_file comes without them, or a file cannot be read
// or holds no PEM block. The files are read once: rotating them takes a restart.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& files);

// "plaintext", "TLS" or "mutual TLS", for the log.
const char* TlsModeName(const TlsFiles& files);

}  // namespace gpucompute
