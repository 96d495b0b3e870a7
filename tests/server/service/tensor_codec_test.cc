// TensorResolver and PlaceOutputs without a server: inline, handle and shared-memory inputs
// (errors naming the field, pins outliving a delete), and output placement (kept outputs take
// the operation's buffer without a copy, shared-memory outputs at 64-byte multiples).
#include "server/service/tensor_codec.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/server/runtime/register_own_region.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;

v1::Tensor Inline(v1::DType dtype, std::vector<int64_t> shape, std::string data) {
  v1::Tensor t;
  t.set_dtype(dtype);
  for (int64_t d : shape) t.add_shape(d);
  t.set_data(std::move(data));
  return t;
}

class TensorCodecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    TensorStoreOptions o;
    o.sweep_interval = absl::ZeroDuration();
    store_ = std::make_unique<TensorStore>(o);
    shm_ = std::make_unique<SharedMemoryRegistry>(true);
    key_ = absl::StrCat("/gpucompute-codec-test-", getpid());
    const int fd = shm_open(key_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(ftruncate(fd, 8192), 0);
    close(fd);
    // The region is the object's bytes [4096, 8192).
    ASSERT_TRUE(testing::RegisterOwnRegion(*shm_, "c", "r", key_, 4096, 4096).ok());
    region_ = *shm_->Find("c", "r");
  }
  void TearDown() override { shm_unlink(key_.c_str()); }

  TensorContext Context() { return TensorContext{store_.get(), shm_.get(), "c"}; }

  std::string Put(v1::DType dtype, std::vector<int64_t> shape, const std::string& bytes) {
    auto t = store_->Create("c", TensorSpec{dtype, DTypeSize(dtype), std::move(shape)});
    EXPECT_TRUE(t.ok());
    EXPECT_TRUE((*t)->Write(0, bytes).ok());
    return (*t)->handle();
  }

  std::unique_ptr<TensorStore> store_;
  std::unique_ptr<SharedMemoryRegistry> shm_;
  std::shared_ptr<SharedMemoryRegion> region_;
  std::string key_;
};

TEST_F(TensorCodecTest, InlineTensors) {
  TensorResolver r;
  auto v = r.Resolve(Inline(v1::FLOAT32, {2, 3}, std::string(24, 'x')), "a.b");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->count, 6);
  EXPECT_EQ(v->rank(), 2);
  EXPECT_EQ(r.pins(), nullptr);
  auto bad = r.Resolve(Inline(v1::FLOAT32, {2, 3}, std::string(23, 'x')), "a.b");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("a.b.data: holds 23 bytes"));
  auto no_dtype = r.Resolve(Inline(v1::DTYPE_UNSPECIFIED, {1}, ""), "a");
  EXPECT_THAT(std::string(no_dtype.status().message()), HasSubstr("a.dtype"));
  auto negative = r.Resolve(Inline(v1::FLOAT32, {2, -1}, ""), "a");
  EXPECT_THAT(std::string(negative.status().message()), HasSubstr("a.shape[1]"));
}

