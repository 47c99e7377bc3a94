// The engine's structured event log, in the spirit of QUIC's qlog: what a QP did and why, one
// record per packet sent, received or declared lost, ACK timeout, congestion window change and
// path event, as JSON lines with the same schema in every world (mrc-perf --qlog FILE, the C
// API's MRC_QLOG, mrc-sim --qlog FILE). scripts/qlog-summary.py summarises a file;
// docs/engine.md, "Event log", has the schema.
//
// Sans-IO like the rest of the engine: the engine hands records to an EventLog the caller set
// (Engine::set_event_log) and never writes anything itself; with none set each emission point
// costs one predictable branch.
#pragma once

#include <cstdint>
#include <string>

#include "transport/engine.h"
#include "transport/loss_detector.h"

namespace mrc {

enum class LogKind : uint8_t {
  kPacketSent,      // poll_transmit handed a packet over
  kPacketReceived,  // on_packet looked at one: `verdict` says whether it was used
  kPacketLost,      // a PSN declared lost (`cause`), to be resent
  kTimeout,         // the ACK timeout fired (Qp RTO)
  kCcUpdate,        // an ACK changed the congestion window
  kEvent,           // an engine Event (path state, swap, QP error, port, ACK path)
};
const char* log_kind_name(LogKind k);

struct LogRecord {
  LogRecord() = default;
  LogRecord(Time t, LogKind k, uint32_t q) : time(t), kind(k), qpn(q) {}

  Time time = 0;
  LogKind kind = LogKind::kPacketSent;
  uint32_t qpn = 0;  // the local QP (received: the QPN the packet named)
  // Packets.
  wire::Opcode opcode = wire::Opcode::kWriteOnly;
  uint32_t psn = 0;
  uint16_t ev = 0;  // EV index within the QP's set (sent, lost); received: the data extension's
  uint8_t port = 0;
  uint32_t bytes = 0;  // transport bytes (sent), payload bytes (received)
  bool retransmit = false;
  bool ecn_ce = false, trimmed = false;  // received
  Error verdict = Error::kOk;            // received: kOk when used, else why it was dropped
  LossCause cause = LossCause::kOther;   // lost
  // Congestion window after the update, bytes in flight.
  uint64_t cwnd = 0, inflight = 0;
  Event event{};  // kEvent
};

class EventLog {
 public:
  virtual ~EventLog() = default;
  virtual void record(const LogRecord& r) = 0;
};

// Appends `r` as one JSON object and a newline to `out`. `node` >= 0 adds "node": the host
// whose engine logged it (mrc-sim's many engines). Keys: docs/engine.md, "Event log".
void append_log_json(std::string& out, const LogRecord& r, int64_t node = -1);

}  // namespace mrc
