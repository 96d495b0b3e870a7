// The service port's transport security: plaintext, TLS or mutual TLS from PEM files
// (docs/security.md "TLS").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"
#include "common/file_stamp.h"

namespace gpucompute {

struct TlsFiles {
  std::string cert_file;       // the server's certificate chain (PEM); with key_file: TLS
  std::string key_file;        // its private key (PEM)
  std::string client_ca_file;  // CA certificates (PEM): clients must present a certificate
                               // that chains to one of them (mutual TLS)
  // Seconds between checks of the three files for new contents; new handshakes then use
  // them (connections already open keep theirs). 0: read once at start-up.
  int reload_interval_s = 0;

  bool enabled() const { return !cert_file.empty() || !key_file.empty(); }
};

// Insecure credentials when no file is set, else TLS server credentials (client certificates
// required and verified when client_ca_file is set). INVALID_ARGUMENT when only one of
// cert_file and key_file is set, client_ca_file comes without them, or a file cannot be read
// or holds no PEM block of its kind at start-up. With reload_interval_s > 0 gRPC's file
// watcher reads the files again every that many seconds and new handshakes use what they hold:
// replace them atomically (a new file renamed over the old, or a directory symlink swapped, as
// Kubernetes does with Secrets). Files that cannot be read leave the previous ones in use;
// readable files with bad contents (not PEM, a key that does not match) are used as they are
// by gRPC 1.51, so new handshakes fail until they are fixed (connections already open keep
// working); the server logs such files (CheckTlsFiles). Otherwise the files are read once.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& files);

// Reads the files that are set and checks that each holds a PEM block of its kind (a
// certificate, a private key): INVALID_ARGUMENT naming the flag and file otherwise. Whether
// the key matches the certificate is not checked (gRPC finds out at the next handshake).
absl::Status CheckTlsFiles(const TlsFiles& files);

// The stamps of cert_file, key_file and client_ca_file, in that order (to notice changes).
std::vector<FileStamp> StampTlsFiles(const TlsFiles& files);

// "plaintext", "TLS" or "mutual TLS", for the log.
const char* TlsModeName(const TlsFiles& files);

}  // namespace gpucompute
