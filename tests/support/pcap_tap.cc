// FaultNet's optional pcap tap: delivered (and optionally dropped) datagrams, written with
// wire::PcapWriter at their simulated time, so Wireshark can open a simulated run.
#include "support/fault_net.h"
#include "wire/pcap.h"

namespace mrc::testnet {
namespace {

class PcapTap final : public FaultNet::Pcap {
 public:
  explicit PcapTap(wire::PcapWriter w) : writer_(std::move(w)) {}
  // A failed write only loses trace data; the run itself is unaffected.
  void write(Time t, std::span<const uint8_t> datagram) override {
    (void)writer_.write(t, datagram);
  }

 private:
  wire::PcapWriter writer_;
};

}  // namespace

Status FaultNet::enable_pcap(const std::string& path, bool include_drops) {
  auto w = wire::PcapWriter::open(path);
  if (!w) return fail(w.error());
  pcap_ = std::make_unique<PcapTap>(std::move(*w));
  pcap_drops_ = include_drops;
  return {};
}

}  // namespace mrc::testnet
