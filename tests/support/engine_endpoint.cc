// The Endpoint adapter for mrc::Engine, kept apart from fault_net.cc so that tests of the
// network alone link without the engine's implementation.
#include "support/fault_net.h"

namespace mrc::testnet {
namespace {

class EngineEndpoint final : public Endpoint {
 public:
  explicit EngineEndpoint(const EngineConfig& cfg) : engine_(cfg) {}
  Status on_datagram(Time now, uint8_t port, std::span<const uint8_t> bytes) override {
    return engine_.on_datagram(now, port, bytes);
  }
  bool poll_transmit(Time now, uint32_t port_mask, TxPacket& out) override {
    return engine_.poll_transmit(now, port_mask, out);
  }
  bool poll_completion(Completion& out) override { return engine_.poll_completion(out); }
  bool poll_event(Event& out) override { return engine_.poll_event(out); }
  Time next_deadline() override { return engine_.next_deadline(); }
  void on_timer(Time now) override { engine_.on_timer(now); }
  void set_port_up(Time now, uint8_t port, bool up) override { engine_.set_port_up(now, port, up); }
  Engine* engine() override { return &engine_; }

 private:
  Engine engine_;
};

}  // namespace

std::unique_ptr<Endpoint> make_engine_endpoint(const EngineConfig& cfg) {
  return std::make_unique<EngineEndpoint>(cfg);
}

}  // namespace mrc::testnet

namespace mrc::testnet {

HostId FaultNet::add_engine(const EngineConfig& cfg) {
  return add_endpoint(make_engine_endpoint(cfg), cfg.num_ports);
}

}  // namespace mrc::testnet
