#include "transport/qp_env.h"

#include <algorithm>

#include "transport/event_log.h"

namespace mrc {

QpEnv::QpEnv(const EngineConfig& c)
    : config(c),
      memory(c.identifier_key),
      port_up_mask(c.num_ports >= 32 ? ~0u : (1u << c.num_ports) - 1) {
  config.num_ports = std::clamp<uint8_t>(config.num_ports, 1, 32);
  config.ack_every = std::clamp<uint32_t>(config.ack_every, 1, wire::kMaxAckEchoes);
  // The scheduling rings hold each QP at most once; they start small and grow with the
  // number of QPs (a simulated host with two QPs should not pay for max_qps).
  ready_ring.reserve(std::min<uint32_t>(config.max_qps, 8));
  control_ring.reserve(std::min<uint32_t>(config.max_qps, 8));
  completions.reserve(std::max<uint32_t>(config.completion_capacity, 1));
  events.reserve(std::max<uint32_t>(config.event_capacity, 1));
  probe_tokens_ = std::max<uint32_t>(1, config.probe_budget_burst);  // starts full
}

void QpEnv::emit_completion(const Completion& c) {
  ++counters.completions;
  if (c.status != WcStatus::kSuccess) ++counters.completion_errors;
  if (!completions.try_push_back(c)) ++counters.completions_dropped;
}

void QpEnv::emit_event(const Event& e) {
  // The OCP EV event queue reports drops the same way.
  if (!events.try_push_back(e)) ++counters.events_dropped;
  if (log) [[unlikely]] {
    LogRecord r(e.time, LogKind::kEvent, e.qpn);
    r.event = e;
    log->record(r);
  }
}

void QpEnv::record(const LogRecord& r) {
  log->record(r);
}

uint32_t QpEnv::ports_down_bitmap() const {
  const uint32_t all = config.num_ports >= 32 ? ~0u : (1u << config.num_ports) - 1;
  return ~port_up_mask & all & ((1u << wire::kSackPortsDownBits) - 1);
}

bool QpEnv::take_probe_token(Time now) {
  const Time every = config.probe_budget_interval;
  if (every == 0) return true;
  const uint64_t burst = std::max<uint32_t>(1, config.probe_budget_burst);
  if (now > probe_tokens_at_) {
    const uint64_t earned = (now - probe_tokens_at_) / every;
    if (probe_tokens_ + earned >= burst) {
      probe_tokens_ = burst;
      probe_tokens_at_ = now;
    } else {
      probe_tokens_ += earned;
      probe_tokens_at_ += earned * every;  // keep the fraction of a token earned so far
    }
  }
  if (probe_tokens_ == 0) return false;
  --probe_tokens_;
  return true;
}

Time QpEnv::next_probe_token() const {
  return probe_tokens_ > 0 ? probe_tokens_at_ : probe_tokens_at_ + config.probe_budget_interval;
}

void QpEnv::refund_probe_token() {
  if (config.probe_budget_interval > 0) ++probe_tokens_;
}

// Paper 2.4 probes the reverse set "each RTT"; twice the RTT estimate leaves the answer (which
// queues behind data at the peer's NIC and in the fabric) time to come back before the probe
// counts as unanswered.
Time QpEnv::reverse_probe_interval() const {
  if (config.reverse_probe_interval > 0) return config.reverse_probe_interval;
  const Time rtt = borrowed_rtt().srtt;
  return rtt > 0 ? std::max<Time>(2 * rtt, us(2)) : us(50);
}

}  // namespace mrc
