// Tests for wire/pcap.h: the file format byte by byte, then the real consumer: tshark reads a
// capture of every MRC packet type, its RoCEv2 dissector must report what we encoded, and
// tools/wireshark/mrc.lua must report the MRC extension fields. tshark is required (CI
// installs it); without it these tests fail rather than skip.
#include "wire/pcap.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "wire/codec.h"
#include "wire/usid.h"

namespace mrc::wire {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("mrc_pcap_test_" + std::to_string(::getpid()));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

Bytes read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint32_t le32(const Bytes& b, size_t at) {
  return uint32_t{b[at]} | uint32_t{b[at + 1]} << 8 | uint32_t{b[at + 2]} << 16 |
         uint32_t{b[at + 3]} << 24;
}

// ---------------------------------------------------------------------------------------------
// One datagram of every packet type, with distinct field values.

const uint8_t kPayload[37] = {0x5A, 1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12,
                              13,   14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
                              26,   27, 28, 29, 30, 31, 32, 33, 34, 35, 36};

Datagram base(uint32_t flow, uint32_t qp, uint32_t psn, Opcode op) {
  Datagram d;
  d.ip.traffic_class = kDscpData << 2 | kEcnEct0;
  d.ip.flow_label = flow;
  d.ip.src[0] = 0xFD;
  d.ip.src[15] = 1;
  d.ip.dst[0] = 0xFD;
  d.ip.dst[15] = 2;
  d.udp.src_port = static_cast<uint16_t>(0xC000 | (flow & 0xFFF));
  d.pkt.bth.opcode = op;
  d.pkt.bth.dest_qp = qp;
  d.pkt.bth.psn = psn;
  return d;
}

std::vector<Datagram> every_packet_type() {
  std::vector<Datagram> out;

  Datagram wo = base(0x12345, 0x000123, 0x456789, Opcode::kWriteOnly);
  wo.pkt.reth = {.va = 0x1122334455667788, .rkey = 0xAABBCCDD, .dma_len = sizeof kPayload};
  wo.pkt.data = {.msg_num = 7,
                 .pkt_index = 1,
                 .pkt_count = 3,
                 .tx_time_ps = 123456789012,
                 .ev_index = 42,
                 .flags = DataExt::kRetransmit};
  wo.pkt.payload = kPayload;
  wo.pkt.payload_len = sizeof kPayload;
  out.push_back(wo);

  Datagram woi = base(0xABCDE, 0x00BEEF, 17, Opcode::kWriteOnlyImm);
  const uint16_t usids[] = {0x0101, 0x0202, 0x0303};
  woi.ip.dst = usid_carrier(0xFCBBBB00, usids);
  woi.has_srh = true;
  woi.srh.num_segments = 2;
  woi.srh.last_entry = 1;
  woi.srh.segments_left = 1;
  woi.srh.segments[0] = usid_carrier(0xFCBBBB00, std::span(usids).last(1));
  woi.srh.segments[1] = woi.ip.dst;
  woi.pkt.bth.solicited = true;
  woi.pkt.reth = {.va = 0xFFFF000012345678, .rkey = 0x01020304, .dma_len = 8};
  woi.pkt.imm = 0xCAFEF00D;
  woi.pkt.data = {.msg_num = 0xFFFFFFFE,
                  .pkt_index = 0,
                  .pkt_count = 1,
                  .tx_time_ps = 1,
                  .ev_index = 0xFFFF,
                  .flags = DataExt::kLastOfMessage | DataExt::kHasImm | DataExt::kAckNow};
  woi.pkt.payload = kPayload;
  woi.pkt.payload_len = 8;
  out.push_back(woi);

  Datagram trimmed = base(0x00001, 0x000123, 0x45678A, Opcode::kWriteOnly);
  trimmed.ip.traffic_class = kDscpTrimmed << 2;
  trimmed.pkt.reth = {.va = 0x1000, .rkey = 0x55, .dma_len = 4096};
  trimmed.pkt.data = {
      .msg_num = 8, .pkt_index = 0, .pkt_count = 2, .tx_time_ps = 99, .ev_index = 3, .flags = 0};
  out.push_back(trimmed);

  Datagram ack = base(0x00002, 0x000777, 0x000100, Opcode::kAck);
  ack.pkt.aeth = {.syndrome = 0x1F, .msn = 0x000ABC};
  ack.pkt.sack.cum_psn = 0x000100;
  ack.pkt.sack.sack_base = 0xFFFFFE;  // bitmap wraps around the 24-bit PSN space
  ack.pkt.sack.bitmap = {0x8000000000000005, 0x2};
  ack.pkt.sack.received_bytes = 0x123456789A;
  ack.pkt.sack.service_time_ns = 1500;
  ack.pkt.sack.echo_count = 3;
  ack.pkt.sack.echo[0] = {.psn = 0x0000FF, .ev_index = 7, .flags = AckEcho::kEcnCe};
  ack.pkt.sack.echo[1] = {.psn = 0x000101, .ev_index = 300, .flags = AckEcho::kTrimmed};
  ack.pkt.sack.echo[2] = {
      .psn = 0xFFFFFF, .ev_index = 0, .flags = AckEcho::kRetransmit | AckEcho::kDuplicate};
  out.push_back(ack);

  Datagram cnp = base(0x00003, 0x0000D2, 0, Opcode::kCnp);
  cnp.pkt.bth.becn = true;
  out.push_back(cnp);

  Datagram nack = base(0x00004, 0x000777, 0x000100, Opcode::kTrimNack);
  nack.has_srh = true;
  nack.srh.num_segments = 1;
  nack.srh.segments[0] = nack.ip.dst;
  nack.pkt.aeth = {.syndrome = 0x60, .msn = 0x000ABC};
  nack.pkt.nack = {.psn = 0x000105, .cum_psn = 0x000100, .ev_index = 0x0011};
  out.push_back(nack);

  Datagram probe = base(0x00005, 0x000001, 5, Opcode::kProbe);
  probe.pkt.probe = {.probe_id = 0x0102030405060708,
                     .tx_time_ps = 1000000,
                     .service_time_ns = 0,
                     .ev_index = 4,
                     .port = 2,
                     .flags = 0};
  probe.pkt.payload = kPayload;
  probe.pkt.payload_len = 12;
  out.push_back(probe);

  Datagram reply = base(0x00006, 0x000002, 6, Opcode::kProbeReply);
  reply.pkt.probe = {.probe_id = 0xFEDCBA9876543210,
                     .tx_time_ps = 2000000,
                     .service_time_ns = 250,
                     .ev_index = 4,
                     .port = 7,
                     .flags = 0x81};
  out.push_back(reply);
  return out;
}

Bytes encode_or_die(const Datagram& d) {
  Bytes out(encoded_size(d));
  auto n = encode(d, out);
  EXPECT_TRUE(n.has_value()) << opcode_name(d.pkt.bth.opcode);
  return out;
}

constexpr Time kFirstTimestamp = 1 * kPicosPerSecond + 234'567'891;  // 1.000234567891 s
constexpr Time kTimestampStep = 1'500'000;                           // 1.5 us

// Writes every packet type; returns the datagrams in file order.
std::vector<Bytes> write_capture(const fs::path& path, PcapLinkType link) {
  auto writer = PcapWriter::open(path.string(), link);
  EXPECT_TRUE(writer.has_value());
  std::vector<Bytes> written;
  if (!writer) return written;
  Time t = kFirstTimestamp;
  for (const Datagram& d : every_packet_type()) {
    written.push_back(encode_or_die(d));
    EXPECT_TRUE(writer->write(t, written.back()).has_value());
    t += kTimestampStep;
  }
  EXPECT_EQ(writer->records_written(), written.size());
  EXPECT_TRUE(writer->close().has_value());
  return written;
}

// ---------------------------------------------------------------------------------------------
// The file format

TEST(PcapWriter, write__file_and_record_headers_byte_exact) {
  TempDir dir;
  for (PcapLinkType link : {PcapLinkType::kEthernet, PcapLinkType::kRaw}) {
    const fs::path path = dir / "format.pcap";
    const std::vector<Bytes> written = write_capture(path, link);
    const Bytes file = read_file(path);
    ASSERT_GE(file.size(), 24u);
    EXPECT_EQ(le32(file, 0), 0xA1B23C4Du) << "nanosecond magic";
    EXPECT_EQ(file[4] | file[5] << 8, 2);
    EXPECT_EQ(file[6] | file[7] << 8, 4);
    EXPECT_EQ(le32(file, 8), 0u);
    EXPECT_EQ(le32(file, 12), 0u);
    EXPECT_EQ(le32(file, 16), kPcapDefaultSnaplen);
    EXPECT_EQ(le32(file, 20), static_cast<uint32_t>(link));

    const size_t link_bytes = link == PcapLinkType::kEthernet ? 14 : 0;
    size_t at = 24;
    Time t = kFirstTimestamp;
    for (const Bytes& d : written) {
      ASSERT_LE(at + 16, file.size());
      EXPECT_EQ(le32(file, at), t / kPicosPerSecond);
      EXPECT_EQ(le32(file, at + 4), (t % kPicosPerSecond) / kPicosPerNano);
      EXPECT_EQ(le32(file, at + 8), d.size() + link_bytes);
      EXPECT_EQ(le32(file, at + 12), d.size() + link_bytes);
      at += 16;
      if (link_bytes) {
        const Bytes eth(file.begin() + at, file.begin() + at + 14);
        EXPECT_EQ(eth, (Bytes{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x86, 0xDD}));
        at += 14;
      }
      EXPECT_EQ(Bytes(file.begin() + at, file.begin() + at + d.size()), d);
      at += d.size();
      t += kTimestampStep;
    }
    EXPECT_EQ(at, file.size());
  }
}

TEST(PcapWriter, write__snaplen_cuts_records_but_keeps_original_length) {
  TempDir dir;
  const fs::path path = dir / "snap.pcap";
  auto w = PcapWriter::open(path.string(), PcapLinkType::kEthernet, 64);
  ASSERT_TRUE(w.has_value());
  const Bytes d = encode_or_die(every_packet_type()[0]);
  ASSERT_TRUE(w->write(0, d).has_value());
  ASSERT_TRUE(w->close().has_value());
  const Bytes file = read_file(path);
  EXPECT_EQ(le32(file, 16), 64u);
  EXPECT_EQ(le32(file, 24 + 8), 64u);
  EXPECT_EQ(le32(file, 24 + 12), d.size() + 14);
  EXPECT_EQ(file.size(), 24u + 16 + 64);
}

TEST(PcapWriter, open__errors) {
  EXPECT_EQ(PcapWriter::open("/nonexistent-dir/x.pcap").error(), Error::kIoError);
  TempDir dir;
  EXPECT_EQ(PcapWriter::open((dir / "a.pcap").string(), PcapLinkType::kRaw, 0).error(),
            Error::kInvalidArgument);
  auto w = PcapWriter::open((dir / "b.pcap").string());
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->write(0, Bytes(65536)).error(), Error::kTooBig);
  PcapWriter moved = std::move(*w);
  EXPECT_EQ(w->write(0, Bytes(100)).error(), Error::kIoError) << "moved-from writer";
  EXPECT_TRUE(moved.write(0, Bytes(100)).has_value());
  EXPECT_TRUE(moved.flush().has_value());
  EXPECT_TRUE(moved.close().has_value());
  EXPECT_EQ(moved.write(0, Bytes(100)).error(), Error::kIoError) << "closed writer";
  EXPECT_EQ(moved.flush().error(), Error::kIoError);
}

