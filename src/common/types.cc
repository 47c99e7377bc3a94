#include "common/types.h"

namespace mrc {

std::string_view error_name(Error e) {
  switch (e) {
    case Error::kOk:
      return "ok";
    case Error::kTruncated:
      return "truncated packet";
    case Error::kBadVersion:
      return "bad version";
    case Error::kBadNextHeader:
      return "bad next header";
    case Error::kBadSrh:
      return "bad segment routing header";
    case Error::kBadUdpPort:
      return "bad UDP destination port";
    case Error::kBadLength:
      return "inconsistent length";
    case Error::kBadOpcode:
      return "bad opcode";
    case Error::kBadPadCount:
      return "bad pad count";
    case Error::kBadIcrc:
      return "bad ICRC";
    case Error::kBadExtension:
      return "bad MRC extension header";
    case Error::kUnknownQp:
      return "unknown QP";
    case Error::kBadQpState:
      return "operation not allowed in this QP state";
    case Error::kBadRkey:
      return "bad rkey";
    case Error::kBadAddress:
      return "address out of range";
    case Error::kPsnOutOfWindow:
      return "PSN outside the window";
    case Error::kInvalidArgument:
      return "invalid argument";
    case Error::kQueueFull:
      return "queue full";
    case Error::kNoResources:
      return "no resources";
    case Error::kNotFound:
      return "not found";
    case Error::kBadEvProfile:
      return "invalid EV profile";
    case Error::kTooBig:
      return "too big";
    case Error::kBusy:
      return "busy";
    case Error::kBadUdpChecksum:
      return "bad UDP checksum";
    case Error::kIoError:
      return "I/O error";
  }
  return "unknown error";
}

}  // namespace mrc
