// The data path of the software device: where the engine's packets go. The device (a driver of
// the sans-IO engine, like src/net) talks to it only through this interface; the product
// implementation is the Linux UDP driver of src/net (udp_data_path.cc).
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/types.h"
#include "transport/engine.h"

namespace mrc::api {

struct SoftPortConfig {
  in6_addr addr{};          // the port's (plane's) address; also its GID
  uint8_t prefix_len = 64;  // host bits beyond it are the same on every plane (peer lookup)
  std::string ifname;       // SO_BINDTODEVICE when not empty
};

class DataPath {
 public:
  virtual ~DataPath() = default;
  virtual Time now() const = 0;
  // One turn: receive, timers, transmit; waits at most max_wait. false on a fatal error.
  virtual bool poll(Time max_wait) = 0;
  // Where `peer` listens on each port (index = 0-based port).
  virtual bool set_peer(uint32_t peer, std::span<const in6_addr> addrs, uint16_t udp_port) = 0;
  virtual uint16_t local_udp_port(uint8_t port) const = 0;
  // Ends a poll() that is waiting (or the next one) early; safe from any thread. Only if
  // can_wake(): otherwise poll() must be given short waits (docs/c-api.md, "Device and
  // threads").
  virtual void wake() {}
  virtual bool can_wake() const { return false; }
  virtual std::string last_error() const = 0;
  // What the data path and `engine` counted (net::driver_counters' names).
  virtual std::vector<std::pair<std::string, uint64_t>> counters(const Engine& engine) const = 0;
};

// The Linux UDP driver (src/net/udp_driver.h): one socket per port bound to addr:udp_port.
std::unique_ptr<DataPath> open_udp_data_path(Engine& engine, std::span<const SoftPortConfig> ports,
                                             uint16_t udp_port, ev::FormatMode mode,
                                             std::string* error);

}  // namespace mrc::api