// ---------------------------------------------------------------------------------------------
// tshark

struct CommandOutput {
  int status = -1;
  std::string out;
  std::string err;
};

CommandOutput run(const std::string& command, const fs::path& stderr_file) {
  CommandOutput r;
  const std::string full = command + " 2>" + stderr_file.string();
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    r.out.append(buf, n);
  r.status = ::pclose(p);
  std::ifstream e(stderr_file);
  r.err.assign(std::istreambuf_iterator<char>(e), std::istreambuf_iterator<char>());
  return r;
}

// Fails the test (not skips) when tshark is missing: the dissector checks are part of CI.
bool require_tshark(const fs::path& scratch) {
  const CommandOutput v = run("tshark -v", scratch);
  if (v.status != 0 || v.out.find("TShark") == std::string::npos) {
    ADD_FAILURE() << "tshark is required for the pcap tests and was not found or failed (" << v.err
                  << "). Install it: apt-get install tshark";
    return false;
  }
  return true;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      parts.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  parts.push_back(cur);
  return parts;
}

// Runs tshark -T fields on `file`; one row per packet, one column per field, each column a
// list of values (repeated fields aggregated with ';').
std::vector<std::vector<std::vector<std::string>>> tshark_fields(
    const fs::path& file, const std::vector<std::string>& fields, const std::string& extra,
    const fs::path& scratch) {
  std::string cmd = "tshark " + extra + " -r '" + file.string() +
                    "' -T fields -E separator=, -E occurrence=a -E 'aggregator=;'";
  for (const std::string& f : fields)
    cmd += " -e " + f;
  const CommandOutput r = run(cmd, scratch);
  EXPECT_EQ(r.status, 0) << cmd << "\n" << r.err;
  std::vector<std::vector<std::vector<std::string>>> rows;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::vector<std::string>> row;
    for (const std::string& col : split(line, ',')) {
      row.push_back(col.empty() ? std::vector<std::string>{} : split(col, ';'));
    }
    EXPECT_EQ(row.size(), fields.size()) << line;
    rows.push_back(row);
  }
  return rows;
}

