#include "net/psk.h"

#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <sys/stat.h>

#include <fstream>
#include <iterator>

#include "net/hello.h"
#include "net/secure_random.h"

namespace mrc::net {
namespace {

constexpr std::string_view kClientLabel = "mrc client";
constexpr std::string_view kServerLabel = "mrc server";

std::span<const uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

bool is_challenge(std::span<const uint8_t> c) {
  return c.size() == 4 + kChallengeBytes && c[0] == 'M' && c[1] == 'R' && c[2] == 'C' &&
         c[3] == 'C';
}

NetResult<SignedHello> split_tagged(const Psk& psk, std::span<const uint8_t> frame,
                                    std::initializer_list<std::span<const uint8_t>> head,
                                    const char* who, PskTag* tag_out) {
  if (frame.size() < kKeyShareBytes + kPskTagBytes)
    return net_fail(NetErrc::kRefused, std::string(who) + " sent no shared-secret tag (--psk)");
  const auto body = frame.first(frame.size() - kPskTagBytes);
  const auto tag = frame.last(kPskTagBytes);
  hmac_sha256_ctx ctx;
  hmac_sha256_set_key(&ctx, psk.key.size(), psk.key.data());
  for (auto p : head)
    hmac_sha256_update(&ctx, p.size(), p.data());
  hmac_sha256_update(&ctx, body.size(), body.data());
  PskTag want{};
  hmac_sha256_digest(&ctx, want.size(), want.data());
  if (!psk_tag_equal(tag, want))
    return net_fail(NetErrc::kRefused,
                    std::string(who) + "'s shared-secret tag is wrong: the two --psk differ");
  if (tag_out) std::copy(tag.begin(), tag.end(), tag_out->begin());
  SignedHello out;
  const auto hello = body.first(body.size() - kKeyShareBytes);
  out.hello.assign(hello.begin(), hello.end());
  const auto share = body.last(kKeyShareBytes);
  std::copy(share.begin(), share.end(), out.key_share.begin());
  return out;
}

// `hello` | `key_share` | `tag`.
std::vector<uint8_t> tagged_frame(std::span<const uint8_t> hello, const KeySharePub& key_share,
                                  const PskTag& tag) {
  std::vector<uint8_t> out(hello.begin(), hello.end());
  out.insert(out.end(), key_share.begin(), key_share.end());
  out.insert(out.end(), tag.begin(), tag.end());
  return out;
}

}  // namespace

NetResult<Psk> load_psk(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return errno_fail("--psk " + path, errno);
  if (st.st_mode & (S_IRWXG | S_IRWXO))
    return net_fail(NetErrc::kInvalidArgument,
                    "--psk " + path + " is accessible to others than its owner (chmod 600 it)");
  std::ifstream in(path, std::ios::binary);
  if (!in) return net_fail(NetErrc::kInvalidArgument, "cannot read --psk " + path);
  Psk p;
  p.key.assign(std::istreambuf_iterator<char>(in), {});
  if (p.key.size() > 4096)
    return net_fail(NetErrc::kInvalidArgument, "--psk " + path + " is above 4 KiB");
  while (!p.key.empty() && (p.key.back() == '\n' || p.key.back() == '\r'))
    p.key.pop_back();
  if (p.key.size() < kPskMinBytes)
    return net_fail(NetErrc::kInvalidArgument, "--psk " + path + " holds fewer than " +
                                                   std::to_string(kPskMinBytes) + " bytes");
  return p;
}

PskTag psk_tag(const Psk& psk, std::initializer_list<std::span<const uint8_t>> parts) {
  hmac_sha256_ctx ctx;
  hmac_sha256_set_key(&ctx, psk.key.size(), psk.key.data());
  for (auto p : parts)
    hmac_sha256_update(&ctx, p.size(), p.data());
  PskTag out{};
  hmac_sha256_digest(&ctx, out.size(), out.data());
  return out;
}

bool psk_tag_equal(std::span<const uint8_t> received, const PskTag& expected) {
  return received.size() == expected.size() &&
         memeql_sec(received.data(), expected.data(), expected.size()) != 0;
}

NetResult<std::vector<uint8_t>> make_challenge() {
  std::vector<uint8_t> c = {'M', 'R', 'C', 'C'};
  c.resize(4 + kChallengeBytes);
  if (auto st = secure_random_bytes(std::span(c).subspan(4)); !st)
    return std::unexpected(st.error());
  return c;
}

NetResult<std::vector<uint8_t>> sign_client_hello(const Psk& psk,
                                                  std::span<const uint8_t> challenge,
                                                  std::span<const uint8_t> hello,
                                                  const KeySharePub& key_share,
                                                  PskTag& client_tag) {
  if (!is_challenge(challenge))
    return net_fail(NetErrc::kRefused,
                    "the server sent no challenge: it runs without --psk (or is not mrc-perf)");
  client_tag = psk_tag(psk, {bytes_of(kClientLabel), challenge, hello, key_share});
  return tagged_frame(hello, key_share, client_tag);
}

NetResult<SignedHello> open_client_hello(const Psk& psk, std::span<const uint8_t> challenge,
                                         std::span<const uint8_t> frame, PskTag& client_tag) {
  return split_tagged(psk, frame, {bytes_of(kClientLabel), challenge}, "the client", &client_tag);
}

std::vector<uint8_t> sign_server_hello(const Psk& psk, std::span<const uint8_t> challenge,
                                       const PskTag& client_tag, std::span<const uint8_t> hello,
                                       const KeySharePub& key_share) {
  const PskTag tag =
      psk_tag(psk, {bytes_of(kServerLabel), challenge, client_tag, hello, key_share});
  return tagged_frame(hello, key_share, tag);
}

NetResult<SignedHello> open_server_hello(const Psk& psk, std::span<const uint8_t> challenge,
                                         const PskTag& client_tag, std::span<const uint8_t> frame) {
  return split_tagged(psk, frame, {bytes_of(kServerLabel), challenge, client_tag}, "the server",
                      nullptr);
}

}  // namespace mrc::net
