// DataPath over the Linux UDP driver (src/net).
#include <vector>

#include "api/data_path.h"
#include "net/udp_driver.h"

namespace mrc::api {

namespace {

class UdpDataPath final : public DataPath {
 public:
  explicit UdpDataPath(std::unique_ptr<net::UdpDriver> driver) : driver_(std::move(driver)) {}
  Time now() const override { return driver_->now(); }
  bool poll(Time max_wait) override {
    auto st = driver_->poll(max_wait);
    if (!st) error_ = st.error().message;
    return static_cast<bool>(st);
  }
  bool set_peer(uint32_t peer, std::span<const in6_addr> addrs, uint16_t udp_port) override {
    std::vector<net::Endpoint> eps(addrs.size());
    for (size_t i = 0; i < addrs.size(); ++i)
      eps[i] = net::Endpoint{addrs[i], udp_port};
    auto st = driver_->set_peer(peer, eps);
    if (!st) error_ = st.error().message;
    return static_cast<bool>(st);
  }
  uint16_t local_udp_port(uint8_t port) const override { return driver_->local(port).port; }
  // UdpDriver::wake(): an eventfd in the driver's epoll set, safe from any thread.
  void wake() override { driver_->wake(); }
  bool can_wake() const override { return true; }
  std::string last_error() const override { return error_; }
  std::vector<std::pair<std::string, uint64_t>> counters(const Engine& engine) const override {
    return net::driver_counters(driver_->stats(), engine.counters());
  }

 private:
  std::unique_ptr<net::UdpDriver> driver_;
  std::string error_;
};

}  // namespace

std::unique_ptr<DataPath> open_udp_data_path(Engine& engine, std::span<const SoftPortConfig> ports,
                                             uint16_t udp_port, ev::FormatMode mode,
                                             std::string* error) {
  net::DriverConfig cfg;
  for (const auto& p : ports)
    cfg.ports.push_back(net::PortConfig{{p.addr, udp_port}, p.ifname});
  cfg.ev_mode = mode;
  cfg.socket_buffer = 4 << 20;
  // The slot-0 data socket is the node's EV-probe responder (docs/c-api.md): any controller
  // may probe it, peer or not.
  cfg.pings_from_anyone = true;
  auto driver = net::UdpDriver::open(engine, cfg);
  if (!driver) {
    if (error) *error = driver.error().message;
    return nullptr;
  }
  return std::make_unique<UdpDataPath>(std::move(*driver));
}

}  // namespace mrc::api