// Numeric value of a tshark field as printed ("0x000123", "4548489", "True"/"1").
uint64_t number(const std::string& s, int base = 0) {
  if (s == "True") return 1;
  if (s == "False") return 0;
  return std::strtoull(s.c_str(), nullptr, base);
}

using Expected = std::map<std::string, std::vector<uint64_t>>;

// Compares the rows with expectations keyed by field name; a field missing from an
// expectation must be absent.
void check_rows(const std::vector<std::vector<std::vector<std::string>>>& rows,
                const std::vector<std::string>& fields, const std::vector<Expected>& want,
                const std::map<std::string, int>& bases = {}) {
  ASSERT_EQ(rows.size(), want.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t f = 0; f < fields.size() && f < rows[i].size(); ++f) {
      std::vector<uint64_t> got;
      const auto base_it = bases.find(fields[f]);
      for (const std::string& v : rows[i][f]) {
        got.push_back(number(v, base_it == bases.end() ? 0 : base_it->second));
      }
      if (fields[f] == "infiniband.immdt" && got.size() == 2 && got[0] == got[1]) got.resize(1);
      const auto it = want[i].find(fields[f]);
      const std::vector<uint64_t> expected =
          it == want[i].end() ? std::vector<uint64_t>{} : it->second;
      EXPECT_EQ(got, expected) << "packet " << i + 1 << " field " << fields[f];
    }
  }
}

