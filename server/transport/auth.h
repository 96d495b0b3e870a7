// Bearer-token authentication from a token file, and each token's quota of calls in flight
// (docs/security.md "Bearer tokens"). The service asks for a token on every call but
// ServerInfo; health and reflection are separate services and stay open. Every authenticated
// call takes one of its token's in-flight slots (Submit: each job), management calls included.
//
// Token file: one token per line, `NAME TOKEN [MAX_IN_FLIGHT]` separated by blanks; lines that
// are blank or start with `#` are ignored. NAME (1-128 of [A-Za-z0-9_.:@-]) is unique and
// becomes the caller's identity (owner of its resident tensors and regions); TOKEN (16-4096
// printable ASCII characters, no blanks) is unique; MAX_IN_FLIGHT (a positive integer, default
// --auth_default_max_in_flight) bounds the token's calls running at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "common/file_stamp.h"

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

class TokenAuthenticator;

namespace internal {
// What a slot counts against: a token's calls in flight.
struct InFlightCounter {
  std::atomic<int> in_flight{0};
};
}  // namespace internal

// One of a token's in-flight slots, given back on destruction or Release(). Move-only; a
// default-constructed slot holds nothing. Keeps the token's counter alive, so that a slot may
// outlive a reload that removed its token (and the authenticator's other state).
class InFlightSlot {
 public:
  InFlightSlot() = default;
  InFlightSlot(InFlightSlot&& other) noexcept = default;
  InFlightSlot& operator=(InFlightSlot&& other) noexcept {
    if (this != &other) {
      Release();
      counter_ = std::move(other.counter_);
    }
    return *this;
  }
  ~InFlightSlot() { Release(); }

  void Release() {
    if (counter_ != nullptr) counter_->in_flight.fetch_sub(1, std::memory_order_acq_rel);
    counter_.reset();
  }

 private:
  friend class TokenAuthenticator;
  explicit InFlightSlot(std::shared_ptr<internal::InFlightCounter> counter)
      : counter_(std::move(counter)) {}
  std::shared_ptr<internal::InFlightCounter> counter_;
};

// The server's tokens. Thread-safe. The token file can be read again (Reload, on SIGHUP or
// when it changes): a token kept by the new file (same name and secret) keeps its calls in
// flight and takes the new limit; a token the new file drops is revoked (its calls already
// running finish, new ones and new Submit jobs get UNAUTHENTICATED); a file that does not
// parse changes nothing.
class TokenAuthenticator {
 public:
  // A known token: its name and quota; the secret itself is not exposed.
  class Token {
   public:
    const std::string& name() const { return name_; }
    int max_in_flight() const { return max_in_flight_.load(std::memory_order_relaxed); }
    int in_flight() const { return counter_->in_flight.load(std::memory_order_relaxed); }
    bool revoked() const { return revoked_.load(std::memory_order_acquire); }

   private:
    friend class TokenAuthenticator;
    std::string name_;
    std::string secret_;
    std::atomic<int> max_in_flight_{0};
    std::atomic<bool> revoked_{false};
    std::shared_ptr<internal::InFlightCounter> counter_ =
        std::make_shared<internal::InFlightCounter>();
  };
  using TokenRef = std::shared_ptr<const Token>;

  // What a reload changed.
  struct ReloadResult {
    int added = 0;    // new names or new secrets
    int removed = 0;  // revoked
    int kept = 0;     // same name and secret (limits may have changed)
  };

  // Reads a token file (format above); errors name the file and the line.
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> FromFile(const std::string& path,
                                                                      int default_max_in_flight);
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> FromText(absl::string_view text,
                                                                      int default_max_in_flight);

  // The token of an `authorization` metadata value "Bearer TOKEN" (nullopt: none was sent).
  // UNAUTHENTICATED, saying whether the token was missing, not a Bearer token or unknown, and
  // never quoting it. Every known token is compared, each in constant time.
  absl::StatusOr<TokenRef> Authenticate(std::optional<absl::string_view> authorization) const;

  // Takes one of `token`'s in-flight slots: RESOURCE_EXHAUSTED naming the token and its limit
  // when all are taken, UNAUTHENTICATED when a reload has revoked it. A null token (a server
  // without tokens) gets an empty slot.
  static absl::StatusOr<InFlightSlot> Enter(const TokenRef& token);

  // Reads the token file again (FAILED_PRECONDITION for an authenticator made FromText). On
  // any error (the file cannot be read, a malformed line, no tokens) the tokens stay as they
  // were and the error says why, naming the file and line but never a token.
  absl::StatusOr<ReloadResult> Reload();
  // The same from text (tests; and Reload's second half).
  absl::StatusOr<ReloadResult> ReloadFromText(absl::string_view text);
  // True when the token file's modification time, size, inode or device differ from those
  // it had when it was last read (or a read was attempted), or it cannot be stat'ed where it
  // could be before. Cheap (one stat); false for an authenticator made FromText.
  bool FileChanged() const;

  const std::string& path() const { return path_; }  // empty for FromText
  size_t size() const;

 private:
  TokenAuthenticator(std::string path, int default_max_in_flight)
      : path_(std::move(path)), default_max_in_flight_(default_max_in_flight) {}
  // Installs `specs` (already validated), reusing the tokens that stay.
  ReloadResult Install(std::vector<TokenSpec> specs);

  const std::string path_;
  const int default_max_in_flight_;
  absl::Mutex reload_mu_;  // one reload at a time (SIGHUP and the file watcher)
  mutable absl::Mutex mu_;
  std::vector<std::shared_ptr<Token>> tokens_ ABSL_GUARDED_BY(mu_);
  FileStamp stamp_ ABSL_GUARDED_BY(mu_);  // of the file last read, or attempted
};

}  // namespace gpucompute
