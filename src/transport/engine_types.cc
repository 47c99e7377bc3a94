#include "transport/engine_types.h"

namespace mrc {

const char* qp_state_name(QpState s) {
  switch (s) {
    case QpState::kReset:
      return "RESET";
    case QpState::kInit:
      return "INIT";
    case QpState::kRtr:
      return "RTR";
    case QpState::kRts:
      return "RTS";
    case QpState::kErr:
      return "ERR";
  }
  return "?";
}

const char* wc_status_name(WcStatus s) {
  switch (s) {
    case WcStatus::kSuccess:
      return "success";
    case WcStatus::kRetryExceeded:
      return "retry exceeded";
    case WcStatus::kFlushed:
      return "flushed";
    case WcStatus::kAckContradiction:
      return "ACK contradicted an earlier one";
  }
  return "?";
}

const char* drop_reason_name(DropReason r) {
  switch (r) {
    case DropReason::kDecode:
      return "decode";
    case DropReason::kUnknownQp:
      return "unknown_qp";
    case DropReason::kBadState:
      return "bad_state";
    case DropReason::kBadRkey:
      return "bad_rkey";
    case DropReason::kBadAddress:
      return "bad_address";
    case DropReason::kPsnOutOfWindow:
      return "psn_out_of_window";
    case DropReason::kBadAck:
      return "bad_ack";
    case DropReason::kWimmExceeded:
      return "wimm_exceeded";
    case DropReason::kBadOpcode:
      return "bad_opcode";
    case DropReason::kInconsistent:
      return "inconsistent";
    case DropReason::kWrongPeer:
      return "wrong_peer";
    case DropReason::kPayloadTooLong:
      return "payload_too_long";
    case DropReason::kCount:
      break;
  }
  return "?";
}

}  // namespace mrc