const std::vector<std::string> kRoceFields = {
    "infiniband.bth.opcode", "infiniband.bth.destqp",  "infiniband.bth.psn", "infiniband.reth.va",
    "infiniband.reth.r_key", "infiniband.reth.dmalen", "infiniband.immdt",   "ipv6.flow",
    "ipv6.routing.segleft",  "udp.checksum.status",    "infiniband.aeth.msn"};

Expected roce_expectation(const Datagram& d) {
  Expected e;
  const TransportPacket& p = d.pkt;
  e["infiniband.bth.opcode"] = {static_cast<uint8_t>(p.bth.opcode)};
  e["infiniband.bth.destqp"] = {p.bth.dest_qp};
  e["infiniband.bth.psn"] = {p.bth.psn};
  if (p.bth.opcode == Opcode::kWriteOnly || p.bth.opcode == Opcode::kWriteOnlyImm) {
    e["infiniband.reth.va"] = {p.reth.va};
    e["infiniband.reth.r_key"] = {p.reth.rkey};
    e["infiniband.reth.dmalen"] = {p.reth.dma_len};
  }
  // Wireshark 4.0 adds the ImmDt item twice (check_rows keeps the first).
  if (p.bth.opcode == Opcode::kWriteOnlyImm) e["infiniband.immdt"] = {p.imm};
  e["ipv6.flow"] = {d.ip.flow_label};
  if (d.has_srh) e["ipv6.routing.segleft"] = {d.srh.segments_left};
  e["udp.checksum.status"] = {1};  // "Good": Wireshark verified our checksum
  if (p.bth.opcode == Opcode::kAck) e["infiniband.aeth.msn"] = {p.aeth.msn};
  return e;
}

TEST(PcapTshark, rocev2_dissector__reads_every_packet_type) {
  TempDir dir;
  const fs::path scratch = dir / "stderr.txt";
  if (!require_tshark(scratch)) return;
  std::vector<Expected> want;
  for (const Datagram& d : every_packet_type())
    want.push_back(roce_expectation(d));
  for (PcapLinkType link : {PcapLinkType::kEthernet, PcapLinkType::kRaw}) {
    SCOPED_TRACE(link == PcapLinkType::kEthernet ? "ethernet" : "raw");
    const fs::path file = dir / "roce.pcap";
    write_capture(file, link);
    const auto rows = tshark_fields(file, kRoceFields, "-o udp.check_checksum:TRUE", scratch);
    check_rows(rows, kRoceFields, want, {{"infiniband.immdt", 16}});
  }
}

