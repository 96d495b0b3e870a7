// Token files, bearer-token checks and in-flight quotas (server/transport/auth.h).
#include "server/transport/auth.h"

#include <cstdio>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kAlice[] = "alice-0123456789abcdef";
constexpr char kBob[] = "bob-0123456789abcdef";

absl::Status ParseError(const std::string& text) {
  auto specs = ParseTokenFile(text, 64);
  EXPECT_FALSE(specs.ok()) << text;
  return specs.status();
}

TEST(ParseTokenFile, ReadsNamesTokensAndLimits) {
  auto specs = ParseTokenFile(absl::StrCat("# service accounts\n\n  alice ", kAlice,
                                           "\t 3\r\nbob\t", kBob, "\n   # indented comment\n"),
                              64);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].name, "alice");
  EXPECT_EQ((*specs)[0].token, kAlice);
  EXPECT_EQ((*specs)[0].max_in_flight, 3);
  EXPECT_EQ((*specs)[1].name, "bob");
  EXPECT_EQ((*specs)[1].token, kBob);
  EXPECT_EQ((*specs)[1].max_in_flight, 64);  // the default
}

TEST(ParseTokenFile, ErrorsNameTheLineAndNeverQuoteTheToken) {
  const std::string ok_line = absl::StrCat("alice ", kAlice, "\n");
  struct Case {
    std::string text;
    std::string expected;
  };
  const Case cases[] = {
      {ok_line + "bob\n", "line 2: expected NAME TOKEN [MAX_IN_FLIGHT], found 1 field"},
      {ok_line + "bob " + kBob + " 3 extra\n", "line 2: expected NAME TOKEN [MAX_IN_FLIGHT], found 4"},
      {"# c\nbob short-token\n", "line 2: the token of \"bob\" has 11 characters; it needs 16-4096"},
      {ok_line + "b/b " + kBob + "\n", "line 2: name \"b/b\" must be 1-128 of [A-Za-z0-9_.:@-]"},
      {ok_line + "bob " + kBob + " 0\n", "line 2: max_in_flight of \"bob\" must be an integer"},
      {ok_line + "bob " + kBob + " many\n", "line 2: max_in_flight of \"bob\" must be an integer"},
      {ok_line + "\nalice " + kBob + "\n", "line 3: name \"alice\" is already used on line 1"},
      {ok_line + "bob " + kAlice + "\n", "line 2: the token of \"bob\" is already the token of line 1"},
      {ok_line + "bob 0123456789abcdef\x7f\n", "line 2: the token of \"bob\" must be printable ASCII"},
      {"# nothing\n\n", "no tokens"},
  };
  for (const Case& c : cases) {
    const absl::Status s = ParseError(c.text);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.text;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.expected)) << c.text;
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr(kAlice)));
    EXPECT_THAT(std::string(s.message()), Not(HasSubstr("short-token")));
  }
}

TEST(ParseTokenFile, ZeroDefaultNeedsAnExplicitLimit) {
  auto specs = ParseTokenFile(absl::StrCat("alice ", kAlice, " 5\nbob ", kBob), 0);
  EXPECT_EQ(specs.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(specs.status().message()),
              HasSubstr("line 2: max_in_flight of \"bob\" must be positive (the default is 0)"));
}

