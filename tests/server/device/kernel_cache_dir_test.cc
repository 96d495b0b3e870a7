// KernelCacheDir: the directory rules (absolute, no "..", created 0700, no symlink, owned by
// us, not writable by others), the file format's checks (magic, version, key, size, checksum,
// size cap, O_NOFOLLOW), atomic writes, and SHA-256 against FIPS 180-4 vectors.
#include "server/device/kernel_cache_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucompute {
namespace {

using ::testing::HasSubstr;

constexpr char kKey[] = "0123456789abcdef0123456789abcdef";
constexpr char kOtherKey[] = "fedcba9876543210fedcba9876543210";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

mode_t Mode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

class KernelCacheDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    // Under a private 0700 directory: the rules below are about the last component only.
    root_ = absl::StrCat(std::filesystem::temp_directory_path().string(), "/kernel_cache_dir_test_",
                         getpid(), "_", counter++);
    std::filesystem::remove_all(root_);
    ASSERT_EQ(mkdir(root_.c_str(), 0700), 0);
    dir_ = root_ + "/kc";
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(root_, ignored);
  }

  KernelCacheDir OpenOrDie() {
    auto dir = KernelCacheDir::Open(dir_);
    EXPECT_TRUE(dir.ok()) << dir.status();
    return std::move(dir).value();
  }

  std::string root_;
  std::string dir_;
};

// --- The directory ----------------------------------------------------------------------------

