// Token files, bearer tokens and in-flight quotas (see auth.h).
#include "server/transport/auth.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace gpucompute {
namespace {

constexpr size_t kMaxNameLength = 128;
constexpr size_t kMinTokenLength = 16;
constexpr size_t kMaxTokenLength = 4096;
constexpr int kMaxInFlightLimit = 1000000;

bool ValidName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && !absl::StrContains("_.:@-", c)) return false;
  }
  return true;
}

// Printable ASCII without blanks: what an HTTP/2 header value carries unchanged.
bool ValidTokenChars(absl::string_view token) {
  for (char c : token) {
    if (c <= 0x20 || c >= 0x7f) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::vector<TokenSpec>> ParseTokenFile(absl::string_view text,
                                                      int default_max_in_flight) {
  std::vector<TokenSpec> specs;
  absl::flat_hash_map<std::string, int> name_line, token_line;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const absl::string_view stripped = absl::StripAsciiWhitespace(line);
    if (stripped.empty() || stripped.front() == '#') continue;
    auto error = [&](auto&&... parts) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": ", parts...));
    };
    const std::vector<absl::string_view> fields =
        absl::StrSplit(stripped, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.size() < 2 || fields.size() > 3) {
      return error("expected NAME TOKEN [MAX_IN_FLIGHT], found ", fields.size(), " field",
                   fields.size() == 1 ? "" : "s");
    }
    TokenSpec spec;
    spec.name = std::string(fields[0]);
    if (!ValidName(spec.name)) {
      return error("name \"", absl::CEscape(fields[0].substr(0, kMaxNameLength)),
                   "\" must be 1-", kMaxNameLength, " of [A-Za-z0-9_.:@-]");
    }
    const absl::string_view token = fields[1];
    if (token.size() < kMinTokenLength || token.size() > kMaxTokenLength) {
      return error("the token of \"", spec.name, "\" has ", token.size(), " characters; it needs ",
                   kMinTokenLength, "-", kMaxTokenLength);
    }
    if (!ValidTokenChars(token)) {
      return error("the token of \"", spec.name,
                   "\" must be printable ASCII without blanks");
    }
    spec.token = std::string(token);
    spec.max_in_flight = default_max_in_flight;
    if (fields.size() == 3 &&
        (!absl::SimpleAtoi(fields[2], &spec.max_in_flight) || spec.max_in_flight < 1 ||
         spec.max_in_flight > kMaxInFlightLimit)) {
      return error("max_in_flight of \"", spec.name, "\" must be an integer in [1, ",
                   kMaxInFlightLimit, "], got \"", absl::CEscape(fields[2].substr(0, 32)), "\"");
    }
    if (spec.max_in_flight < 1) {
      return error("max_in_flight of \"", spec.name, "\" must be positive (the default is ",
                   default_max_in_flight, ")");
    }
    if (auto [it, added] = name_line.emplace(spec.name, line_number); !added) {
      return error("name \"", spec.name, "\" is already used on line ", it->second);
    }
    if (auto [it, added] = token_line.emplace(spec.token, line_number); !added) {
      return error("the token of \"", spec.name, "\" is already the token of line ", it->second);
    }
    specs.push_back(std::move(spec));
  }
  if (specs.empty()) {
    return absl::InvalidArgumentError("no tokens (every call would be refused)");
  }
  return specs;
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view secret) {
  // Runs over the whole secret whatever `a` holds: the time tells nothing of how much matched.
  volatile unsigned char diff = a.size() == secret.size() ? 0 : 1;
  for (size_t i = 0; i < secret.size(); ++i) {
    const unsigned char c = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff = diff | (c ^ static_cast<unsigned char>(secret[i]));
  }
  return diff == 0;
}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::FromText(
    absl::string_view text, int default_max_in_flight) {
  auto specs = ParseTokenFile(text, default_max_in_flight);
  if (!specs.ok()) return specs.status();
  std::unique_ptr<TokenAuthenticator> auth(new TokenAuthenticator("", default_max_in_flight));
  auth->Install(*std::move(specs));
  return auth;
}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::FromFile(
    const std::string& path, int default_max_in_flight) {
  std::unique_ptr<TokenAuthenticator> auth(new TokenAuthenticator(path, default_max_in_flight));
  auto loaded = auth->Reload();
  if (!loaded.ok()) return loaded.status();
  return auth;
}

bool TokenAuthenticator::FileChanged() const {
  if (path_.empty()) return false;
  const FileStamp now = StatFile(path_);
  absl::MutexLock lock(&mu_);
  return now != stamp_;
}

