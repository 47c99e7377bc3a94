#include "sim/mpi_exchange.h"

#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <vector>

#include <time.h>

namespace mrc::sim {

namespace {
// Counts and displacements are ints in MPI: a window's traffic to one rank stays far below
// 2 GB, but say so rather than wrap.
// gather() sends in pieces of this size.
constexpr size_t kGatherPiece = size_t{1} << 30;

// Waits for `request` without spinning at full speed: after a short busy phase the rank
// sleeps between tests. Used where a rank waits for the others to finish their window (the
// counts of the window's exchange): a rank that finished first would otherwise spin in MPI's
// progress loop for as long as the others compute, and on a machine whose CPUs share a
// core's resources (SMT siblings, or a hypervisor's vCPUs on them) that spinning slows the
// ranks it waits for. The data that follows is waited for at full speed (MPI_Waitall): its
// transfer needs MPI's progress calls on both sides, between machines above all.
void wait_sleeping(MPI_Request& request) {
  constexpr int kBusyTests = 100;
  int done = 0;
  for (int tests = 0; !done; tests = std::min(tests + 1, kBusyTests)) {
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done && tests == kBusyTests) {
      const timespec pause{0, 20'000};  // 20 us: small against a window's compute
      nanosleep(&pause, nullptr);
    }
  }
}

int as_count(size_t n) {
  if (n > static_cast<size_t>(std::numeric_limits<int>::max())) {
    std::fprintf(stderr, "mrc-sim: more than 2 GB to exchange in one window\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return static_cast<int>(n);
}
}  // namespace

bool MpiExchange::launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMIX_RANK") != nullptr ||
         std::getenv("PMI_SIZE") != nullptr;
}

MpiExchange::MpiExchange(int* argc, char*** argv) {
  MPI_Init(argc, argv);
  int r = 0, n = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  rank_ = static_cast<uint32_t>(r);
  ranks_ = static_cast<uint32_t>(n);
}

MpiExchange::~MpiExchange() {
  MPI_Finalize();
}

size_t MpiExchange::exchange(const std::vector<std::span<const uint8_t>>& out,
                             std::vector<uint8_t>& in) {
  const double t0 = MPI_Wtime();
  const int n = static_cast<int>(ranks_);
  std::vector<int> send_counts(n), recv_counts(n);
  for (int r = 0; r < n; ++r)
    send_counts[r] = as_count(out[r].size());
  MPI_Request counts_request;
  MPI_Ialltoall(send_counts.data(), 1, MPI_INT, recv_counts.data(), 1, MPI_INT, MPI_COMM_WORLD,
                &counts_request);
  wait_sleeping(counts_request);  // done once every rank has ended the window
  cost_.wait_ns += static_cast<uint64_t>((MPI_Wtime() - t0) * 1e9);
  std::vector<size_t> offset(n + 1, 0);
  for (int r = 0; r < n; ++r)
    offset[r + 1] = offset[r] + static_cast<size_t>(recv_counts[r]);
  if (in.size() < offset[n]) in.resize(offset[n]);
  // Point to point from each rank's own buffer: no copy into one send buffer (a window of a
  // large run carries hundreds of MB of packets).
  std::vector<MPI_Request> requests;
  requests.reserve(2 * static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    if (r == static_cast<int>(rank_) || recv_counts[r] == 0) continue;
    requests.emplace_back();
    MPI_Irecv(in.data() + offset[r], recv_counts[r], MPI_BYTE, r, 0, MPI_COMM_WORLD,
              &requests.back());
  }
  for (int r = 0; r < n; ++r) {
    if (r == static_cast<int>(rank_) || send_counts[r] == 0) continue;
    requests.emplace_back();
    MPI_Isend(out[r].data(), send_counts[r], MPI_BYTE, r, 0, MPI_COMM_WORLD, &requests.back());
  }
  if (!out[rank_].empty())
    std::copy(out[rank_].begin(), out[rank_].end(),
              in.begin() + static_cast<std::ptrdiff_t>(offset[rank_]));
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  ++cost_.calls;
  for (int r = 0; r < n; ++r)
    if (r != static_cast<int>(rank_)) cost_.bytes_sent += out[r].size();
  cost_.wall_ns += static_cast<uint64_t>((MPI_Wtime() - t0) * 1e9);
  return offset[n];
}

std::vector<uint8_t> MpiExchange::all_gather(const std::vector<uint8_t>& mine) {
  const int n = static_cast<int>(ranks_);
  int count = as_count(mine.size());
  std::vector<int> counts(n), displs(n);
  MPI_Allgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  size_t total = 0;
  for (int r = 0; r < n; ++r) {
    displs[r] = as_count(total);
    total += static_cast<size_t>(counts[r]);
  }
  std::vector<uint8_t> all(total);
  MPI_Allgatherv(mine.data(), count, MPI_BYTE, all.data(), counts.data(), displs.data(), MPI_BYTE,
                 MPI_COMM_WORLD);
  return all;
}

std::vector<uint8_t> MpiExchange::gather(const std::vector<uint8_t>& mine) {
  // Point to point, in pieces of at most 1 GiB: what rank 0 gathers can pass MPI's int counts
  // and displacements (the flow results of 8,192 GPUs' all-to-all: 67 M x 104 bytes, 7 GB).
  const int n = static_cast<int>(ranks_);
  uint64_t count = mine.size();
  std::vector<uint64_t> counts(n);
  MPI_Gather(&count, 1, MPI_UINT64_T, counts.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  constexpr int kTag = 1;  // exchange() uses 0
  const auto piece = [](size_t left) { return static_cast<int>(std::min(kGatherPiece, left)); };
  if (rank_ != 0) {
    for (size_t off = 0; off < mine.size(); off += kGatherPiece)
      MPI_Send(mine.data() + off, piece(mine.size() - off), MPI_BYTE, 0, kTag, MPI_COMM_WORLD);
    return {};
  }
  size_t total = 0;
  for (uint64_t c : counts)
    total += c;
  std::vector<uint8_t> all(total);
  std::copy(mine.begin(), mine.end(), all.begin());
  size_t at = mine.size();
  for (int r = 1; r < n; ++r) {
    for (size_t off = 0; off < counts[r]; off += kGatherPiece)
      MPI_Recv(all.data() + at + off, piece(counts[r] - off), MPI_BYTE, r, kTag, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
    at += counts[r];
  }
  return all;
}

void MpiExchange::all_min(std::vector<uint64_t>& v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), as_count(v.size()), MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
}

void MpiExchange::all_sum(std::vector<uint64_t>& v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), as_count(v.size()), MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
}

void MpiExchange::all_max(std::vector<uint64_t>& v) {
  MPI_Allreduce(MPI_IN_PLACE, v.data(), as_count(v.size()), MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
}

void MpiExchange::barrier() {
  MPI_Barrier(MPI_COMM_WORLD);
}

void MpiExchange::abort(const std::string& message, int status) {
  std::fprintf(stderr, "mrc-sim: rank %u: %s\n", rank_, message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, status);
  std::_Exit(status);  // MPI_Abort does not return; this is for the compiler
}

}  // namespace mrc::sim
