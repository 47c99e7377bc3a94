#include "wire/pcap.h"

#include <cstring>
#include <utility>

#include "common/be_codec.h"

namespace mrc::wire {
namespace {

// pcap headers are written in the writer's byte order; readers detect it from the magic. We
// always write little-endian (put_le16, put_le32), so files are identical on every host.

constexpr uint32_t kMagicNanoseconds = 0xA1B23C4D;
constexpr size_t kEthernetHeaderBytes = 14;
constexpr uint8_t kEthernetHeader[kEthernetHeaderBytes] = {
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02,  // destination: locally administered
    0x02, 0x00, 0x00, 0x00, 0x00, 0x01,  // source
    0x86, 0xDD,                          // EtherType IPv6
};

}  // namespace

Result<PcapWriter> PcapWriter::open(const std::string& path, PcapLinkType link, uint32_t snaplen) {
  if (snaplen == 0) return fail(Error::kInvalidArgument);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return fail(Error::kIoError);
  uint8_t header[24];
  put_le32(header, kMagicNanoseconds);
  put_le16(header + 4, 2);  // version 2.4
  put_le16(header + 6, 4);
  put_le32(header + 8, 0);   // thiszone (reserved)
  put_le32(header + 12, 0);  // sigfigs (reserved)
  put_le32(header + 16, snaplen);
  put_le32(header + 20, static_cast<uint32_t>(link));
  if (std::fwrite(header, sizeof header, 1, f) != 1) {
    std::fclose(f);
    return fail(Error::kIoError);
  }
  return PcapWriter(f, link, snaplen);
}

Status PcapWriter::write(Time ps_timestamp, std::span<const uint8_t> datagram) {
  if (file_ == nullptr) return fail(Error::kIoError);
  if (datagram.size() > 0xFFFF) return fail(Error::kTooBig);
  const bool ethernet = link_ == PcapLinkType::kEthernet;
  const size_t link_bytes = ethernet ? kEthernetHeaderBytes : 0;
  const uint32_t orig_len = static_cast<uint32_t>(link_bytes + datagram.size());
  const uint32_t incl_len = orig_len < snaplen_ ? orig_len : snaplen_;
  const Time ns_total = ps_timestamp / kPicosPerNano;
  uint8_t record[16];
  put_le32(record, static_cast<uint32_t>(ns_total / 1'000'000'000));
  put_le32(record + 4, static_cast<uint32_t>(ns_total % 1'000'000'000));
  put_le32(record + 8, incl_len);
  put_le32(record + 12, orig_len);
  bool ok = std::fwrite(record, sizeof record, 1, file_) == 1;
  size_t remaining = incl_len;
  if (ok && ethernet) {
    const size_t n = remaining < link_bytes ? remaining : link_bytes;
    ok = std::fwrite(kEthernetHeader, 1, n, file_) == n;
    remaining -= n;
  }
  if (ok && remaining > 0) ok = std::fwrite(datagram.data(), 1, remaining, file_) == remaining;
  if (!ok) return fail(Error::kIoError);
  ++records_;
  return {};
}

Status PcapWriter::flush() {
  if (file_ == nullptr || std::fflush(file_) != 0) return fail(Error::kIoError);
  return {};
}

Status PcapWriter::close() {
  if (file_ == nullptr) return {};
  const bool ok = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!ok) return fail(Error::kIoError);
  return {};
}

PcapWriter::PcapWriter(PcapWriter&& other) noexcept
    : file_(std::exchange(other.file_, nullptr)),
      link_(other.link_),
      snaplen_(other.snaplen_),
      records_(other.records_) {}

PcapWriter& PcapWriter::operator=(PcapWriter&& other) noexcept {
  if (this != &other) {
    if (file_ != nullptr) std::fclose(file_);
    file_ = std::exchange(other.file_, nullptr);
    link_ = other.link_;
    snaplen_ = other.snaplen_;
    records_ = other.records_;
  }
  return *this;
}

PcapWriter::~PcapWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

}  // namespace mrc::wire
