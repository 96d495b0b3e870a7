// TensorStore: quotas (bytes, count), idle expiry on a fake clock, reference counts across
// delete and expiry, owner isolation, incomplete tensors and concurrent writers.
#include "server/runtime/tensor_store.h"

#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;

// A clock that moves only when told to.
class FakeClock {
 public:
  absl::Time Now() {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ = absl::FromUnixSeconds(1000000);
};

TensorSpec F64(std::vector<int64_t> shape) { return TensorSpec{2, 8, std::move(shape)}; }

class TensorStoreTest : public ::testing::Test {
 protected:
  TensorStoreOptions Options() {
    TensorStoreOptions o;
    o.max_bytes_per_client = 1000;
    o.max_tensors_per_client = 3;
    o.idle_expiry = absl::Seconds(10);
    o.sweep_interval = absl::ZeroDuration();  // the test sweeps
    o.clock = [this] { return clock_.Now(); };
    return o;
  }

  // A complete tensor of `n` doubles 0, 1, ...
  std::shared_ptr<ResidentTensor> Full(TensorStore& store, const std::string& owner, int n) {
    auto t = store.Create(owner, F64({n}));
    EXPECT_TRUE(t.ok()) << t.status();
    std::vector<double> v(n);
    for (int i = 0; i < n; ++i) v[i] = i;
    EXPECT_TRUE((*t)->Write(0, absl::string_view(reinterpret_cast<const char*>(v.data()), 8 * n)).ok());
    EXPECT_TRUE((*t)->complete());
    return *t;
  }

  FakeClock clock_;
};

TEST_F(TensorStoreTest, HandlesAreLongAndDistinct) {
  TensorStore store(Options());
  auto a = store.Create("c", F64({1}));
  auto b = store.Create("c", F64({1}));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)->handle().size(), 32u);  // 128 random bits, hex
  EXPECT_NE((*a)->handle(), (*b)->handle());
}

TEST_F(TensorStoreTest, QuotaBytesIsResourceExhaustedNamingTheFlag) {
  TensorStore store(Options());
  ASSERT_TRUE(store.Create("c", F64({100})).ok());  // 800 bytes
  auto over = store.Create("c", F64({26}));          // 208 more: 1008 > 1000
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("--tensor_quota_bytes"));
  EXPECT_TRUE(store.Create("c", F64({25})).ok());    // exactly 1000
  // Another client has its own quota.
  EXPECT_TRUE(store.Create("other", F64({100})).ok());
  EXPECT_EQ(store.OwnerBytes("c"), 1000);
}

// Client ids are what callers say they are: the store's total is bounded whatever the ids.
TEST_F(TensorStoreTest, AllClientsTogetherAreBoundedByTheStoreLimit) {
  TensorStoreOptions o = Options();
  o.max_total_bytes = 2500;  // per client 1000
  TensorStore store(o);
  ASSERT_TRUE(store.Create("a", F64({100})).ok());
  ASSERT_TRUE(store.Create("b", F64({100})).ok());
  ASSERT_TRUE(store.Create("c", F64({50})).ok());  // 2000 in all
  auto over = store.Create("d", F64({100}));       // 800 more: 2800 > 2500
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()),
              HasSubstr("the server holds 2000 bytes of resident tensors for all clients"));
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("(--tensor_store_bytes)"));
  EXPECT_FALSE(store.CheckRoom("e", 501).ok());
  EXPECT_TRUE(store.CheckRoom("e", 500).ok());
  // Deleting gives the room back.
  auto listed = store.List("a");
  ASSERT_EQ(listed.size(), 1u);
  ASSERT_TRUE(store.Delete("a", listed[0]->handle()).ok());
  EXPECT_TRUE(store.Create("d", F64({100})).ok());
}

TEST_F(TensorStoreTest, QuotaCountIsResourceExhaustedNamingTheFlag) {
  TensorStore store(Options());
  std::vector<std::string> handles;
  for (int i = 0; i < 3; ++i) {
    auto t = store.Create("c", F64({1}));
    ASSERT_TRUE(t.ok());
    handles.push_back((*t)->handle());
  }
  auto over = store.Create("c", F64({1}));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("--tensor_quota_count"));
  // Deleting frees the slot.
  ASSERT_TRUE(store.Delete("c", handles[0]).ok());
  EXPECT_TRUE(store.Create("c", F64({1})).ok());
}

