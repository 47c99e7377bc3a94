// mrc-perf: the ib_write_bw of MRC. A server and a client (perftest style: the client names
// the server) set up QPs over a TCP side channel and the client streams RDMA WRITEs (or
// WRITE_IMM) through the Linux UDP driver, spraying over every plane and EV.
//
//   mrc-perf --local ::1                       server (waits for one client)
//   mrc-perf --local ::1 ::1 -s 65536 -n 5000  client
//   mrc-perf -a --verify --write-imm ...       sweep 2..2^23 bytes, payload checked
//   mrc-perf --fabric /run/mrc-fabric/mrc/fabric.json --host 0 [SERVER]
//
// Output: perftest's ib_write_bw table (same header line and column layout; --report_gbits
// switches to Gb/sec), then MRC lines: per-plane bytes, retransmits, trims, EV state changes,
// drops by reason (ours and the server's), the longest gap between completions (stall).
// Exit status: 0 on success; 1 on verify mismatches, QP errors or a failed run; 2 on bad
// arguments or setup errors (peer absent, versions differ, no route).
//
// The program's parts, and what they share: perf.h.
#include <CLI/CLI.hpp>
#include <optional>

#include "cli.h"
#include "perf.h"

int main(int argc, char** argv) {
  mrc::perf::Options o;
  CLI::App app{
      "mrc-perf: RDMA WRITE bandwidth over MRC on Linux UDP/IPv6 (like ib_write_bw); "
      "docs/linux-driver.md",
      "mrc-perf"};
  mrc::tools::set_exit_codes(app, "0 the transfer completed (and verified), 1 it failed",
                             "bad arguments, or a test that could not start (no server, a "
                             "refusal, no client within --accept-timeout-ms)");
  mrc::perf::add_options(app, o);
  if (const int rc = mrc::tools::parse(app, argc, argv); rc >= 0) return rc;
  if (const std::optional<int> rc = mrc::perf::check_arguments(app, o)) return *rc;
  return o.server.empty() ? mrc::perf::run_server(o) : mrc::perf::run_client(o);
}
