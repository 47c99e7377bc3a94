// A classic pcap file writer (https://www.tcpdump.org/manpages/pcap-savefile.5.html) with
// nanosecond timestamps (magic 0xa1b23c4d), for the simulator and the tests. Files open in
// Wireshark/tshark, where the RoCEv2 dissector decodes BTH/RETH/ImmDt/AETH and
// tools/wireshark/mrc.lua decodes the MRC extensions.
//
// Each record is one IPv6 datagram as wire::encode() produces it. With LINKTYPE_ETHERNET
// (the default; every tool reads it) the writer prepends a synthetic Ethernet II header
// (locally administered MACs 02:00:00:00:00:01 -> 02:00:00:00:00:02, EtherType 0x86DD);
// with LINKTYPE_RAW the record is the bare IPv6 datagram.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>

#include "common/types.h"

namespace mrc::wire {

enum class PcapLinkType : uint32_t {
  kEthernet = 1,  // LINKTYPE_ETHERNET
  kRaw = 101,     // LINKTYPE_RAW: records start with the IP header
};

inline constexpr uint32_t kPcapDefaultSnaplen = 262144;  // what tcpdump and Wireshark use

class PcapWriter {
 public:
  // Creates (truncates) `path` and writes the file header. Records longer than `snaplen`
  // (link header included) are cut to it, keeping their original length in the record.
  // Errors: kIoError if the file cannot be created or the header cannot be written;
  // kInvalidArgument if snaplen == 0.
  static Result<PcapWriter> open(const std::string& path,
                                 PcapLinkType link = PcapLinkType::kEthernet,
                                 uint32_t snaplen = kPcapDefaultSnaplen);

  // Appends one datagram captured at `ps_timestamp` (picoseconds since the epoch the caller
  // chose; the simulator uses its start, so Wireshark shows 1970-01-01 plus simulated time),
  // rounded down to nanoseconds. Errors: kIoError on a write failure or a closed writer;
  // kTooBig if the datagram is longer than 65535 bytes (more than IPv6 without jumbograms).
  Status write(Time ps_timestamp, std::span<const uint8_t> datagram);

  // Pushes buffered records to the file (e.g. before another process reads it).
  // Error: kIoError.
  Status flush();

  // Flushes and closes; later writes fail. The destructor closes too, ignoring errors.
  // Error: kIoError if buffered data could not be written.
  Status close();

  PcapWriter(PcapWriter&& other) noexcept;
  PcapWriter& operator=(PcapWriter&& other) noexcept;
  PcapWriter(const PcapWriter&) = delete;
  PcapWriter& operator=(const PcapWriter&) = delete;
  ~PcapWriter();

  PcapLinkType link_type() const { return link_; }
  uint64_t records_written() const { return records_; }

 private:
  PcapWriter(std::FILE* file, PcapLinkType link, uint32_t snaplen)
      : file_(file), link_(link), snaplen_(snaplen) {}

  std::FILE* file_ = nullptr;
  PcapLinkType link_ = PcapLinkType::kEthernet;
  uint32_t snaplen_ = kPcapDefaultSnaplen;
  uint64_t records_ = 0;
};

}  // namespace mrc::wire
