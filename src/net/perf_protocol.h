// mrc-perf's control protocol: the messages client and server exchange over the side channel
// after the hellos (docs/linux-driver.md, "mrc-perf"). Each message is one frame of
// "key=value\n" lines, keys of [a-z0-9_], values decimal unsigned 64-bit; a refusal
// (encode_refusal, net/hello.h) is the one frame that is not.
//
//   client                          server
//   round=1 size=S          ->                      a round of S-byte writes starts
//                           <-      ready=1
//   end=1 iters per_qp_iters ->                     the round's writes are posted
//                           <-      mismatches imm_received qp_errors cpu_us (totals)
//   raw=1                   ->                      a raw UDP blast (--raw-udp)
//                           <-      raw_port<p>=...  the server's raw sockets
//   rawend=1                ->
//                           <-      raw_packets raw_bytes raw_ns
//   alive=1                 <->     alive=1         a liveness question, answered in kind
//   bye=1 qp_errors=N       ->                      the client's own failed QPs
//                           <-      the server's counters (Session::counters)
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "net/sockets.h"

namespace mrc::net {

using PerfFields = std::map<std::string, uint64_t>;

// The frame of `fields`, in their order.
std::vector<uint8_t> encode_perf_message(std::span<const std::pair<std::string, uint64_t>> fields);
// The fields of a frame; kBadHello (what is wrong, and on which line) when a line is not
// key=value as above, a value overflows or a key repeats.
NetResult<PerfFields> decode_perf_message(std::span<const uint8_t> frame);
// A field's value, 0 when absent.
uint64_t perf_field(const PerfFields& fields, std::string_view key);

// The messages of the protocol.
std::vector<uint8_t> perf_round(uint64_t size);
std::vector<uint8_t> perf_ready();
std::vector<uint8_t> perf_end(uint64_t iters, uint64_t per_qp_iters);
std::vector<uint8_t> perf_raw();
std::vector<uint8_t> perf_raw_end();
std::vector<uint8_t> perf_alive();
std::vector<uint8_t> perf_bye(uint64_t qp_errors);
// Whether `frame` is exactly perf_alive() (the question and its answer are the same line).
bool is_perf_alive(std::span<const uint8_t> frame);

}  // namespace mrc::net