absl::StatusOr<TokenAuthenticator::ReloadResult> TokenAuthenticator::Reload() {
  if (path_.empty()) {
    return absl::FailedPreconditionError("the tokens did not come from a file");
  }
  absl::MutexLock reload(&reload_mu_);
  // Stamp first, then read: a change while reading makes FileChanged() true again.
  {
    const FileStamp stamp = StatFile(path_);
    absl::MutexLock lock(&mu_);
    stamp_ = stamp;
  }
  std::ifstream in(path_, std::ios::binary);
  std::ostringstream text;
  if (!in || !(text << in.rdbuf())) {
    return absl::InvalidArgumentError(absl::StrCat("token file ", path_, ": cannot be read"));
  }
  auto specs = ParseTokenFile(text.str(), default_max_in_flight_);
  if (!specs.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file ", path_, ": ", specs.status().message()));
  }
  return Install(*std::move(specs));
}

absl::StatusOr<TokenAuthenticator::ReloadResult> TokenAuthenticator::ReloadFromText(
    absl::string_view text) {
  absl::MutexLock reload(&reload_mu_);
  auto specs = ParseTokenFile(text, default_max_in_flight_);
  if (!specs.ok()) return specs.status();
  return Install(*std::move(specs));
}

TokenAuthenticator::ReloadResult TokenAuthenticator::Install(std::vector<TokenSpec> specs) {
  ReloadResult result;
  std::vector<std::shared_ptr<Token>> old;
  {
    absl::MutexLock lock(&mu_);
    old = tokens_;
  }
  std::vector<std::shared_ptr<Token>> next;
  next.reserve(specs.size());
  std::vector<bool> reused(old.size(), false);
  for (TokenSpec& spec : specs) {
    std::shared_ptr<Token> token;
    for (size_t i = 0; i < old.size(); ++i) {
      if (!reused[i] && old[i]->name_ == spec.name && old[i]->secret_ == spec.token) {
        token = old[i];
        reused[i] = true;
        break;
      }
    }
    if (token != nullptr) {
      ++result.kept;
    } else {
      token = std::make_shared<Token>();
      token->name_ = std::move(spec.name);
      token->secret_ = std::move(spec.token);
      ++result.added;
    }
    token->max_in_flight_.store(spec.max_in_flight, std::memory_order_relaxed);
    next.push_back(std::move(token));
  }
  {
    absl::MutexLock lock(&mu_);
    tokens_ = std::move(next);
  }
  // After the swap: a call that authenticated with a dropped token just before it is refused
  // when it asks for its slot.
  for (size_t i = 0; i < old.size(); ++i) {
    if (!reused[i]) {
      old[i]->revoked_.store(true, std::memory_order_release);
      ++result.removed;
    }
  }
  return result;
}

size_t TokenAuthenticator::size() const {
  absl::MutexLock lock(&mu_);
  return tokens_.size();
}

absl::StatusOr<TokenAuthenticator::TokenRef> TokenAuthenticator::Authenticate(
    std::optional<absl::string_view> authorization) const {
  if (!authorization.has_value()) {
    return absl::UnauthenticatedError(
        "missing bearer token: send metadata \"authorization: Bearer <token>\"");
  }
  const absl::string_view value = absl::StripAsciiWhitespace(*authorization);
  const size_t blank = std::min(value.find(' '), value.size());
  if (!absl::EqualsIgnoreCase(value.substr(0, blank), "bearer")) {
    return absl::UnauthenticatedError(
        "the authorization metadata is not a bearer token (expected \"Bearer <token>\")");
  }
  const absl::string_view presented = absl::StripLeadingAsciiWhitespace(value.substr(blank));
  TokenRef found;
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& token : tokens_) {
    if (ConstantTimeEquals(presented, token->secret_)) found = token;
  }
  if (found == nullptr) return absl::UnauthenticatedError("invalid bearer token");
  return found;
}

absl::StatusOr<InFlightSlot> TokenAuthenticator::Enter(const TokenRef& token) {
  if (token == nullptr) return InFlightSlot();
  if (token->revoked()) {
    return absl::UnauthenticatedError(
        "bearer token revoked (the server's token file no longer lists it)");
  }
  std::atomic<int>& in_flight = token->counter_->in_flight;
  const int limit = token->max_in_flight();
  if (in_flight.fetch_add(1, std::memory_order_acq_rel) >= limit) {
    in_flight.fetch_sub(1, std::memory_order_acq_rel);
    return absl::ResourceExhaustedError(
        absl::StrCat("token \"", token->name_, "\" has its limit of ", limit,
                     " calls in flight; retry when one finishes"));
  }
  return InFlightSlot(token->counter_);
}

}  // namespace gpucompute
