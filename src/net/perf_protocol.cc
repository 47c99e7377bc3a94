#include "net/perf_protocol.h"

#include <algorithm>

namespace mrc::net {

namespace {

bool is_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

NetResult<PerfFields> bad_line(size_t line, const std::string& why) {
  return net_fail(NetErrc::kBadHello, "control message line " + std::to_string(line) + ": " + why);
}

std::vector<uint8_t> text_frame(std::string_view text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

}  // namespace

std::vector<uint8_t> encode_perf_message(std::span<const std::pair<std::string, uint64_t>> fields) {
  std::string s;
  for (const auto& [k, v] : fields)
    s += k + "=" + std::to_string(v) + "\n";
  return text_frame(s);
}

NetResult<PerfFields> decode_perf_message(std::span<const uint8_t> frame) {
  const std::string_view text(reinterpret_cast<const char*>(frame.data()), frame.size());
  PerfFields out;
  size_t pos = 0;
  for (size_t line = 1; pos < text.size(); ++line) {
    const size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) return bad_line(line, "not ended by a newline");
    const std::string_view l = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = l.find('=');
    if (eq == std::string_view::npos || eq == 0) return bad_line(line, "not key=value");
    const std::string_view key = l.substr(0, eq), value = l.substr(eq + 1);
    if (!std::all_of(key.begin(), key.end(), is_key_char))
      return bad_line(line, "a key of a-z, 0-9 and _ only");
    if (value.empty() || value.size() > 20) return bad_line(line, "no decimal value");
    uint64_t v = 0;
    for (char c : value) {
      if (c < '0' || c > '9') return bad_line(line, "no decimal value");
      const uint64_t digit = static_cast<uint64_t>(c - '0');
      if (v > (UINT64_MAX - digit) / 10) return bad_line(line, "value above 2^64 - 1");
      v = v * 10 + digit;
    }
    if (!out.emplace(std::string(key), v).second) return bad_line(line, "a key repeated");
  }
  return out;
}

uint64_t perf_field(const PerfFields& fields, std::string_view key) {
  const auto it = fields.find(std::string(key));
  return it == fields.end() ? 0 : it->second;
}

std::vector<uint8_t> perf_round(uint64_t size) {
  return text_frame("round=1\nsize=" + std::to_string(size) + "\n");
}
std::vector<uint8_t> perf_ready() {
  return text_frame("ready=1\n");
}
std::vector<uint8_t> perf_end(uint64_t iters, uint64_t per_qp_iters) {
  return text_frame("end=1\niters=" + std::to_string(iters) +
                    "\nper_qp_iters=" + std::to_string(per_qp_iters) + "\n");
}
std::vector<uint8_t> perf_raw() {
  return text_frame("raw=1\n");
}
std::vector<uint8_t> perf_raw_end() {
  return text_frame("rawend=1\n");
}
std::vector<uint8_t> perf_alive() {
  return text_frame("alive=1\n");
}
std::vector<uint8_t> perf_bye(uint64_t qp_errors) {
  return text_frame("bye=1\nqp_errors=" + std::to_string(qp_errors) + "\n");
}

bool is_perf_alive(std::span<const uint8_t> frame) {
  const std::vector<uint8_t> alive = perf_alive();
  return std::equal(frame.begin(), frame.end(), alive.begin(), alive.end());
}

}  // namespace mrc::net
