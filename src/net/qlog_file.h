// The engine's event log (transport/event_log.h) written to a file as JSON lines: what
// mrc-perf --qlog FILE and the C API's MRC_QLOG set on their engines. Buffered (64 KiB): a
// record costs a formatting and, now and then, one write; the destructor flushes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

#include "net/sockets.h"
#include "transport/event_log.h"

namespace mrc::net {

class QlogFile final : public EventLog {
 public:
  // Creates (truncates) `path`. `node` >= 0 is written into every record (a file shared by
  // several engines). kInvalidArgument naming the path when it cannot be opened.
  static NetResult<std::unique_ptr<QlogFile>> open(const std::string& path, int64_t node = -1);
  ~QlogFile() override;
  QlogFile(const QlogFile&) = delete;
  QlogFile& operator=(const QlogFile&) = delete;

  void record(const LogRecord& r) override;
  // Writes what is buffered; false once a write failed (the disk is full, ...).
  bool flush();
  uint64_t records() const { return records_; }

 private:
  QlogFile(std::FILE* f, int64_t node) : file_(f), node_(node) {}
  std::FILE* file_;
  int64_t node_;
  std::string buf_;
  uint64_t records_ = 0;
  bool failed_ = false;
};

}  // namespace mrc::net
