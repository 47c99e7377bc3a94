#include "transport/event_log.h"

#include <cinttypes>
#include <cstdio>

namespace mrc {
namespace {

const char* packet_name(wire::Opcode op) {
  switch (op) {
    case wire::Opcode::kWriteOnly:
      return "data";
    case wire::Opcode::kWriteOnlyImm:
      return "data_imm";
    case wire::Opcode::kAck:
      return "ack";
    case wire::Opcode::kCnp:
      return "cnp";
    case wire::Opcode::kTrimNack:
      return "trim_nack";
    case wire::Opcode::kProbe:
      return "probe";
    case wire::Opcode::kProbeReply:
      return "probe_reply";
  }
  return "unknown";
}

const char* cause_name(LossCause c) {
  switch (c) {
    case LossCause::kPathOrder:
      return "path_order";
    case LossCause::kRack:
      return "rack";
    case LossCause::kPto:
      return "pto";
    case LossCause::kRto:
      return "rto";
    case LossCause::kTrim:
      return "trim";
    case LossCause::kOther:
      return "other";
  }
  return "other";
}

const char* event_name(EventType t) {
  switch (t) {
    case EventType::kEvStateChange:
      return "path_state";
    case EventType::kQpError:
      return "qp_error";
    case EventType::kPortChange:
      return "port_change";
    case EventType::kEvSwap:
      return "path_swap";
    case EventType::kAckEvChange:
      return "ack_path_change";
  }
  return "event";
}

// error_name's text as a key-like word ("unknown QP" -> "unknown_qp").
std::string verdict_name(Error e) {
  std::string out;
  for (char c : error_name(e)) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (c >= 'A' && c <= 'Z') {
      out += static_cast<char>(c - 'A' + 'a');
    } else if (word) {
      out += c;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_')
    out.pop_back();
  return out;
}

// Appends printf-formatted text (every value here is a number or a fixed name: no escaping).
template <typename... Args>
void put(std::string& out, const char* fmt, Args... args) {
  char buf[160];
  const int n = std::snprintf(buf, sizeof buf, fmt, args...);
  if (n > 0) out.append(buf, static_cast<size_t>(std::min<int>(n, sizeof buf - 1)));
}

}  // namespace

const char* log_kind_name(LogKind k) {
  switch (k) {
    case LogKind::kPacketSent:
      return "packet_sent";
    case LogKind::kPacketReceived:
      return "packet_received";
    case LogKind::kPacketLost:
      return "packet_lost";
    case LogKind::kTimeout:
      return "timeout";
    case LogKind::kCcUpdate:
      return "cc_update";
    case LogKind::kEvent:
      return "event";
  }
  return "?";
}

void append_log_json(std::string& out, const LogRecord& r, int64_t node) {
  const char* kind = r.kind == LogKind::kEvent ? event_name(r.event.type) : log_kind_name(r.kind);
  put(out, "{\"time_ps\":%" PRIu64 ",\"event\":\"%s\"", static_cast<uint64_t>(r.time), kind);
  if (node >= 0) put(out, ",\"node\":%" PRId64, node);
  put(out, ",\"qpn\":%" PRIu32, r.qpn);
  switch (r.kind) {
    case LogKind::kPacketSent:
      put(out,
          ",\"packet\":\"%s\",\"psn\":%" PRIu32 ",\"ev\":%u,\"port\":%u,\"bytes\":%" PRIu32
          ",\"retransmit\":%s",
          packet_name(r.opcode), r.psn, unsigned{r.ev}, unsigned{r.port}, r.bytes,
          r.retransmit ? "true" : "false");
      break;
    case LogKind::kPacketReceived:
      put(out, ",\"packet\":\"%s\",\"psn\":%" PRIu32 ",\"ev\":%u,\"port\":%u,\"bytes\":%" PRIu32,
          packet_name(r.opcode), r.psn, unsigned{r.ev}, unsigned{r.port}, r.bytes);
      put(out, ",\"ecn_ce\":%s,\"trimmed\":%s,\"verdict\":\"%s\"", r.ecn_ce ? "true" : "false",
          r.trimmed ? "true" : "false", verdict_name(r.verdict).c_str());
      break;
    case LogKind::kPacketLost:
      put(out, ",\"psn\":%" PRIu32 ",\"ev\":%u,\"port\":%u,\"bytes\":%" PRIu32 ",\"cause\":\"%s\"",
          r.psn, unsigned{r.ev}, unsigned{r.port}, r.bytes, cause_name(r.cause));
      break;
    case LogKind::kTimeout:
      put(out, ",\"psn\":%" PRIu32 ",\"inflight\":%" PRIu64, r.psn, r.inflight);
      break;
    case LogKind::kCcUpdate:
      put(out, ",\"cwnd\":%" PRIu64 ",\"inflight\":%" PRIu64, r.cwnd, r.inflight);
      break;
    case LogKind::kEvent: {
      const Event& e = r.event;
      switch (e.type) {
        case EventType::kQpError:
          break;
        case EventType::kPortChange:
          put(out, ",\"port\":%u,\"up\":%s", unsigned{e.port},
              e.to == ev::EvState::kGood ? "true" : "false");
          break;
        case EventType::kAckEvChange:
          put(out, ",\"ev\":%u,\"port\":%u,\"replaced\":%u", unsigned{e.ev_index}, unsigned{e.port},
              unsigned{e.replaced});
          break;
        case EventType::kEvStateChange:
        case EventType::kEvSwap:
          put(out, ",\"ev\":%u,\"port\":%u,\"from\":\"%s\",\"to\":\"%s\"", unsigned{e.ev_index},
              unsigned{e.port}, ev::ev_state_name(e.from), ev::ev_state_name(e.to));
          if (e.type == EventType::kEvSwap) put(out, ",\"replaced\":%u", unsigned{e.replaced});
          break;
      }
      break;
    }
  }
  out += "}\n";
}

}  // namespace mrc