const std::vector<std::string> kMrcFields = {"mrc.opcode",
                                             "mrc.payload_len",
                                             "mrc.data.msg_num",
                                             "mrc.data.pkt_index",
                                             "mrc.data.pkt_count",
                                             "mrc.data.tx_time",
                                             "mrc.data.ev_index",
                                             "mrc.data.flags",
                                             "mrc.sack.cum_psn",
                                             "mrc.sack.base",
                                             "mrc.sack.sacked_psn",
                                             "mrc.sack.received_bytes",
                                             "mrc.sack.service_time",
                                             "mrc.sack.echo_count",
                                             "mrc.sack.echo.psn",
                                             "mrc.sack.echo.ev",
                                             "mrc.sack.echo.flags",
                                             "mrc.nack.syndrome",
                                             "mrc.nack.msn",
                                             "mrc.nack.psn",
                                             "mrc.nack.cum_psn",
                                             "mrc.nack.ev",
                                             "mrc.probe.id",
                                             "mrc.probe.tx_time",
                                             "mrc.probe.service_time",
                                             "mrc.probe.ev",
                                             "mrc.probe.port",
                                             "mrc.probe.flags",
                                             "mrc.probe.reply"};

Expected mrc_expectation(const Datagram& d) {
  Expected e;
  const TransportPacket& p = d.pkt;
  e["mrc.opcode"] = {static_cast<uint8_t>(p.bth.opcode)};
  e["mrc.payload_len"] = {p.payload_len};
  switch (p.bth.opcode) {
    case Opcode::kWriteOnly:
    case Opcode::kWriteOnlyImm:
      e["mrc.data.msg_num"] = {p.data.msg_num};
      e["mrc.data.pkt_index"] = {p.data.pkt_index};
      e["mrc.data.pkt_count"] = {p.data.pkt_count};
      e["mrc.data.tx_time"] = {p.data.tx_time_ps};
      e["mrc.data.ev_index"] = {p.data.ev_index};
      e["mrc.data.flags"] = {p.data.flags};
      break;
    case Opcode::kAck: {
      const SackExt& s = p.sack;
      e["mrc.sack.cum_psn"] = {s.cum_psn};
      e["mrc.sack.base"] = {s.sack_base};
      // Bit i of word w acknowledges base + 64 w + i; the dissector lists them in wire order
      // (word 0 first, most significant byte first, low bit first within a byte).
      std::vector<uint64_t> sacked;
      for (int w = 0; w < kSackBitmapWords; ++w) {
        for (int byte = 7; byte >= 0; --byte) {
          for (int bit = 0; bit < 8; ++bit) {
            const int i = byte * 8 + bit;
            if (s.bitmap[w] >> i & 1) sacked.push_back((s.sack_base + 64 * w + i) & kMax24);
          }
        }
      }
      e["mrc.sack.sacked_psn"] = sacked;
      e["mrc.sack.received_bytes"] = {s.received_bytes};
      e["mrc.sack.service_time"] = {s.service_time_ns};
      e["mrc.sack.echo_count"] = {s.echo_count};
      for (int i = 0; i < s.echo_count; ++i) {
        e["mrc.sack.echo.psn"].push_back(s.echo[i].psn);
        e["mrc.sack.echo.ev"].push_back(s.echo[i].ev_index);
        e["mrc.sack.echo.flags"].push_back(s.echo[i].flags);
      }
      break;
    }
    case Opcode::kTrimNack:
      e["mrc.nack.syndrome"] = {p.aeth.syndrome};
      e["mrc.nack.msn"] = {p.aeth.msn};
      e["mrc.nack.psn"] = {p.nack.psn};
      e["mrc.nack.cum_psn"] = {p.nack.cum_psn};
      e["mrc.nack.ev"] = {p.nack.ev_index};
      break;
    case Opcode::kProbe:
    case Opcode::kProbeReply:
      e["mrc.probe.id"] = {p.probe.probe_id};
      e["mrc.probe.tx_time"] = {p.probe.tx_time_ps};
      e["mrc.probe.service_time"] = {p.probe.service_time_ns};
      e["mrc.probe.ev"] = {p.probe.ev_index};
      e["mrc.probe.port"] = {p.probe.port};
      e["mrc.probe.flags"] = {p.probe.flags};
      e["mrc.probe.reply"] = {p.bth.opcode == Opcode::kProbeReply ? 1u : 0u};
      break;
    case Opcode::kCnp:
      break;
  }
  return e;
}