TEST(ConstantTimeEquals, ComparesWholeStrings) {
  EXPECT_TRUE(ConstantTimeEquals("0123456789abcdef", "0123456789abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("0123456789abcdeF", "0123456789abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("0123456789abcde", "0123456789abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("0123456789abcdef0", "0123456789abcdef"));
  EXPECT_FALSE(ConstantTimeEquals("", "0123456789abcdef"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
}

class Authenticator : public ::testing::Test {
 protected:
  void SetUp() override {
    auto auth = TokenAuthenticator::FromText(
        absl::StrCat("alice ", kAlice, " 2\nbob ", kBob, "\n"), 64);
    ASSERT_TRUE(auth.ok()) << auth.status();
    auth_ = *std::move(auth);
  }
  std::unique_ptr<TokenAuthenticator> auth_;
};

TEST_F(Authenticator, AcceptsBearerTokens) {
  auto alice = auth_->Authenticate(absl::StrCat("Bearer ", kAlice));
  ASSERT_TRUE(alice.ok()) << alice.status();
  EXPECT_EQ((*alice)->name(), "alice");
  EXPECT_EQ((*alice)->max_in_flight(), 2);
  auto bob = auth_->Authenticate(absl::StrCat("bearer  ", kBob, " "));  // scheme in any case
  ASSERT_TRUE(bob.ok()) << bob.status();
  EXPECT_EQ((*bob)->name(), "bob");
  EXPECT_EQ((*bob)->max_in_flight(), 64);
}

TEST_F(Authenticator, RefusesMissingMalformedAndUnknownTokens) {
  auto missing = auth_->Authenticate(std::nullopt);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("missing bearer token"));

  auto basic = auth_->Authenticate(absl::StrCat("Basic ", kAlice));
  EXPECT_EQ(basic.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(basic.status().message()), HasSubstr("not a bearer token"));
  EXPECT_THAT(std::string(basic.status().message()), Not(HasSubstr(kAlice)));

  for (const std::string wrong : {absl::StrCat("Bearer ", kAlice, "x"),
                                  std::string("Bearer alice-0123456789abcdeF"),
                                  std::string("Bearer "), std::string("Bearer alice")}) {
    auto s = auth_->Authenticate(wrong);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kUnauthenticated) << wrong;
    EXPECT_EQ(s.status().message(), "invalid bearer token") << wrong;
  }
}

TEST_F(Authenticator, BoundsEachTokensCallsInFlight) {
  const TokenAuthenticator::TokenRef alice = *auth_->Authenticate(absl::StrCat("Bearer ", kAlice));
  const TokenAuthenticator::TokenRef bob = *auth_->Authenticate(absl::StrCat("Bearer ", kBob));
  auto first = TokenAuthenticator::Enter(alice);
  auto second = TokenAuthenticator::Enter(alice);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(alice->in_flight(), 2);
  auto third = TokenAuthenticator::Enter(alice);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(third.status().message()), HasSubstr("token \"alice\""));
  EXPECT_THAT(std::string(third.status().message()), HasSubstr("limit of 2 calls in flight"));
  EXPECT_EQ(alice->in_flight(), 2);  // a refusal takes nothing
  // Another token is unaffected.
  auto other = TokenAuthenticator::Enter(bob);
  EXPECT_TRUE(other.ok());
  // Release, move and destruction give slots back, once each.
  first->Release();
  first->Release();
  EXPECT_EQ(alice->in_flight(), 1);
  {
    InFlightSlot moved = *std::move(second);
    InFlightSlot again = std::move(moved);
    EXPECT_EQ(alice->in_flight(), 1);
  }
  EXPECT_EQ(alice->in_flight(), 0);
  EXPECT_TRUE(TokenAuthenticator::Enter(alice).ok());
  // No token (a server without tokens): an empty slot, always.
  auto none = TokenAuthenticator::Enter(nullptr);
  EXPECT_TRUE(none.ok());
}

TEST(TokenFile, ReadFailuresNameTheFile) {
  auto missing = TokenAuthenticator::FromFile("/nonexistent/tokens", 64);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/tokens"));

  const std::string path = ::testing::TempDir() + "/auth_test_tokens";
  std::ofstream(path) << "alice " << kAlice << "\nbob\n";
  auto bad = TokenAuthenticator::FromFile(path, 64);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(path + ": line 2: "));
}

constexpr char kCarol[] = "carol-0123456789abcdef";

TEST_F(Authenticator, AReloadKeepsTheSlotsOfKeptTokensAndTheirNewLimits) {
  const auto alice = *auth_->Authenticate(absl::StrCat("Bearer ", kAlice));
  auto first = TokenAuthenticator::Enter(alice);
  auto second = TokenAuthenticator::Enter(alice);
  ASSERT_TRUE(first.ok() && second.ok());
  // alice stays with the same secret and limit 2: her two calls still count.
  auto result = auth_->ReloadFromText(absl::StrCat("alice ", kAlice, " 2\nbob ", kBob, "\n"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->kept, 2);
  EXPECT_EQ(result->added, 0);
  EXPECT_EQ(result->removed, 0);
  const auto again = *auth_->Authenticate(absl::StrCat("Bearer ", kAlice));
  EXPECT_EQ(again, alice);  // the same token, not a fresh one with an empty count
  EXPECT_EQ(TokenAuthenticator::Enter(again).status().code(), absl::StatusCode::kResourceExhausted);
  // A new limit applies at once.
  ASSERT_TRUE(auth_->ReloadFromText(absl::StrCat("alice ", kAlice, " 3\nbob ", kBob, "\n")).ok());
  EXPECT_EQ(alice->max_in_flight(), 3);
  auto third = TokenAuthenticator::Enter(alice);
  EXPECT_TRUE(third.ok());
  EXPECT_EQ(alice->in_flight(), 3);
}

TEST_F(Authenticator, AReloadRevokesDroppedTokensAndAddsNewOnes) {
  const auto alice = *auth_->Authenticate(absl::StrCat("Bearer ", kAlice));
  auto held = TokenAuthenticator::Enter(alice);
  ASSERT_TRUE(held.ok());
  // alice is dropped, carol added; bob's secret changes (a new token under the old name).
  const std::string bob2 = "bob-new-0123456789abcdef";
  auto result = auth_->ReloadFromText(absl::StrCat("carol ", kCarol, "\nbob ", bob2, " 5\n"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->added, 2);
  EXPECT_EQ(result->removed, 2);
  EXPECT_EQ(result->kept, 0);
  EXPECT_EQ(auth_->size(), 2u);
  for (const std::string& gone : {std::string(kAlice), std::string(kBob)}) {
    auto s = auth_->Authenticate(absl::StrCat("Bearer ", gone));
    EXPECT_EQ(s.status().code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(s.status().message(), "invalid bearer token");
  }
  // A call that authenticated before the reload gets no new slot.
  EXPECT_TRUE(alice->revoked());
  auto late = TokenAuthenticator::Enter(alice);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(std::string(late.status().message()), HasSubstr("revoked"));
  // The slot it held is given back safely, even after its token is gone.
  held->Release();
  EXPECT_EQ(alice->in_flight(), 0);
  auto carol = auth_->Authenticate(absl::StrCat("Bearer ", kCarol));
  ASSERT_TRUE(carol.ok());
  EXPECT_EQ((*carol)->name(), "carol");
  EXPECT_EQ((*carol)->max_in_flight(), 64);
  auto bob = auth_->Authenticate(absl::StrCat("Bearer ", bob2));
  ASSERT_TRUE(bob.ok());
  EXPECT_EQ((*bob)->max_in_flight(), 5);
  EXPECT_FALSE((*bob)->revoked());
}

TEST_F(Authenticator, ABadReloadChangesNothing) {
  for (const std::string bad : {absl::StrCat("alice ", kAlice, "\nbob short\n"),
                                std::string("# empty\n"), absl::StrCat("carol ", kCarol, " 0\n")}) {
    auto result = auth_->ReloadFromText(bad);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(result.status().message()), Not(HasSubstr(kAlice)));
    EXPECT_EQ(auth_->size(), 2u);
    auto alice = auth_->Authenticate(absl::StrCat("Bearer ", kAlice));
    ASSERT_TRUE(alice.ok()) << bad;
    EXPECT_FALSE((*alice)->revoked());
    EXPECT_EQ((*alice)->max_in_flight(), 2);
    EXPECT_FALSE(auth_->Authenticate(absl::StrCat("Bearer ", kCarol)).ok());
  }
  EXPECT_EQ(auth_->Reload().status().code(), absl::StatusCode::kFailedPrecondition);  // no file
  EXPECT_FALSE(auth_->FileChanged());
}

TEST(TokenFile, ReloadReadsTheFileAgainWhenItChanges) {
  const std::string path = ::testing::TempDir() + "/auth_test_reload_tokens";
  std::ofstream(path) << "alice " << kAlice << "\n";
  auto auth = TokenAuthenticator::FromFile(path, 64);
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_FALSE((*auth)->FileChanged());
  // Replaced the way Kubernetes replaces a Secret's files: a new file renamed over the old.
  const std::string next = path + ".next";
  std::ofstream(next) << "alice " << kAlice << "\ncarol " << kCarol << "\n";
  ASSERT_EQ(std::rename(next.c_str(), path.c_str()), 0);
  EXPECT_TRUE((*auth)->FileChanged());
  auto result = (*auth)->Reload();
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->added, 1);
  EXPECT_EQ(result->kept, 1);
  EXPECT_FALSE((*auth)->FileChanged());
  EXPECT_TRUE((*auth)->Authenticate(absl::StrCat("Bearer ", kCarol)).ok());
  // A broken file is noticed once (then it is the file last read) and keeps the tokens.
  std::ofstream(next) << "carol\n";
  ASSERT_EQ(std::rename(next.c_str(), path.c_str()), 0);
  EXPECT_TRUE((*auth)->FileChanged());
  auto bad = (*auth)->Reload();
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr(path + ": line 1: "));
  EXPECT_FALSE((*auth)->FileChanged());
  EXPECT_TRUE((*auth)->Authenticate(absl::StrCat("Bearer ", kCarol)).ok());
  // So is a file that went away.
  ASSERT_EQ(std::remove(path.c_str()), 0);
  EXPECT_TRUE((*auth)->FileChanged());
  auto gone = (*auth)->Reload();
  EXPECT_THAT(std::string(gone.status().message()), HasSubstr("cannot be read"));
  EXPECT_FALSE((*auth)->FileChanged());
  EXPECT_EQ((*auth)->size(), 2u);
}

}  // namespace
}  // namespace gpucompute
