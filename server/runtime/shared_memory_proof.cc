// Shared-memory registration proofs (see shared_memory_proof.h).
#include "server/runtime/shared_memory_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace gpucompute {
namespace {

constexpr int kNonceBytes = 16;
constexpr int kExpiryBytes = 8;
constexpr unsigned int kMacBytes = 32;

// OpenSSL's generator (seeded by the kernel); a server without randomness cannot run safely.
std::string RandomBytes(int n) {
  std::string out(static_cast<size_t>(n), '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), n) != 1) {
    spdlog::critical("RAND_bytes failed: no randomness for shared-memory proofs");
    std::abort();
  }
  return out;
}

void AppendInt64(std::string* out, int64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((static_cast<uint64_t>(v) >> (8 * i)) & 0xff));
}

int64_t ReadInt64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return static_cast<int64_t>(v);
}

absl::Status Denied(absl::string_view why) {
  return absl::PermissionDeniedError(absl::StrCat(
      "proof: ", why, "; call SharedMemoryProof for this key and offset, write its proof at the "
      "start of the region, then register (the clients do this)"));
}

}  // namespace

SharedMemoryProofs::SharedMemoryProofs(std::string secret)
    : secret_(secret.empty() ? RandomBytes(32) : std::move(secret)) {
  if (secret_.size() < kMinSecretBytes) {
    spdlog::critical("a shared-memory proof secret of {} bytes: at least {} are needed",
                     secret_.size(), kMinSecretBytes);
    std::abort();
  }
}

std::string SharedMemoryProofs::NewSecretHex() { return absl::BytesToHexString(RandomBytes(32)); }

std::string SharedMemoryProofs::Mac(absl::string_view owner, absl::string_view key, int64_t offset,
                                    absl::string_view nonce_and_expiry) const {
  // Length-prefixed fields: no two (owner, key) pairs give the same input.
  std::string message;
  AppendInt64(&message, static_cast<int64_t>(owner.size()));
  message.append(owner.data(), owner.size());
  AppendInt64(&message, static_cast<int64_t>(key.size()));
  message.append(key.data(), key.size());
  AppendInt64(&message, offset);
  message.append(nonce_and_expiry.data(), nonce_and_expiry.size());
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  // A MAC that could not be computed must not compare equal to anything: no server runs so.
  if (HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), mac,
           &length) == nullptr ||
      length != kMacBytes) {
    spdlog::critical("HMAC-SHA256 failed: shared-memory proofs cannot be checked");
    std::abort();
  }
  return std::string(reinterpret_cast<const char*>(mac), length);
}

std::string SharedMemoryProofs::Issue(absl::string_view owner, absl::string_view key,
                                      int64_t offset, absl::Time now) const {
  std::string proof = RandomBytes(kNonceBytes);
  AppendInt64(&proof, absl::ToUnixSeconds(now + kLifetime));
  proof += Mac(owner, key, offset, proof);
  return proof;
}

absl::Status SharedMemoryProofs::Check(absl::string_view owner, absl::string_view key,
                                       int64_t offset, absl::string_view proof,
                                       absl::Time now) const {
  if (proof.empty()) return Denied("missing");
  if (proof.size() != kProofBytes) {
    return Denied(absl::StrCat("is ", proof.size(), " bytes, not ", kProofBytes));
  }
  const absl::string_view signed_part = proof.substr(0, kNonceBytes + kExpiryBytes);
  const std::string want = Mac(owner, key, offset, signed_part);
  if (CRYPTO_memcmp(want.data(), proof.data() + signed_part.size(), want.size()) != 0) {
    return Denied("not one this server gave this caller for this key and offset");
  }
  if (absl::FromUnixSeconds(ReadInt64(proof.data() + kNonceBytes)) < now) {
    return Denied("expired");
  }
  return absl::OkStatus();
}

}  // namespace gpucompute
