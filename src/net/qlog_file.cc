#include "net/qlog_file.h"

#include <cerrno>
#include <cstring>

namespace mrc::net {
namespace {

constexpr size_t kFlushBytes = 64 << 10;

}  // namespace

NetResult<std::unique_ptr<QlogFile>> QlogFile::open(const std::string& path, int64_t node) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f)
    return net_fail(NetErrc::kInvalidArgument,
                    "event log " + path + ": " + std::string(std::strerror(errno)));
  return std::unique_ptr<QlogFile>(new QlogFile(f, node));
}

QlogFile::~QlogFile() {
  flush();
  std::fclose(file_);
}

void QlogFile::record(const LogRecord& r) {
  append_log_json(buf_, r, node_);
  ++records_;
  if (buf_.size() >= kFlushBytes) flush();
}

bool QlogFile::flush() {
  if (!buf_.empty() && !failed_) {
    failed_ = std::fwrite(buf_.data(), 1, buf_.size(), file_) != buf_.size();
    failed_ = std::fflush(file_) != 0 || failed_;
  }
  buf_.clear();
  return !failed_;
}

}  // namespace mrc::net
