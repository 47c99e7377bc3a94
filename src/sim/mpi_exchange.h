// RankExchange over MPI (Open MPI from Debian; built only when CMake finds MPI). One object
// per process: MPI is initialised by the constructor and finalised by the destructor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/partition.h"

namespace mrc::sim {

class MpiExchange final : public RankExchange {
 public:
  // Whether this process was started by an MPI launcher (mpirun): the launcher's
  // environment variables are set. Serial runs never initialise MPI.
  static bool launched_by_mpirun();
  MpiExchange(int* argc, char*** argv);
  ~MpiExchange() override;
  MpiExchange(const MpiExchange&) = delete;
  MpiExchange& operator=(const MpiExchange&) = delete;

  uint32_t rank() const override { return rank_; }
  uint32_t ranks() const override { return ranks_; }
  size_t exchange(const std::vector<std::span<const uint8_t>>& out,
                  std::vector<uint8_t>& in) override;
  std::vector<uint8_t> all_gather(const std::vector<uint8_t>& mine) override;
  std::vector<uint8_t> gather(const std::vector<uint8_t>& mine) override;
  void all_min(std::vector<uint64_t>& v) override;
  void all_sum(std::vector<uint64_t>& v) override;
  [[noreturn]] void abort(const std::string& message, int status) override;
  Cost cost() const override { return cost_; }
  // Every rank waits for the others.
  void barrier();
  // Element-wise maximum (peak memory of the ranks).
  void all_max(std::vector<uint64_t>& v);

 private:
  uint32_t rank_ = 0, ranks_ = 1;
  Cost cost_;
};

}  // namespace mrc::sim
