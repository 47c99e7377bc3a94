#include "net/packet_auth.h"

#include <nettle/curve25519.h>
#include <nettle/hkdf.h>
#include <nettle/hmac.h>
#include <nettle/memops.h>
#include <openssl/evp.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "net/secure_random.h"

namespace mrc::net {
namespace {

// HKDF-SHA256's info strings: one derivation per protocol version, each direction its own.
constexpr std::string_view kKeysLabel = "mrc packet keys v1";

void put64(uint8_t* p, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8)
    p[i] = static_cast<uint8_t>(v);
}

uint64_t get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v = v << 8 | p[i];
  return v;
}

constexpr size_t kNonceBytes = kAuthSaltBytes + kAuthCounterBytes;  // GCM's 96-bit IV

// The GCM nonce of `counter` under `salt`: salt (4) | counter (8).
std::array<uint8_t, kNonceBytes> nonce_of(const std::array<uint8_t, kAuthSaltBytes>& salt,
                                          uint64_t counter) {
  std::array<uint8_t, kNonceBytes> iv{};
  std::memcpy(iv.data(), salt.data(), kAuthSaltBytes);
  put64(iv.data() + kAuthSaltBytes, counter);
  return iv;
}

}  // namespace

std::string_view auth_mode_name(AuthMode mode) {
  switch (mode) {
    case AuthMode::kOff:
      return "off";
    case AuthMode::kAuthenticate:
      return "auth";
    case AuthMode::kEncrypt:
      return "encrypt";
  }
  return "?";
}

uint8_t hello_auth_flags(AuthMode mode) {
  switch (mode) {
    case AuthMode::kOff:
      return 0;
    case AuthMode::kAuthenticate:
      return kHelloAuth;
    case AuthMode::kEncrypt:
      return kHelloAuth | kHelloEncrypt;
  }
  return 0;
}

std::optional<AuthMode> hello_auth_mode(uint8_t flags) {
  const bool auth = flags & kHelloAuth, encrypt = flags & kHelloEncrypt;
  if (encrypt && !auth) return std::nullopt;
  return encrypt ? AuthMode::kEncrypt : auth ? AuthMode::kAuthenticate : AuthMode::kOff;
}

std::string_view open_error_name(OpenError e) {
  switch (e) {
    case OpenError::kShort:
      return "no authentication trailer";
    case OpenError::kBadTag:
      return "authentication tag wrong";
    case OpenError::kReplayed:
      return "counter already accepted (replay)";
    case OpenError::kTooOld:
      return "counter below the replay window";
  }
  return "?";
}

NetResult<KeyShare> make_key_share() {
  KeyShare k;
  if (auto st = secure_random_bytes(k.secret); !st) return std::unexpected(st.error());
  curve25519_mul_g(k.pub.data(), k.secret.data());  // clamps the scalar itself (RFC 7748)
  return k;
}

