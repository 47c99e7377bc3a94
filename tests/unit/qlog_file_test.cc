// net/qlog_file.h: records land in the file as JSON lines (with the node when given), also past
// the buffer's size, and a path that cannot be opened is an error naming it.
#include "net/qlog_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace mrc::net {
namespace {

TEST(QlogFile, record__writes_every_record_as_a_json_line_by_the_destructor) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("qlog_test_" + std::to_string(::getpid()) + ".jsonl"))
                               .string();
  constexpr int kRecords = 5000;  // several buffers' worth
  {
    auto q = QlogFile::open(path, 4);
    ASSERT_TRUE(q) << q.error().message;
    for (int i = 0; i < kRecords; ++i) {
      LogRecord r;
      r.time = static_cast<Time>(i);
      r.kind = LogKind::kPacketSent;
      r.psn = static_cast<uint32_t>(i);
      (*q)->record(r);
    }
    EXPECT_EQ((*q)->records(), static_cast<uint64_t>(kRecords));
  }
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line;
    EXPECT_EQ(j.value("psn", -1), n);
    EXPECT_EQ(j.value("node", -1), 4);
    EXPECT_EQ(j.value("event", ""), "packet_sent");
    ++n;
  }
  EXPECT_EQ(n, kRecords);
  std::filesystem::remove(path);
}

TEST(QlogFile, open__a_path_that_cannot_be_created_is_an_error_naming_it) {
  auto q = QlogFile::open("/no-such-directory/x.jsonl");
  ASSERT_FALSE(q);
  EXPECT_EQ(q.error().code, NetErrc::kInvalidArgument);
  EXPECT_NE(q.error().message.find("/no-such-directory/x.jsonl"), std::string::npos);
}

}  // namespace
}  // namespace mrc::net
