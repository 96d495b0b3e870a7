// Bearer-token authentication from a token file, and each token's quota of calls in flight
// (README "Security"). The service asks for a token on every call but ServerInfo; health and
// reflection are separate services and stay open. Every authenticated call takes one of its
// token's in-flight slots (Submit: each job), management calls included.
//
// Token file: one token per line, `NAME TOKEN [MAX_IN_FLIGHT]` separated by blanks; lines that
// are blank or start with `#` are ignored. NAME (1-128 of [A-Za-z0-9_.:@-]) is unique and
// becomes the caller's identity (owner of its resident tensors and regions); TOKEN (16-4096
// printable ASCII characters, no blanks) is unique; MAX_IN_FLIGHT (a positive integer, default
// --auth_default_max_in_flight) bounds the token's calls running at once.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpucompute {

// One line of a token file.
struct TokenSpec {
  std::string name;
  std::string token;
  int max_in_flight = 0;
};

// The tokens of a token file's text; INVALID_ARGUMENT "line N: ..." (never quoting a token)
// for a malformed line, a duplicate name or token, or a file without tokens.
absl::StatusOr<std::vector<TokenSpec>> ParseTokenFile(absl::string_view text,
                                                      int default_max_in_flight);

// True when `a` equals `secret`, in a time that depends on the lengths only.
bool ConstantTimeEquals(absl::string_view a, absl::string_view secret);

// One of a token's in-flight slots, given back on destruction or Release(). Move-only; a
// default-constructed slot holds nothing. Must not outlive its TokenAuthenticator.
class InFlightSlot {
 public:
  InFlightSlot() = default;
  InFlightSlot(InFlightSlot&& other) noexcept : count_(std::exchange(other.count_, nullptr)) {}
  InFlightSlot& operator=(InFlightSlot&& other) noexcept {
    if (this != &other) {
      Release();
      count_ = std::exchange(other.count_, nullptr);
    }
    return *this;
  }
  ~InFlightSlot() { Release(); }

  void Release() {
    if (count_ != nullptr) count_->fetch_sub(1, std::memory_order_acq_rel);
    count_ = nullptr;
  }

 private:
  friend class TokenAuthenticator;
  explicit InFlightSlot(std::atomic<int>* count) : count_(count) {}
  std::atomic<int>* count_ = nullptr;
};

// The server's tokens. Thread-safe; tokens are fixed at creation (restart to change them).
class TokenAuthenticator {
 public:
  // A known token: its name and quota; the secret itself is not exposed.
  class Token {
   public:
    const std::string& name() const { return name_; }
    int max_in_flight() const { return max_in_flight_; }
    int in_flight() const { return in_flight_.load(std::memory_order_relaxed); }

   private:
    friend class TokenAuthenticator;
    std::string name_;
    std::string secret_;
    int max_in_flight_ = 0;
    mutable std::atomic<int> in_flight_{0};
  };

  // Reads a token file (format above); errors name the file and the line.
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> FromFile(const std::string& path,
                                                                      int default_max_in_flight);
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> FromText(absl::string_view text,
                                                                      int default_max_in_flight);

  // The token of an `authorization` metadata value "Bearer TOKEN" (nullopt: none was sent).
  // UNAUTHENTICATED, saying whether the token was missing, not a Bearer token or unknown, and
  // never quoting it. Every known token is compared, each in constant time.
  absl::StatusOr<const Token*> Authenticate(std::optional<absl::string_view> authorization) const;

  // Takes one of `token`'s in-flight slots: RESOURCE_EXHAUSTED naming the token and its limit
  // when all are taken. A null token (a server without tokens) gets an empty slot.
  static absl::StatusOr<InFlightSlot> Enter(const Token* token);

  size_t size() const { return tokens_.size(); }

 private:
  explicit TokenAuthenticator(std::vector<TokenSpec> specs);

  std::vector<std::unique_ptr<Token>> tokens_;  // stable addresses: callers keep Token*
};

}  // namespace gpucompute