NetResult<PacketKeys> derive_packet_keys(const Psk& psk, std::span<const uint8_t> challenge,
                                         const PskTag& client_tag, const KeyShare& mine,
                                         std::span<const uint8_t> peer_pub, HelloRole role) {
  if (peer_pub.size() != kKeyShareBytes)
    return net_fail(NetErrc::kRefused,
                    "the peer's key share is not " + std::to_string(kKeyShareBytes) + " bytes");
  std::array<uint8_t, kKeyShareBytes> shared{};
  curve25519_mul(shared.data(), mine.secret.data(), peer_pub.data());
  const std::array<uint8_t, kKeyShareBytes> zero{};
  if (memeql_sec(shared.data(), zero.data(), shared.size()))
    return net_fail(NetErrc::kRefused, "the peer's key share is a low-order point");

  // PRK = HKDF-Extract(salt = challenge, IKM = shared secret | pre-shared key): without the
  // pre-shared key the keys cannot be computed even by whoever chose a key share.
  hmac_sha256_ctx mac;
  hmac_sha256_set_key(&mac, challenge.size(), challenge.data());
  std::array<uint8_t, SHA256_DIGEST_SIZE> prk{};
  {
    std::vector<uint8_t> ikm(shared.begin(), shared.end());
    ikm.insert(ikm.end(), psk.key.begin(), psk.key.end());
    hkdf_extract(&mac, reinterpret_cast<nettle_hash_update_func*>(hmac_sha256_update),
                 reinterpret_cast<nettle_hash_digest_func*>(hmac_sha256_digest), SHA256_DIGEST_SIZE,
                 ikm.size(), ikm.data(), prk.data());
    std::fill(ikm.begin(), ikm.end(), uint8_t{0});
  }
  // OKM = HKDF-Expand(PRK, label | client tag | both public keys): client->server key and
  // salt, then server->client.
  std::vector<uint8_t> info(kKeysLabel.begin(), kKeysLabel.end());
  info.insert(info.end(), client_tag.begin(), client_tag.end());
  const std::span<const uint8_t> own(mine.pub);
  const std::span<const uint8_t> client_pub = role == HelloRole::kClient ? own : peer_pub;
  const std::span<const uint8_t> server_pub = role == HelloRole::kClient ? peer_pub : own;
  info.insert(info.end(), client_pub.begin(), client_pub.end());
  info.insert(info.end(), server_pub.begin(), server_pub.end());
  std::array<uint8_t, 2 * (kAuthKeyBytes + kAuthSaltBytes)> okm{};
  hmac_sha256_set_key(&mac, prk.size(), prk.data());
  hkdf_expand(&mac, reinterpret_cast<nettle_hash_update_func*>(hmac_sha256_update),
              reinterpret_cast<nettle_hash_digest_func*>(hmac_sha256_digest), SHA256_DIGEST_SIZE,
              info.size(), info.data(), okm.size(), okm.data());
  DirectionKey to_server, to_client;
  const uint8_t* p = okm.data();
  std::memcpy(to_server.key.data(), p, kAuthKeyBytes);
  std::memcpy(to_server.salt.data(), p + kAuthKeyBytes, kAuthSaltBytes);
  p += kAuthKeyBytes + kAuthSaltBytes;
  std::memcpy(to_client.key.data(), p, kAuthKeyBytes);
  std::memcpy(to_client.salt.data(), p + kAuthKeyBytes, kAuthSaltBytes);
  std::fill(okm.begin(), okm.end(), uint8_t{0});
  std::fill(prk.begin(), prk.end(), uint8_t{0});
  std::fill(shared.begin(), shared.end(), uint8_t{0});
  if (role == HelloRole::kClient) return PacketKeys{to_server, to_client};
  return PacketKeys{to_client, to_server};
}

}  // namespace mrc::net

struct mrc::net::GcmContext {
  EVP_CIPHER_CTX* evp = EVP_CIPHER_CTX_new();
  ~GcmContext() { EVP_CIPHER_CTX_free(evp); }
};

