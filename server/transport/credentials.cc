// TLS credentials from PEM files (see credentials.h).
#include "server/transport/credentials.h"

#include <fstream>
#include <memory>
#include <sstream>

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace gpucompute {
namespace {

// The contents of PEM file `path` given as --`flag`, which must hold a block of `kind`
// ("CERTIFICATE", or "PRIVATE KEY" for any key type's).
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag, const char* kind) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf())) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", path, ": cannot be read"));
  }
  if (!absl::StrContains(text.str(), "-----BEGIN ")) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", path, ": not PEM (no -----BEGIN line)"));
  }
  const bool key = absl::string_view(kind) == "PRIVATE KEY";
  if (key ? !absl::StrContains(text.str(), "PRIVATE KEY-----")
          : !absl::StrContains(text.str(), absl::StrCat("-----BEGIN ", kind, "-----"))) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", path, ": holds no ",
                                                   key ? "private key" : "certificate"));
  }
  return text.str();
}

// OpenSSL's reason for the last failure on this thread (its error queue is emptied).
std::string OpenSslError() {
  const unsigned long code = ERR_peek_last_error();
  const char* reason = code != 0 ? ERR_reason_error_string(code) : nullptr;
  std::string out = reason != nullptr ? reason : "no PEM block of that kind";
  ERR_clear_error();
  return out;
}

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct KeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};

std::unique_ptr<BIO, BioFree> MemoryBio(const std::string& pem) {
  return std::unique_ptr<BIO, BioFree>(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The first certificate of `pem` (the file of --`flag` at `path`) as OpenSSL reads it.
absl::StatusOr<std::unique_ptr<X509, X509Free>> ParseCertificate(const std::string& pem,
                                                                  const std::string& path,
                                                                  const char* flag) {
  auto bio = MemoryBio(pem);
  std::unique_ptr<X509, X509Free> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
  if (cert == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", path,
                                                   ": the certificate does not parse (", OpenSslError(), ")"));
  }
  return cert;
}

// What gRPC would otherwise find only at the first handshake (and then fail every one): the
// files must parse, and the key must be the certificate's. Passphrase-protected keys are
// refused here as gRPC refuses them.
absl::Status CheckKeyAndCertificate(const TlsFiles& files, const std::string& cert_pem,
                                    const std::string& key_pem) {
  ASSIGN_OR_RETURN(auto cert, ParseCertificate(cert_pem, files.cert_file, "tls_cert_file"));
  auto bio = MemoryBio(key_pem);
  std::unique_ptr<EVP_PKEY, KeyFree> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr));
  if (key == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--tls_key_file ", files.key_file,
                                                   ": the private key does not parse (", OpenSslError(),
                                                   "; an encrypted key is not supported)"));
  }
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_key_file ", files.key_file, " is not the key of the certificate in --tls_cert_file ",
        files.cert_file, " (their public keys differ)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(const TlsFiles& files) {
  if (!files.enabled()) {
    if (!files.client_ca_file.empty()) {
      return absl::InvalidArgumentError(
          "--tls_client_ca_file needs --tls_cert_file and --tls_key_file (mutual TLS is TLS)");
    }
    return grpc::InsecureServerCredentials();
  }
  if (files.cert_file.empty() || files.key_file.empty()) {
    return absl::InvalidArgumentError("--tls_cert_file and --tls_key_file must be set together");
  }
  if (files.reload_interval_s > 0) {
    // gRPC's watcher reads the files itself; they are checked here all the same, so that a
    // bad file fails at start-up as it does without reloading.
    if (absl::Status checked = CheckTlsFiles(files); !checked.ok()) return checked;
    auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
        files.key_file, files.cert_file, files.client_ca_file,
        static_cast<unsigned int>(files.reload_interval_s));
    grpc::experimental::TlsServerCredentialsOptions options(provider);
    options.watch_identity_key_cert_pairs();
    if (!files.client_ca_file.empty()) {
      options.watch_root_certs();
      options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    } else {
      options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
    }
    return grpc::experimental::TlsServerCredentials(options);
  }
  if (absl::Status checked = CheckTlsFiles(files); !checked.ok()) return checked;
  auto cert = ReadPem(files.cert_file, "tls_cert_file", "CERTIFICATE");
  if (!cert.ok()) return cert.status();
  auto key = ReadPem(files.key_file, "tls_key_file", "PRIVATE KEY");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  pair.cert_chain = *std::move(cert);
  pair.private_key = *std::move(key);
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!files.client_ca_file.empty()) {
    auto ca = ReadPem(files.client_ca_file, "tls_client_ca_file", "CERTIFICATE");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
    options.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  } else {
    options.client_certificate_request = GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE;
  }
  return grpc::SslServerCredentials(options);
}

absl::Status CheckTlsFiles(const TlsFiles& files) {
  if (!files.enabled()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string cert, ReadPem(files.cert_file, "tls_cert_file", "CERTIFICATE"));
  ASSIGN_OR_RETURN(const std::string key, ReadPem(files.key_file, "tls_key_file", "PRIVATE KEY"));
  RETURN_IF_ERROR(CheckKeyAndCertificate(files, cert, key));
  if (!files.client_ca_file.empty()) {
    ASSIGN_OR_RETURN(const std::string ca,
                     ReadPem(files.client_ca_file, "tls_client_ca_file", "CERTIFICATE"));
    RETURN_IF_ERROR(ParseCertificate(ca, files.client_ca_file, "tls_client_ca_file").status());
  }
  return absl::OkStatus();
}

std::vector<FileStamp> StampTlsFiles(const TlsFiles& files) {
  return {StatFile(files.cert_file), StatFile(files.key_file), StatFile(files.client_ca_file)};
}

const char* TlsModeName(const TlsFiles& files) {
  if (!files.enabled()) return "plaintext";
  return files.client_ca_file.empty() ? "TLS" : "mutual TLS";
}

}  // namespace gpucompute