TEST(PcapTshark, mrc_lua_dissector__reads_every_extension) {
  TempDir dir;
  const fs::path scratch = dir / "stderr.txt";
  if (!require_tshark(scratch)) return;
  const fs::path lua = fs::path(MRC_SOURCE_DIR) / "tools" / "wireshark" / "mrc.lua";
  ASSERT_TRUE(fs::exists(lua)) << lua;
  std::vector<Expected> want;
  for (const Datagram& d : every_packet_type())
    want.push_back(mrc_expectation(d));
  for (PcapLinkType link : {PcapLinkType::kEthernet, PcapLinkType::kRaw}) {
    SCOPED_TRACE(link == PcapLinkType::kEthernet ? "ethernet" : "raw");
    const fs::path file = dir / "mrc.pcap";
    write_capture(file, link);
    const auto rows =
        tshark_fields(file, kMrcFields, "-X lua_script:'" + lua.string() + "'", scratch);
    check_rows(rows, kMrcFields, want);
    // The script must load and run cleanly (Lua errors only show up on stderr).
    const Bytes err = read_file(scratch);
    const std::string err_text(err.begin(), err.end());
    EXPECT_EQ(err_text.find("Lua"), std::string::npos) << err_text;
    EXPECT_EQ(err_text.find("rror"), std::string::npos) << err_text;
  }
}

// With the preference mrc.auth_trailer the dissector takes the 24-byte authentication trailer
// (docs/wire-format.md section 13) off the end of every datagram: it shows the counter and
// decodes what is before it exactly as without a trailer.
TEST(PcapTshark, mrc_lua_dissector__shows_the_authentication_trailer_when_told) {
  TempDir dir;
  const fs::path scratch = dir / "stderr.txt";
  if (!require_tshark(scratch)) return;
  const fs::path lua = fs::path(MRC_SOURCE_DIR) / "tools" / "wireshark" / "mrc.lua";
  const fs::path file = dir / "sealed.pcap";
  std::vector<Expected> want;
  {
    auto writer = PcapWriter::open(file.string(), PcapLinkType::kRaw);
    ASSERT_TRUE(writer.has_value());
    Time t = kFirstTimestamp;
    uint64_t counter = 0x0102030405060700;
    for (const Datagram& d : every_packet_type()) {
      want.push_back(mrc_expectation(d));
      Bytes b = encode_or_die(d);
      // The trailer, and the IPv6 payload and UDP lengths that include it.
      for (int i = 7; i >= 0; --i)
        b.push_back(static_cast<uint8_t>(counter >> (8 * i)));
      b.insert(b.end(), 16, 0xAB);
      const size_t udp =
          b[6] == kIpProtoUdp ? kIpv6HeaderBytes : kIpv6HeaderBytes + 8 + 8 * size_t{b[41]};
      const auto add = [&](size_t at) {
        const uint16_t v = static_cast<uint16_t>((b[at] << 8 | b[at + 1]) + kAuthTrailerBytes);
        b[at] = static_cast<uint8_t>(v >> 8);
        b[at + 1] = static_cast<uint8_t>(v);
      };
      add(4);
      add(udp + 4);
      ASSERT_TRUE(writer->write(t, b).has_value());
      t += kTimestampStep;
      ++counter;
    }
    ASSERT_TRUE(writer->close().has_value());
  }
  const std::string opts = "-X lua_script:'" + lua.string() + "' -o mrc.auth_trailer:TRUE";
  check_rows(tshark_fields(file, kMrcFields, opts, scratch), kMrcFields, want);
  const auto counters = tshark_fields(file, {"mrc.auth.counter"}, opts, scratch);
  ASSERT_EQ(counters.size(), want.size());
  for (size_t i = 0; i < counters.size(); ++i) {
    ASSERT_EQ(counters[i][0].size(), 1u) << "packet " << i;
    EXPECT_EQ(std::stoull(counters[i][0][0], nullptr, 0), 0x0102030405060700ull + i) << i;
  }
  const Bytes err = read_file(scratch);
  const std::string err_text(err.begin(), err.end());
  EXPECT_EQ(err_text.find("rror"), std::string::npos) << err_text;
}

}  // namespace
}  // namespace mrc::wire
