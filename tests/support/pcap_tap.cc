// FaultNet's optional pcap tap: delivered (and optionally dropped) datagrams, written with
// wire::PcapWriter at their simulated time, so Wireshark can open a simulated run.
#include "support/fault_net.h"
#include "wire/pcap.h"

namespace mrc::testnet {
namespace {

class PcapTap final : public FaultNet::Pcap {
 public:
  explicit PcapTap(wire::PcapWriter w) : writer_(std::move(w)) {}
  // A failed write only loses trace data; the run itself is unaffected. The first failure is
  // kept for close(), where the caller learns the capture is incomplete.
  void write(Time t, std::span<const uint8_t> datagram) override {
    if (auto st = writer_.write(t, datagram); !st && first_error_ == Error::kOk)
      first_error_ = st.error();
  }
  Status close() override {
    const Status closed = writer_.close();
    if (first_error_ != Error::kOk) return fail(first_error_);
    return closed;
  }

 private:
  wire::PcapWriter writer_;
  Error first_error_ = Error::kOk;
};

}  // namespace

Status FaultNet::enable_pcap(const std::string& path, bool include_drops) {
  auto w = wire::PcapWriter::open(path);
  if (!w) return fail(w.error());
  pcap_ = std::make_unique<PcapTap>(std::move(*w));
  pcap_drops_ = include_drops;
  return {};
}

Status FaultNet::close_pcap() {
  if (!pcap_) return {};
  const Status st = pcap_->close();
  pcap_.reset();
  return st;
}

}  // namespace mrc::testnet
