// What stat() says of a file, to notice that it was rewritten, replaced or removed without
// reading it (the token file and TLS files are watched this way).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>

namespace gpucompute {

struct FileStamp {
  int64_t mtime_ns = 0;
  int64_t size = 0;
  uint64_t inode = 0;
  uint64_t device = 0;
  bool exists = false;

  bool operator==(const FileStamp& o) const {
    return mtime_ns == o.mtime_ns && size == o.size && inode == o.inode && device == o.device &&
           exists == o.exists;
  }
  bool operator!=(const FileStamp& o) const { return !(*this == o); }
};

// The stamp of `path` (following symlinks, as Kubernetes' Secret volumes need); a default
// stamp (exists false) when it cannot be stat'ed.
inline FileStamp StatFile(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return FileStamp{};
  FileStamp stamp;
  stamp.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  stamp.size = static_cast<int64_t>(st.st_size);
  stamp.inode = static_cast<uint64_t>(st.st_ino);
  stamp.device = static_cast<uint64_t>(st.st_dev);
  stamp.exists = true;
  return stamp;
}

}  // namespace gpucompute