TEST_F(TensorStoreTest, AddCompleteIsAllOrNothing) {
  TensorStore store(Options());
  std::vector<NewTensor> two(2);
  for (auto& t : two) {
    t.spec = F64({50});
    t.bytes.assign(400, 'x');
  }
  auto added = store.AddComplete("c", two);
  ASSERT_TRUE(added.ok()) << added.status();
  ASSERT_EQ(added->size(), 2u);
  EXPECT_TRUE((*added)[0]->complete());
  EXPECT_EQ((*added)[1]->data(), std::string(400, 'x'));
  // 800 used: two more of 400 do not fit, and neither is added.
  auto over = store.AddComplete("c", two);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(store.List("c").size(), 2u);
  EXPECT_EQ(store.OwnerBytes("c"), 800);
}

TEST_F(TensorStoreTest, OnlyTheOwnerSeesItsTensors) {
  TensorStore store(Options());
  auto t = Full(store, "alice", 4);
  for (const auto& status : {store.Acquire("bob", t->handle()).status(),
                             store.FindForWrite("bob", t->handle()).status(),
                             store.Delete("bob", t->handle())}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  }
  EXPECT_TRUE(store.List("bob").empty());
  EXPECT_TRUE(store.Acquire("alice", t->handle()).ok());
}

TEST_F(TensorStoreTest, IncompleteTensorsCannotBeRead) {
  TensorStore store(Options());
  auto t = store.Create("c", F64({4}));
  ASSERT_TRUE(t.ok());
  const std::string bytes(16, '\1');
  ASSERT_TRUE((*t)->Write(0, bytes).ok());
  auto read = store.Acquire("c", (*t)->handle());
  ASSERT_FALSE(read.ok());
  EXPECT_EQ(read.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(read.status().message()), HasSubstr("16 of 32 bytes"));
  // Rewriting the same bytes does not count twice.
  ASSERT_TRUE((*t)->Write(8, bytes.substr(0, 8)).ok());
  EXPECT_EQ((*t)->received_bytes(), 16);
  ASSERT_TRUE((*t)->Write(16, bytes).ok());
  EXPECT_TRUE(store.Acquire("c", (*t)->handle()).ok());
  // Complete tensors are immutable.
  EXPECT_EQ((*t)->Write(0, bytes).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(TensorStoreTest, WritesOutsideTheTensorAreRefused) {
  TensorStore store(Options());
  auto t = store.Create("c", F64({2}));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ((*t)->Write(-1, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*t)->Write(10, std::string(7, 'x')).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*t)->Write(17, "").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE((*t)->Write(16, "").ok());
}

TEST_F(TensorStoreTest, OverlappingAndOutOfOrderChunksComplete) {
  TensorStore store(Options());
  auto t = store.Create("c", TensorSpec{7, 1, {100}});
  ASSERT_TRUE(t.ok());
  std::string want(100, '\0');
  for (int i = 0; i < 100; ++i) want[i] = static_cast<char>(i);
  for (auto [b, e] : std::vector<std::pair<int, int>>{{50, 70}, {10, 20}, {60, 100}, {0, 15}}) {
    ASSERT_TRUE((*t)->Write(b, want.substr(b, e - b)).ok());
    EXPECT_FALSE((*t)->complete());
  }
  ASSERT_TRUE((*t)->Write(15, want.substr(15, 40)).ok());
  EXPECT_TRUE((*t)->complete());
  EXPECT_EQ((*t)->data(), want);
}

// Writes of whole float elements note whether their values are finite; anything the notes
// cannot vouch for (a NaN, an element split between writes, bytes written twice, a tensor
// whose dtype is not a float type, a kept output) leaves the tensor unchecked.
TEST_F(TensorStoreTest, ValuesAreKnownFiniteOnlyWhenEveryWriteWasCheckedAndFinite) {
  TensorStore store(Options());
  const std::vector<double> v = {1, -2, 3e300, 4, 5, 6};
  const absl::string_view all(reinterpret_cast<const char*>(v.data()), 48);
  TensorSpec floats = F64({6});
  floats.values = ElementType::kFloat64;
  struct Case {
    const char* what;
    std::vector<std::pair<int, int>> writes;  // byte ranges, in order
    bool nan = false;
    bool typed = true;
    bool finite;
  };
  for (const Case& c : std::vector<Case>{
           {"whole elements", {{0, 16}, {16, 48}}, false, true, true},
           {"a NaN", {{0, 16}, {16, 48}}, true, true, false},
           {"an element split between writes", {{0, 12}, {12, 48}}, false, true, false},
           {"bytes written twice", {{0, 24}, {16, 48}}, false, true, false},
           {"no float type", {{0, 48}}, false, false, false}}) {
    SCOPED_TRACE(c.what);
    auto t = store.Create("c", c.typed ? floats : F64({6}));
    ASSERT_TRUE(t.ok()) << t.status();
    std::string bytes(all);
    if (c.nan) {
      const double nan = std::nan("");
      std::memcpy(bytes.data() + 24, &nan, 8);
    }
    for (auto [b, e] : c.writes) {
      EXPECT_FALSE((*t)->values_finite());
      ASSERT_TRUE((*t)->Write(b, absl::string_view(bytes).substr(b, e - b)).ok());
    }
    EXPECT_TRUE((*t)->complete());
    EXPECT_EQ((*t)->values_finite(), c.finite);
    EXPECT_TRUE(store.Delete("c", (*t)->handle()).ok());
  }
  std::vector<NewTensor> kept(1);
  kept[0].spec = floats;
  kept[0].bytes = std::string(all);
  auto added = store.AddComplete("c", std::move(kept));
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_FALSE((*added)[0]->values_finite());
}

TEST_F(TensorStoreTest, ParallelWritersComplete) {
  TensorStoreOptions big = Options();
  big.max_bytes_per_client = int64_t{1} << 30;
  TensorStore large(big);
  const int64_t n = 48 << 20;  // over ParallelCopy's serial threshold per writer
  auto t = large.Create("c", TensorSpec{7, 1, {n}});
  ASSERT_TRUE(t.ok());
  std::string src(n, '\0');
  for (int64_t i = 0; i < n; ++i) src[i] = static_cast<char>(i * 7);
  std::vector<std::thread> writers;
  const int64_t piece = n / 4;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      EXPECT_TRUE((*t)->Write(w * piece, absl::string_view(src).substr(w * piece, piece)).ok());
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_TRUE((*t)->complete());
  EXPECT_TRUE((*t)->data() == src);
}

TEST_F(TensorStoreTest, ZeroByteTensorsAreCompleteAtOnce) {
  TensorStore store(Options());
  auto t = store.Create("c", F64({0, 5}));
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE((*t)->complete());
  EXPECT_TRUE(store.Acquire("c", (*t)->handle()).ok());
}

TEST_F(TensorStoreTest, BadSpecsAreInvalidArgument) {
  TensorStore store(Options());
  EXPECT_EQ(store.Create("c", F64({-1})).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Create("c", TensorSpec{0, 0, {1}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Create("c", F64({int64_t{1} << 40, int64_t{1} << 40})).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(TensorStoreTest, IdleTensorsExpire) {
  TensorStore store(Options());
  auto used = Full(store, "c", 2);
  auto idle = Full(store, "c", 2);
  const std::string used_handle = used->handle(), idle_handle = idle->handle();
  used.reset();
  idle.reset();
  clock_.Advance(absl::Seconds(6));
  ASSERT_TRUE(store.Acquire("c", used_handle).ok());  // a use resets its idle time
  clock_.Advance(absl::Seconds(6));                   // idle: 12 s, used: 6 s
  EXPECT_EQ(store.Sweep(), 1);
  EXPECT_EQ(store.Acquire("c", idle_handle).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store.Acquire("c", used_handle).ok());
  EXPECT_EQ(store.OwnerBytes("c"), 16);
  EXPECT_EQ(store.Stats().expired, 1);
}

TEST_F(TensorStoreTest, ExpiredTensorsAreGoneOnLookupWithoutASweep) {
  TensorStore store(Options());
  const std::string h = Full(store, "c", 2)->handle();
  clock_.Advance(absl::Seconds(11));
  EXPECT_EQ(store.Acquire("c", h).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.OwnerBytes("c"), 0);
}

TEST_F(TensorStoreTest, ExpiredTensorsDoNotHoldTheQuota) {
  TensorStore store(Options());
  Full(store, "c", 100);  // 800 of 1000 bytes
  EXPECT_EQ(store.Create("c", F64({100})).status().code(), absl::StatusCode::kResourceExhausted);
  clock_.Advance(absl::Seconds(11));
  EXPECT_TRUE(store.Create("c", F64({100})).ok());  // the create sweeps first
}

TEST_F(TensorStoreTest, TensorsInUseDoNotExpire) {
  TensorStore store(Options());
  auto t = Full(store, "c", 2);
  auto reader = store.Acquire("c", t->handle());
  ASSERT_TRUE(reader.ok());
  const std::string h = t->handle();
  t.reset();
  clock_.Advance(absl::Seconds(60));
  EXPECT_EQ(store.Sweep(), 0);  // a job holds it
  reader->reset();
  EXPECT_EQ(store.Sweep(), 1);
  EXPECT_EQ(store.Acquire("c", h).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TensorStoreTest, DeletedTensorStaysValidWhileAJobHoldsIt) {
  TensorStore store(Options());
  auto t = Full(store, "c", 4);
  auto job = store.Acquire("c", t->handle());
  ASSERT_TRUE(job.ok());
  const std::string h = t->handle();
  t.reset();
  ASSERT_TRUE(store.Delete("c", h).ok());
  EXPECT_EQ(store.Acquire("c", h).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store.OwnerBytes("c"), 0);  // the quota is released at once
  // The job still reads the bytes.
  double v[4];
  std::memcpy(v, (*job)->data().data(), sizeof(v));
  EXPECT_EQ(v[3], 3.0);
  EXPECT_EQ(store.Delete("c", h).code(), absl::StatusCode::kNotFound);
}

TEST_F(TensorStoreTest, NoExpiryWhenZero) {
  TensorStoreOptions o = Options();
  o.idle_expiry = absl::ZeroDuration();
  TensorStore store(o);
  const std::string h = Full(store, "c", 2)->handle();
  clock_.Advance(absl::Hours(1000));
  EXPECT_EQ(store.Sweep(), 0);
  EXPECT_TRUE(store.Acquire("c", h).ok());
}

TEST_F(TensorStoreTest, ATensorsOwnShorterExpiryWins) {
  TensorStoreOptions o = Options();
  o.idle_expiry = absl::ZeroDuration();  // the store's: never; a tensor's own still applies
  TensorStore store(o);
  auto quick = store.Create("c", F64({4}), absl::Seconds(2));
  ASSERT_TRUE(quick.ok());
  const std::string h = (*quick)->handle();
  auto slow = store.AddComplete("c", {NewTensor{F64({1}), std::string(8, '\0')}}, absl::Hours(1));
  ASSERT_TRUE(slow.ok());
  const std::string kept = (*slow)[0]->handle();
  quick->reset();
  slow->clear();
  clock_.Advance(absl::Seconds(3));
  EXPECT_EQ(store.Sweep(), 1);  // incomplete, idle past its 2 s
  EXPECT_EQ(store.Acquire("c", h).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store.Acquire("c", kept).ok());
  EXPECT_EQ(store.OwnerBytes("c"), 8);
  // The store's expiry caps a longer one of the tensor's.
  TensorStore capped(Options());  // 10 s
  auto t = capped.Create("c", F64({1}), absl::Hours(1));
  ASSERT_TRUE(t.ok());
  t->reset();
  clock_.Advance(absl::Seconds(11));
  EXPECT_EQ(capped.Sweep(), 1);
}

TEST_F(TensorStoreTest, BackgroundSweeperFreesIdleTensors) {
  TensorStoreOptions o = Options();
  o.sweep_interval = absl::Milliseconds(5);
  TensorStore store(o);
  Full(store, "c", 2);
  clock_.Advance(absl::Seconds(11));
  for (int i = 0; i < 400 && store.Stats().tensors > 0; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(store.Stats().tensors, 0);
  EXPECT_EQ(store.OwnerBytes("c"), 0);
}

TEST_F(TensorStoreTest, ListIsSortedAndOwnOnly) {
  TensorStore store(Options());
  Full(store, "c", 1);
  Full(store, "c", 2);
  Full(store, "d", 3);
  auto mine = store.List("c");
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_LT(mine[0]->handle(), mine[1]->handle());
  TensorStoreStats s = store.Stats();
  EXPECT_EQ(s.tensors, 3);
  EXPECT_EQ(s.bytes, 48);
  EXPECT_EQ(s.clients, 2);
}

}  // namespace
}  // namespace gpucompute