namespace mrc::net {

void GcmContextFree::operator()(GcmContext* c) const {
  delete c;
}

namespace {

// A context holding `key`'s schedule, for sealing (encrypt) or opening (decrypt). A context
// that failed to set up fails every packet (seal returns 0, open kBadTag): never silently
// unauthenticated.
GcmContextPtr gcm_context(const DirectionKey& key, bool seal) {
  GcmContextPtr c(new GcmContext);
  if (!c->evp) return c;
  const int ok =
      seal ? EVP_EncryptInit_ex(c->evp, EVP_aes_128_gcm(), nullptr, key.key.data(), nullptr)
           : EVP_DecryptInit_ex(c->evp, EVP_aes_128_gcm(), nullptr, key.key.data(), nullptr);
  if (ok != 1) {
    EVP_CIPHER_CTX_free(c->evp);
    c->evp = nullptr;
  }
  return c;
}

// Feeds `len` bytes as additional data (out == nullptr) or as text to en/decrypt into `out`.
bool gcm_update(EVP_CIPHER_CTX* evp, bool seal, uint8_t* out, const uint8_t* in, size_t len) {
  int n = 0;
  if (len == 0) return true;
  const int l = static_cast<int>(len);
  return (seal ? EVP_EncryptUpdate(evp, out, &n, in, l) : EVP_DecryptUpdate(evp, out, &n, in, l)) ==
         1;
}

}  // namespace

PacketSealer::PacketSealer(const DirectionKey& key, AuthMode mode)
    : ctx_(gcm_context(key, true)), salt_(key.salt), mode_(mode) {}

bool PacketSealer::seal_pieces(std::initializer_list<std::span<const uint8_t>> pieces,
                               uint8_t* trailer) {
  EVP_CIPHER_CTX* evp = ctx_->evp;
  if (!evp || mode_ == AuthMode::kEncrypt) return false;
  const uint64_t counter = next_counter_++;
  const auto iv = nonce_of(salt_, counter);
  if (EVP_EncryptInit_ex(evp, nullptr, nullptr, nullptr, iv.data()) != 1) return false;
  for (std::span<const uint8_t> piece : pieces)
    if (!gcm_update(evp, true, nullptr, piece.data(), piece.size())) return false;
  int n = 0;
  if (EVP_EncryptFinal_ex(evp, trailer, &n) != 1) return false;
  put64(trailer, counter);
  return EVP_CIPHER_CTX_ctrl(evp, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(kAuthTagBytes),
                             trailer + kAuthCounterBytes) == 1;
}

size_t PacketSealer::seal(uint8_t* packet, size_t len) {
  if (mode_ != AuthMode::kEncrypt)
    return seal_pieces({std::span<const uint8_t>(packet, len)}, packet + len)
               ? len + kAuthTrailerBytes
               : 0;
  EVP_CIPHER_CTX* evp = ctx_->evp;
  if (!evp) return 0;
  const uint64_t counter = next_counter_++;
  const auto iv = nonce_of(salt_, counter);
  uint8_t* trailer = packet + len;
  int n = 0;
  if (EVP_EncryptInit_ex(evp, nullptr, nullptr, nullptr, iv.data()) != 1 ||
      !gcm_update(evp, true, packet, packet, len) || EVP_EncryptFinal_ex(evp, trailer, &n) != 1)
    return 0;
  put64(trailer, counter);
  if (EVP_CIPHER_CTX_ctrl(evp, EVP_CTRL_AEAD_GET_TAG, static_cast<int>(kAuthTagBytes),
                          trailer + kAuthCounterBytes) != 1)
    return 0;
  return len + kAuthTrailerBytes;
}

ReplayWindow::Verdict ReplayWindow::check(uint64_t counter) const {
  if (!any_ || counter > highest_) return Verdict::kNew;
  if (highest_ - counter >= kReplayWindow) return Verdict::kTooOld;
  const uint64_t bit = counter % kReplayWindow;
  return (bits_[bit / 64] >> (bit % 64)) & 1 ? Verdict::kRepeat : Verdict::kNew;
}

void ReplayWindow::accept(uint64_t counter) {
  if (!any_ || counter > highest_) {
    // Counters (highest, counter) leave the window's memory: their bits become the new ones.
    const uint64_t from = any_ ? highest_ + 1 : 0;
    if (!any_ || counter - from >= kReplayWindow) {
      bits_.fill(0);
    } else {
      for (uint64_t c = from; c < counter; ++c) {
        const uint64_t bit = c % kReplayWindow;
        bits_[bit / 64] &= ~(uint64_t{1} << (bit % 64));
      }
    }
    highest_ = counter;
    any_ = true;
  }
  const uint64_t bit = counter % kReplayWindow;
  bits_[bit / 64] |= uint64_t{1} << (bit % 64);
}

PacketOpener::PacketOpener(const DirectionKey& key, AuthMode mode)
    : ctx_(gcm_context(key, false)), salt_(key.salt), mode_(mode) {}

std::expected<size_t, OpenError> PacketOpener::open(uint8_t* datagram, size_t len) {
  if (len < kAuthTrailerBytes) return std::unexpected(OpenError::kShort);
  const size_t body = len - kAuthTrailerBytes;
  uint8_t* trailer = datagram + body;
  const uint64_t counter = get64(trailer);
  EVP_CIPHER_CTX* evp = ctx_->evp;
  const auto iv = nonce_of(salt_, counter);
  const bool encrypted = mode_ == AuthMode::kEncrypt;
  int n = 0;
  // The tag before the window: a datagram is a replay only if it is authentic (a forgery whose
  // bytes happen to name an old counter is a forgery), and a forgery costs the same GCM work
  // whatever counter it names. EVP_DecryptFinal_ex compares the tags in constant time.
  if (!evp || EVP_DecryptInit_ex(evp, nullptr, nullptr, nullptr, iv.data()) != 1 ||
      !gcm_update(evp, false, encrypted ? datagram : nullptr, datagram, body) ||
      EVP_CIPHER_CTX_ctrl(evp, EVP_CTRL_AEAD_SET_TAG, static_cast<int>(kAuthTagBytes),
                          trailer + kAuthCounterBytes) != 1 ||
      EVP_DecryptFinal_ex(evp, trailer, &n) != 1)
    return std::unexpected(OpenError::kBadTag);
  switch (window_.check(counter)) {
    case ReplayWindow::Verdict::kRepeat:
      return std::unexpected(OpenError::kReplayed);
    case ReplayWindow::Verdict::kTooOld:
      return std::unexpected(OpenError::kTooOld);
    case ReplayWindow::Verdict::kNew:
      break;
  }
  window_.accept(counter);
  return body;
}

}  // namespace mrc::net
