// Proofs that a caller can write the shared-memory object it registers. The server opens a
// registered object with its own privileges, so without them any peer could make it map
// another process's memory (an object of another user, mode 0600) and read or overwrite it
// through tensors. A caller proves access the only way that holds whoever it is, whatever its
// uid and however it reached the port: it writes bytes that the server gave it, and no one
// else, at the start of the region it registers.
//
// A proof is 16 random bytes, an expiry and an HMAC-SHA256 under a secret of this server of
// (caller, key, offset, the random bytes, the expiry). So it is the caller's own (another
// caller's, or one for another key or offset, does not check), it cannot be guessed or forged,
// and the server keeps no state per proof: any process holding the secret checks it (the
// workers of the worker-mode front share the front's). Another process's object cannot hold a
// proof issued to the attacker: writing one there is the access the attacker lacks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gpucompute {

class SharedMemoryProofs {
 public:
  static constexpr int kProofBytes = 56;  // random 16, expiry 8, MAC 32
  static constexpr size_t kMinSecretBytes = 16;
  static constexpr absl::Duration kLifetime = absl::Minutes(1);

  // `secret`: at least kMinSecretBytes (shorter aborts: a weak secret must not serve); empty
  // draws 32 random ones (a server of its own).
  explicit SharedMemoryProofs(std::string secret = "");

  // A new proof for `owner` to register bytes from `offset` of object `key`, valid until
  // `now` + kLifetime.
  std::string Issue(absl::string_view owner, absl::string_view key, int64_t offset,
                    absl::Time now) const;

  // OK when `proof` is one Issue gave `owner` for `key` and `offset`, unexpired at `now`;
  // else PERMISSION_DENIED saying what to do.
  absl::Status Check(absl::string_view owner, absl::string_view key, int64_t offset,
                     absl::string_view proof, absl::Time now) const;

  // 32 random bytes as hex (what the worker-mode front gives its workers).
  static std::string NewSecretHex();

 private:
  std::string Mac(absl::string_view owner, absl::string_view key, int64_t offset,
                  absl::string_view nonce_and_expiry) const;

  std::string secret_;
};

}  // namespace gpucompute