// A budget is charged per decode, so a handle named twice costs twice; the decode that does
// not fit is RESOURCE_EXHAUSTED naming its field, before its vector exists.
TEST_F(TensorCodecTest, DecodeBudgetCountsEveryUseOfAHandle) {
  const std::string h = Put(v1::FLOAT64, {100}, std::string(800, '\0'));
  v1::Tensor by_handle;
  by_handle.set_handle(h);
  TensorResolver r(Context());
  DecodeBudget budget(2000);
  ASSERT_TRUE(DecodeVector(r, by_handle, "a", true, &budget).ok());
  ASSERT_TRUE(DecodeVector(r, by_handle, "b", true, &budget).ok());
  EXPECT_EQ(budget.left, 400);
  auto third = DecodeVector(r, by_handle, "series[2].t", true, &budget);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(third.status().message()), HasSubstr("series[2].t: 100 values"));
  EXPECT_EQ(budget.left, 400);  // nothing charged for the refused one
  // An inline tensor is charged the same way (as doubles: float32 counts twice its bytes).
  DecodeBudget small(16);
  auto f32 = DecodeVector(r, Inline(v1::FLOAT32, {4}, std::string(16, '\0')), "c", true, &small);
  EXPECT_EQ(f32.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(TensorCodecTest, HandlesTakeDtypeAndShapeOrMustMatch) {
  const std::string h = Put(v1::FLOAT64, {2, 2}, std::string(32, '\1'));
  TensorResolver r(Context());
  v1::Tensor t;
  t.set_handle(h);
  auto v = r.Resolve(t, "x");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->dtype, v1::FLOAT64);
  EXPECT_EQ(v->shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(v->count, 4);
  EXPECT_EQ(v->bytes, std::string(32, '\1'));
  t.set_dtype(v1::FLOAT32);
  EXPECT_THAT(std::string(r.Resolve(t, "x").status().message()), HasSubstr("x.dtype: is float32"));
  t.set_dtype(v1::FLOAT64);
  t.add_shape(4);
  EXPECT_THAT(std::string(r.Resolve(t, "x").status().message()), HasSubstr("x.shape: is [4]"));
  t.clear_shape();
  t.add_shape(2);
  t.add_shape(2);
  EXPECT_TRUE(r.Resolve(t, "x").ok());
}

TEST_F(TensorCodecTest, HandleErrorsNameTheField) {
  TensorResolver r(Context());
  v1::Tensor t;
  t.set_handle("abc");
  auto missing = r.Resolve(t, "problems[0].x");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "problems[0].x.handle: no resident tensor \"abc\"");
  auto reserved = store_->Create("c", TensorSpec{v1::UINT8, 1, {4}});
  t.set_handle((*reserved)->handle());
  EXPECT_EQ(r.Resolve(t, "x").status().code(), absl::StatusCode::kFailedPrecondition);
  // Another client's tensor is just as missing.
  TensorResolver other(TensorContext{store_.get(), shm_.get(), "d"});
  t.set_handle(Put(v1::UINT8, {1}, "z"));
  EXPECT_EQ(other.Resolve(t, "x").status().code(), absl::StatusCode::kNotFound);
  // Without a store, handles cannot be used at all.
  TensorResolver inline_only;
  EXPECT_EQ(inline_only.Resolve(t, "x").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(TensorCodecTest, PinsKeepDeletedTensorsAlive) {
  const std::string h = Put(v1::UINT8, {5}, "hello");
  absl::string_view bytes;
  TensorPins pins;
  {
    TensorResolver r(Context());
    v1::Tensor t;
    t.set_handle(h);
    bytes = r.Resolve(t, "x")->bytes;
    pins = r.pins();
  }
  ASSERT_NE(pins, nullptr);
  ASSERT_TRUE(store_->Delete("c", h).ok());
  EXPECT_EQ(bytes, "hello");  // still readable: the pins hold the tensor
}

TEST_F(TensorCodecTest, SharedMemoryInputs) {
  std::memcpy(region_->data() + 100, "abcdefgh", 8);
  TensorResolver r(Context());
  v1::Tensor t;
  t.set_dtype(v1::UINT8);
  t.add_shape(8);
  auto* ref = t.mutable_shared_memory();
  ref->set_region("r");
  ref->set_offset(100);
  ref->set_length(8);
  auto v = r.Resolve(t, "in");
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->bytes, "abcdefgh");
  // Copied out of the region (a guarded copy): later writes by the client do not show.
  EXPECT_NE(v->bytes.data(), region_->data() + 100);
  region_->data()[100] = 'X';
  EXPECT_EQ(v->bytes, "abcdefgh");
  region_->data()[100] = 'a';
  ref->set_length(7);
  EXPECT_THAT(std::string(r.Resolve(t, "in").status().message()),
              HasSubstr("in.shared_memory.length: is 7"));
  ref->set_length(8);
  ref->set_offset(4090);
  EXPECT_THAT(std::string(r.Resolve(t, "in").status().message()),
              HasSubstr("in.shared_memory.length: bytes [4090, 4098)"));
  ref->set_offset(0);
  ref->set_region("nope");
  EXPECT_EQ(r.Resolve(t, "in").status().code(), absl::StatusCode::kNotFound);
  SharedMemoryRegistry off(false);
  TensorResolver disabled(TensorContext{store_.get(), &off, "c"});
  auto d = disabled.Resolve(t, "in");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("--allow_shared_memory"));
}