TEST_F(KernelCacheDirTest, RefusesRelativePathsAndDotDot) {
  for (const std::string path : {"", "kc", "./kc", "relative/dir"}) {
    auto dir = KernelCacheDir::Open(path);
    EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(dir.status().message(), HasSubstr("absolute")) << path;
  }
  for (const std::string path : {root_ + "/../etc", root_ + "/kc/..", root_ + "/a/../kc"}) {
    auto dir = KernelCacheDir::Open(path);
    EXPECT_EQ(dir.status().code(), absl::StatusCode::kInvalidArgument) << path;
    EXPECT_THAT(dir.status().message(), HasSubstr("\"..\"")) << path;
  }
  EXPECT_EQ(KernelCacheDir::Open("/").status().code(), absl::StatusCode::kInvalidArgument);
  // Nothing was created on the way.
  EXPECT_FALSE(std::filesystem::exists(root_ + "/a"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/kc"));
}

TEST_F(KernelCacheDirTest, CreatesMissingLevelsWith0700) {
  const mode_t old_umask = umask(022);
  dir_ = root_ + "/a/b/kc";
  auto dir = KernelCacheDir::Open(dir_);
  umask(old_umask);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(dir->path(), dir_);
  for (const std::string& level : {root_ + "/a", root_ + "/a/b", dir_}) {
    EXPECT_TRUE(std::filesystem::is_directory(level)) << level;
    EXPECT_EQ(Mode(level), 0700u) << level;
  }
  // Opening it again is fine, and an existing parent is not changed.
  ASSERT_EQ(chmod((root_ + "/a").c_str(), 0755), 0);
  EXPECT_TRUE(KernelCacheDir::Open(dir_).ok());
  EXPECT_EQ(Mode(root_ + "/a"), 0755u);
}

TEST_F(KernelCacheDirTest, NormalisesSlashesAndDots) {
  auto dir = KernelCacheDir::Open(root_ + "//./kc/");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(dir->path(), dir_);
  EXPECT_TRUE(std::filesystem::is_directory(dir_));
}

TEST_F(KernelCacheDirTest, AcceptsAnExistingPrivateOrReadableDirectory) {
  ASSERT_EQ(mkdir(dir_.c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);  // readable by others is fine: kernels are no secret
  EXPECT_TRUE(KernelCacheDir::Open(dir_).ok());
}

TEST_F(KernelCacheDirTest, RefusesASymlinkedDirectory) {
  const std::string real = root_ + "/real";
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(symlink(real.c_str(), dir_.c_str()), 0);
  for (const std::string& path : {dir_, dir_ + "/"}) {  // a trailing slash must not follow it
    auto dir = KernelCacheDir::Open(path);
    EXPECT_EQ(dir.status().code(), absl::StatusCode::kFailedPrecondition) << path;
    EXPECT_THAT(dir.status().message(), HasSubstr("symbolic link")) << path;
  }
  // A dangling link is refused too, and not followed to create its target.
  const std::string dangling = root_ + "/dangling";
  ASSERT_EQ(symlink((root_ + "/nowhere").c_str(), dangling.c_str()), 0);
  EXPECT_EQ(KernelCacheDir::Open(dangling).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(std::filesystem::exists(root_ + "/nowhere"));
  // A symlink in a parent is the administrator's choice (e.g. ~/.cache on another disk).
  const std::string link_parent = root_ + "/linked";
  ASSERT_EQ(symlink(real.c_str(), link_parent.c_str()), 0);
  EXPECT_TRUE(KernelCacheDir::Open(link_parent + "/kc").ok());
}

TEST_F(KernelCacheDirTest, RefusesAFile) {
  WriteFile(dir_, "x");
  auto dir = KernelCacheDir::Open(dir_);
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(dir.status().message(), HasSubstr("not a directory"));
  EXPECT_EQ(KernelCacheDir::Open(dir_ + "/below").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(KernelCacheDirTest, RefusesGroupOrWorldWritableDirectories) {
  ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
  for (mode_t mode : {0777, 0770, 0702, 01777}) {
    ASSERT_EQ(chmod(dir_.c_str(), mode), 0);
    auto dir = KernelCacheDir::Open(dir_);
    EXPECT_EQ(dir.status().code(), absl::StatusCode::kFailedPrecondition) << std::oct << mode;
    EXPECT_THAT(dir.status().message(), HasSubstr("chmod go-w")) << std::oct << mode;
  }
  ASSERT_EQ(chmod(dir_.c_str(), 0700), 0);
  EXPECT_TRUE(KernelCacheDir::Open(dir_).ok());
}

TEST_F(KernelCacheDirTest, RefusesADirectoryOwnedBySomeoneElse) {
  if (geteuid() == 0) {
    ASSERT_EQ(mkdir(dir_.c_str(), 0700), 0);
    ASSERT_EQ(chown(dir_.c_str(), 65534, 65534), 0);  // nobody
    auto dir = KernelCacheDir::Open(dir_);
    EXPECT_EQ(dir.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(dir.status().message(), HasSubstr("owned by uid 65534"));
  } else {
    // Not root: a root-owned system directory is someone else's.
    auto dir = KernelCacheDir::Open("/usr");
    EXPECT_EQ(dir.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(dir.status().message(), HasSubstr("owned by uid 0"));
  }
}

TEST_F(KernelCacheDirTest, HeldOpenAcrossARename) {
  KernelCacheDir dir = OpenOrDie();
  // Replace the path by a symlink to elsewhere: files still go to the directory opened.
  const std::string moved = root_ + "/moved";
  const std::string elsewhere = root_ + "/elsewhere";
  ASSERT_EQ(rename(dir_.c_str(), moved.c_str()), 0);
  ASSERT_EQ(mkdir(elsewhere.c_str(), 0700), 0);
  ASSERT_EQ(symlink(elsewhere.c_str(), dir_.c_str()), 0);
  ASSERT_TRUE(dir.Write(kKey, ".cubin", "image").ok());
  EXPECT_TRUE(std::filesystem::exists(moved + "/" + kKey + ".cubin"));
  EXPECT_TRUE(std::filesystem::is_empty(elsewhere));
}

// --- Files ------------------------------------------------------------------------------------

TEST_F(KernelCacheDirTest, RoundTrip) {
  KernelCacheDir dir = OpenOrDie();
  EXPECT_EQ(dir.Read(kKey, ".cubin").status().code(), absl::StatusCode::kNotFound);

  std::string image(100000, '\0');
  for (size_t i = 0; i < image.size(); ++i) image[i] = static_cast<char>(i * 131 + 7);
  ASSERT_TRUE(dir.Write(kKey, ".cubin", image).ok());
  auto read = dir.Read(kKey, ".cubin");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, image);

  const std::string path = dir.FilePath(kKey, ".cubin");
  EXPECT_EQ(path, dir_ + "/" + kKey + ".cubin");
  EXPECT_EQ(Mode(path), 0600u);
  EXPECT_EQ(std::filesystem::file_size(path), KernelCacheDir::kHeaderBytes + image.size());
  EXPECT_EQ(ReadFile(path).substr(0, 8), "GPCKERN\n");
  // Other suffix, other file; a 1-byte and a full-length key work.
  EXPECT_EQ(dir.Read(kKey, ".ptx").status().code(), absl::StatusCode::kNotFound);
  const std::string long_key(64, 'a');
  for (const std::string& key : {std::string("0"), long_key}) {
    ASSERT_TRUE(dir.Write(key, ".ptx", "ptx text").ok()) << key;
    auto ptx = dir.Read(key, ".ptx");
    ASSERT_TRUE(ptx.ok()) << ptx.status();
    EXPECT_EQ(*ptx, "ptx text");
  }
  // An empty payload round-trips too.
  ASSERT_TRUE(dir.Write(kOtherKey, ".cubin", "").ok());
  auto empty = dir.Read(kOtherKey, ".cubin");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, "");
  // Rewriting replaces; no temporaries are left.
  ASSERT_TRUE(dir.Write(kKey, ".cubin", "second").ok());
  EXPECT_EQ(*dir.Read(kKey, ".cubin"), "second");
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
}

TEST_F(KernelCacheDirTest, RefusesBadNames) {
  KernelCacheDir dir = OpenOrDie();
  const std::vector<std::string> bad_keys = {"",        "../x", "ABCDEF", "0123/45",
                                             std::string(65, 'a'), "12 3"};
  for (const std::string& key : bad_keys) {
    EXPECT_EQ(dir.Write(key, ".cubin", "x").code(), absl::StatusCode::kInvalidArgument) << key;
    EXPECT_EQ(dir.Read(key, ".cubin").status().code(), absl::StatusCode::kInvalidArgument) << key;
  }
  for (const std::string suffix : {"", ".", "cubin", "./x", ".cu/bin", ".a.b"}) {
    EXPECT_EQ(dir.Write(kKey, suffix, "x").code(), absl::StatusCode::kInvalidArgument) << suffix;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

class KernelCacheDirFileTest : public KernelCacheDirTest {
 protected:
  void SetUp() override {
    KernelCacheDirTest::SetUp();
    dir_store_ = std::make_unique<KernelCacheDir>(OpenOrDie());
    ASSERT_TRUE(dir_store_->Write(kKey, ".cubin", kImage).ok());
    path_ = dir_store_->FilePath(kKey, ".cubin");
    bytes_ = ReadFile(path_);
    ASSERT_EQ(bytes_.size(), KernelCacheDir::kHeaderBytes + std::string(kImage).size());
  }

  // Reads kKey after the file was replaced by `bytes`; expects DATA_LOSS naming `why`.
  void ExpectRefused(const std::string& bytes, const std::string& why) {
    WriteFile(path_, bytes);
    auto read = dir_store_->Read(kKey, ".cubin");
    EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << why;
    EXPECT_THAT(read.status().message(), HasSubstr(why));
  }

  static constexpr char kImage[] = "\x7f" "ELF pretend cubin bytes";
  std::unique_ptr<KernelCacheDir> dir_store_;
  std::string path_;
  std::string bytes_;
};

TEST_F(KernelCacheDirFileTest, RefusesWrongMagic) {
  std::string bytes = bytes_;
  bytes[0] = 'X';
  ExpectRefused(bytes, "not a gpucompute kernel cache file");
  // A raw CUBIN from the old, unframed format is refused the same way.
  ExpectRefused(std::string(kImage) + std::string(200, 'z'), "not a gpucompute kernel cache file");
}

TEST_F(KernelCacheDirFileTest, RefusesAnotherFormatVersion) {
  std::string bytes = bytes_;
  bytes[8] = 2;
  ExpectRefused(bytes, "format version 2");
}

TEST_F(KernelCacheDirFileTest, RefusesTruncatedFiles) {
  ExpectRefused("", "shorter than the header");
  ExpectRefused(bytes_.substr(0, KernelCacheDir::kHeaderBytes - 1), "shorter than the header");
  ExpectRefused(bytes_.substr(0, bytes_.size() - 1), "says its payload is");
  ExpectRefused(bytes_.substr(0, KernelCacheDir::kHeaderBytes), "says its payload is");
}

TEST_F(KernelCacheDirFileTest, RefusesSizeMismatch) {
  ExpectRefused(bytes_ + "extra", "says its payload is");
  std::string bytes = bytes_;
  bytes[16] = static_cast<char>(bytes[16] + 1);  // the payload size field
  ExpectRefused(bytes, "says its payload is");
}

TEST_F(KernelCacheDirFileTest, RefusesAFlippedPayloadOrChecksumByte) {
  for (size_t at : {KernelCacheDir::kHeaderBytes, bytes_.size() - 1, size_t{24}, size_t{55}}) {
    std::string bytes = bytes_;
    bytes[at] ^= 0x01;
    ExpectRefused(bytes, "checksum");
  }
}

TEST_F(KernelCacheDirFileTest, RefusesAFileUnderAnotherKeysName) {
  // A valid file for kKey copied to kOtherKey's name (or a key field edited) is not loaded.
  const std::string other = dir_store_->FilePath(kOtherKey, ".cubin");
  WriteFile(other, bytes_);
  auto read = dir_store_->Read(kOtherKey, ".cubin");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("another key"));
  std::string bytes = bytes_;
  bytes[56] = bytes[56] == 'a' ? 'b' : 'a';
  ExpectRefused(bytes, "another key");
  bytes = bytes_;
  bytes[12] = 31;  // key length
  ExpectRefused(bytes, "another key");
  // A prefix of a key is another key.
  EXPECT_EQ(dir_store_->Read(std::string(kKey).substr(0, 31), ".cubin").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(KernelCacheDirFileTest, RefusesASymlinkedFileAndReplacesIt) {
  // A symlink to a perfectly valid file is still refused.
  const std::string target = root_ + "/valid";
  ASSERT_EQ(rename(path_.c_str(), target.c_str()), 0);
  ASSERT_EQ(symlink(target.c_str(), path_.c_str()), 0);
  auto read = dir_store_->Read(kKey, ".cubin");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("symbolic link"));
  // Writing replaces the link itself; the target is untouched.
  ASSERT_TRUE(dir_store_->Write(kKey, ".cubin", "new").ok());
  EXPECT_EQ(*dir_store_->Read(kKey, ".cubin"), "new");
  EXPECT_EQ(ReadFile(target), bytes_);
  struct stat st {};
  ASSERT_EQ(lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST_F(KernelCacheDirFileTest, RefusesAnOversizedFile) {
  // Sparse: the size is refused from fstat, before anything is allocated or read.
  ASSERT_EQ(truncate(path_.c_str(), KernelCacheDir::kMaxFileBytes + 1), 0);
  auto read = dir_store_->Read(kKey, ".cubin");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("-byte limit"));
  // Nor is an image that could not be read back written.
  const std::string big(KernelCacheDir::kMaxFileBytes - KernelCacheDir::kHeaderBytes + 1, 'x');
  EXPECT_EQ(dir_store_->Write(kOtherKey, ".cubin", big).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dir_store_->FilePath(kOtherKey, ".cubin")));
}

TEST_F(KernelCacheDirFileTest, RefusesAFifoAndADirectory) {
  ASSERT_EQ(unlink(path_.c_str()), 0);
  ASSERT_EQ(mkfifo(path_.c_str(), 0600), 0);
  auto read = dir_store_->Read(kKey, ".cubin");  // must not block
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("not a regular file"));
  ASSERT_EQ(unlink(path_.c_str()), 0);
  ASSERT_EQ(mkdir(path_.c_str(), 0700), 0);
  EXPECT_EQ(dir_store_->Read(kKey, ".cubin").status().code(), absl::StatusCode::kDataLoss);
  // Writing over a directory fails cleanly and leaves no temporary.
  EXPECT_FALSE(dir_store_->Write(kKey, ".cubin", "x").ok());
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
  }
}

TEST_F(KernelCacheDirFileTest, RefusesAFileOwnedBySomeoneElse) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  ASSERT_EQ(chown(path_.c_str(), 65534, 65534), 0);
  auto read = dir_store_->Read(kKey, ".cubin");
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(read.status().message(), HasSubstr("owned by uid 65534"));
}

TEST_F(KernelCacheDirFileTest, CorruptFileIsReplacedByWrite) {
  std::string bytes = bytes_;
  bytes.back() ^= 0x40;
  WriteFile(path_, bytes);
  ASSERT_FALSE(dir_store_->Read(kKey, ".cubin").ok());
  ASSERT_TRUE(dir_store_->Write(kKey, ".cubin", kImage).ok());
  auto read = dir_store_->Read(kKey, ".cubin");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, kImage);
}

// --- SHA-256 ----------------------------------------------------------------------------------

TEST(Sha256Test, FipsVectors) {
  EXPECT_EQ(HexDigest(Sha256::Of("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(HexDigest(Sha256::Of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(HexDigest(Sha256::Of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  // One million 'a', fed in uneven pieces.
  Sha256 sha;
  const std::string piece(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, piece.size());
    sha.Update(piece.data(), n);
    left -= n;
  }
  EXPECT_EQ(HexDigest(sha.Finish()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(HexDigest(Sha256::Of("abc"), 4), "ba7816bf");
}

}  // namespace
}  // namespace gpucompute