TEST_F(TensorCodecTest, LargeSharedMemoryInputsAreCopiedIntoTheBackendsHostMemory) {
  // The backend's host memory (page-locked with CUDA; plain here), for copies of 1 KiB or more.
  auto host = std::make_shared<HostMemory>(
      int64_t{4} << 20, 1024, [](size_t bytes) { return std::malloc(bytes); },
      [](void* block) { std::free(block); });
  TensorStoreOptions o;
  o.sweep_interval = absl::ZeroDuration();
  o.host_memory = host;
  TensorStore store(o);
  for (int i = 0; i < 2048; ++i) region_->data()[i] = static_cast<char>(i * 7);
  const std::string want(region_->data(), 2048);
  auto ref = [](int64_t length) {
    v1::Tensor t;
    t.set_dtype(v1::UINT8);
    t.add_shape(length);
    t.mutable_shared_memory()->set_region("r");
    t.mutable_shared_memory()->set_length(length);
    return t;
  };
  {
    TensorResolver r(TensorContext{&store, shm_.get(), "c"});
    auto large = r.Resolve(ref(2048), "large");
    ASSERT_TRUE(large.ok()) << large.status();
    EXPECT_EQ(large->bytes, want);
    EXPECT_EQ(host->stats().in_use_bytes, static_cast<int64_t>(HostMemory::kGranule));
    auto small = r.Resolve(ref(16), "small");  // below the host memory's minimum: plain memory
    ASSERT_TRUE(small.ok()) << small.status();
    EXPECT_EQ(small->bytes, want.substr(0, 16));
    EXPECT_EQ(host->stats().in_use_bytes, static_cast<int64_t>(HostMemory::kGranule));
  }
  // The resolver (holding the copies) is gone: the block is given back, kept for the next call.
  EXPECT_EQ(host->stats().in_use_bytes, 0);
  EXPECT_EQ(host->stats().kept_bytes, static_cast<int64_t>(HostMemory::kGranule));
}

TEST_F(TensorCodecTest, KeptOutputsTakeTheBufferWithoutACopy) {
  v1::Tensor out = Inline(v1::FLOAT32, {1000}, std::string(4000, '\7'));
  const char* buffer = out.data().data();
  v1::OutputPlacement keep;
  keep.set_keep(true);
  ASSERT_TRUE(PlaceOutputs(Context(), keep, {&out}).ok());
  ASSERT_TRUE(out.has_handle());
  EXPECT_EQ(out.dtype(), v1::FLOAT32);
  EXPECT_EQ(out.shape(0), 1000);
  auto resident = store_->Acquire("c", out.handle());
  ASSERT_TRUE(resident.ok());
  EXPECT_EQ((*resident)->data().data(), buffer);
  EXPECT_EQ((*resident)->data(), std::string(4000, '\7'));
  v1::OutputPlacement not_kept;
  not_kept.set_keep(false);
  EXPECT_TRUE(OutputsInline(not_kept));
}

TEST_F(TensorCodecTest, DiscardedOutputsKeepDtypeAndShapeOnly) {
  v1::Tensor out = Inline(v1::FLOAT64, {3}, std::string(24, '\1'));
  v1::OutputPlacement discard;
  discard.set_discard(true);
  ASSERT_TRUE(PlaceOutputs(Context(), discard, {&out}).ok());
  EXPECT_EQ(out.payload_case(), v1::Tensor::PAYLOAD_NOT_SET);
  EXPECT_EQ(out.dtype(), v1::FLOAT64);
  EXPECT_EQ(out.shape(0), 3);
  EXPECT_EQ(InlineOutputBytes(discard, 24), 0);
  EXPECT_TRUE(store_->List("c").empty());
}

TEST_F(TensorCodecTest, KeepAboveBytesKeepsOnlyTheLargeOnes) {
  v1::Tensor big = Inline(v1::UINT8, {101}, std::string(101, 'b'));
  v1::Tensor small = Inline(v1::UINT8, {100}, std::string(100, 's'));
  v1::Tensor empty = Inline(v1::UINT8, {0}, "");
  v1::OutputPlacement p;
  p.set_keep_above_bytes(100);
  p.set_idle_expiry_ms(1500);
  EXPECT_EQ(InlineOutputBytes(p, 101), 0);
  EXPECT_EQ(InlineOutputBytes(p, 100), 100);
  ASSERT_TRUE(PlaceOutputs(Context(), p, {&big, &small, &empty}).ok());
  ASSERT_TRUE(big.has_handle());
  EXPECT_EQ(small.data(), std::string(100, 's'));
  EXPECT_EQ(empty.payload_case(), v1::Tensor::kData);
  auto kept = store_->Acquire("c", big.handle());
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ((*kept)->data(), std::string(101, 'b'));
  EXPECT_EQ((*kept)->idle_expiry(), absl::Milliseconds(1500));
  p.set_keep_above_bytes(-1);
  EXPECT_THAT(std::string(CheckOutputPlacement(Context(), p).message()),
              HasSubstr("output_placement.keep_above_bytes: must be >= 0"));
  p.set_keep_above_bytes(0);
  p.set_idle_expiry_ms(-5);
  EXPECT_THAT(std::string(CheckOutputPlacement(Context(), p).message()),
              HasSubstr("output_placement.idle_expiry_ms"));
  TensorResolver no_store;  // keeping needs a store
  p.set_idle_expiry_ms(0);
  EXPECT_EQ(CheckOutputPlacement(no_store.context(), p).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(TensorCodecTest, SharedMemoryOutputsAt64ByteMultiples) {
  v1::Tensor a = Inline(v1::UINT8, {3}, "abc");
  v1::Tensor b = Inline(v1::UINT8, {70}, std::string(70, 'b'));
  v1::Tensor c = Inline(v1::UINT8, {0}, "");
  v1::Tensor d = Inline(v1::UINT8, {1}, "d");
  v1::OutputPlacement p;
  p.mutable_shared_memory()->set_region("r");
  p.mutable_shared_memory()->set_offset(10);
  ASSERT_TRUE(PlaceOutputs(Context(), p, {&a, &b, &c, &d}).ok());
  EXPECT_EQ(a.shared_memory().offset(), 10);
  EXPECT_EQ(b.shared_memory().offset(), 10 + 64);
  EXPECT_EQ(c.shared_memory().offset(), 10 + 192);
  EXPECT_EQ(d.shared_memory().offset(), 10 + 192);
  EXPECT_EQ(b.shared_memory().length(), 70);
  EXPECT_FALSE(a.has_data() && a.data().size() > 0);
  EXPECT_EQ(std::string(region_->data() + 10, 3), "abc");
  EXPECT_EQ(std::string(region_->data() + 74, 70), std::string(70, 'b'));
  EXPECT_EQ(region_->data()[202], 'd');
  // 64 + 70 = 134 bytes needed.
  v1::Tensor e = Inline(v1::UINT8, {3}, "abc"), f = Inline(v1::UINT8, {70}, std::string(70, 'f'));
  p.mutable_shared_memory()->set_length(133);
  const absl::Status small = PlaceOutputs(Context(), p, {&e, &f});
  EXPECT_EQ(small.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(small.message()), HasSubstr("need 134 bytes"));
  p.mutable_shared_memory()->set_length(134);
  EXPECT_TRUE(PlaceOutputs(Context(), p, {&e, &f}).ok());
  p.mutable_shared_memory()->set_length(0);
  p.mutable_shared_memory()->set_offset(4096 - 3);
  v1::Tensor g = Inline(v1::UINT8, {3}, "xyz");
  EXPECT_TRUE(PlaceOutputs(Context(), p, {&g}).ok());  // exactly to the end
  EXPECT_EQ(CheckOutputPlacement(Context(), p).code(), absl::StatusCode::kOk);
  p.mutable_shared_memory()->set_offset(4097);
  EXPECT_EQ(CheckOutputPlacement(Context(), p).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(TensorCodecTest, EchoFromARegionIntoItself) {
  std::memcpy(region_->data(), "0123456789", 10);
  absl::string_view source(region_->data(), 10);
  v1::Tensor out;
  out.set_dtype(v1::UINT8);
  out.add_shape(10);
  v1::OutputPlacement p;
  p.mutable_shared_memory()->set_region("r");
  p.mutable_shared_memory()->set_offset(0);
  // The destination overlaps the source exactly: nothing to copy, and nothing corrupted.
  ASSERT_TRUE(PlaceOutputs(Context(), p, {OutputTensor{&out, &source}}).ok());
  EXPECT_EQ(std::string(region_->data(), 10), "0123456789");
}

// A length near INT64_MAX used to overflow offset + length while the error message was built
// (UBSan, in tests/fuzz/request_fuzzer).
TEST_F(TensorCodecTest, HugeSharedMemoryLengthsAreRefusedWithoutOverflow) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  v1::OutputPlacement placement;
  placement.mutable_shared_memory()->set_region("r");
  placement.mutable_shared_memory()->set_offset(10);
  placement.mutable_shared_memory()->set_length(kMax);
  const absl::Status out = CheckOutputPlacement(Context(), placement);
  EXPECT_EQ(out.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out.message()), HasSubstr("output_placement.shared_memory.length"));

  v1::Tensor in;
  in.set_dtype(v1::UINT8);
  in.add_shape(kMax);
  in.mutable_shared_memory()->set_region("r");
  in.mutable_shared_memory()->set_offset(10);
  in.mutable_shared_memory()->set_length(kMax);
  TensorResolver r(Context());
  const auto view = r.Resolve(in, "t");
  EXPECT_EQ(view.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(view.status().message()), HasSubstr("t.shared_memory.length"));
}

}  // namespace
}  // namespace gpucompute
