// A reliable-datagram endpoint over one MRC engine: what the libfabric provider's FI_EP_RDM
// endpoint does, without libfabric and without I/O (docs/libfabric.md, "Protocol").
//
// Peers are named by EndpointName (fi/fi_proto.h). The first operation towards a peer, or a
// connect request from it, creates an RC QP for it and runs the setup exchange over the setup
// port; operations wait until the QP is ready. Messages travel as WRITE_IMMs into slots of a
// ring the receiver registered for the sender: eager up to a slot's payload, rendezvous (RTS,
// CTS, the data written straight into the receive buffer, FIN once that data is acknowledged)
// above it. Receives match in posting order on (peer, tagged, tag under the ignore mask),
// arrivals that find no receive wait in order as unexpected messages; per peer, messages are
// matched in the order sent (MRC completes WRITE_IMMs in order, and slots are consumed in
// sequence).
//
// Sans-IO like the engine it drives: the caller feeds the engine's completions
// (on_engine_completion), setup datagrams (on_setup_datagram) and time (on_timer at
// next_deadline()); it sends what the endpoint asks through Io; the endpoint never reads a
// clock or a socket. Completions for the user come out of poll_completion.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "fi/fi_proto.h"
#include "net/session.h"
#include "transport/engine.h"

namespace mrc::fi {

using net::NetResult;
using net::NetStatus;

// Why an operation failed (libfabric's codes, positive; the provider negates where it must).
enum class OpError : uint8_t {
  kNone = 0,
  kTruncated,    // FI_ETRUNC: the message was longer than the receive buffer
  kCanceled,     // FI_ECANCELED: fi_cancel
  kPeerFailed,   // FI_EIO: the connection failed (retries exhausted, peer gone)
  kUnreachable,  // FI_EHOSTUNREACH: the peer never answered the connection setup
  kRejected,     // FI_ECONNREFUSED: the peer refused the connection
  kNoMessage,    // FI_ENOMSG: a peek found no matching message
};
const char* op_error_text(OpError e);

// What ended a connection: its first error. What follows it on the same connection is a
// consequence and is not reported as a cause: once the engine moves a QP to ERR it completes
// the oldest send WR with the status that did it and flushes every other WR and receive.
enum class FailureCause : uint8_t {
  kNone = 0,
  kRetryExceeded,     // engine: the ACK timeout expired more often than the retry budget allows
  kAckContradiction,  // engine: an ACK contradicted an earlier one
  kFlushed,           // engine: a WR flushed with no error completion before it on the QP
  kQpError,           // engine: the QP entered ERR (Event) with no completion saying why
  kProtocol,          // the peer broke the endpoint's protocol (slot order, unknown cookie)
  kLocalResource,     // registering memory or posting a WR failed here
  kSetupTimeout,      // no answer to the connection setup in time
  kSetupRejected,     // the peer refused the connection, or its settings differ from ours
  kSetupFailed,       // creating or readying the connection's QP failed here
};
inline constexpr uint8_t kFailureCauseCount = uint8_t(FailureCause::kSetupFailed) + 1;
const char* failure_cause_name(FailureCause c);

// A failed connection's first error, for the operations it fails and for a person.
struct PeerFailure {
  uint32_t peer = 0;
  OpError error = OpError::kNone;  // what the peer's operations complete with
  FailureCause cause = FailureCause::kNone;
  // The operation, its status, the peer and what the engine knows of the QP, e.g.
  // "peer 1 (mrc:[fd00::2]:4791;setup=20001): WRITE_IMM (eager message) failed: retry
  // exceeded (...)".
  std::string text;
  Time time = 0;
};

enum class OpKind : uint8_t { kSend, kRecv, kWrite, kRemoteData };

struct FiCompletion {
  void* context = nullptr;
  OpKind kind = OpKind::kSend;
  bool tagged = false;
  uint64_t len = 0;     // bytes received (recv) or sent
  void* buf = nullptr;  // recv: the receive buffer
  bool has_data = false;
  uint64_t data = 0;  // remote CQ data
  uint64_t tag = 0;
  // recv, remote data: the sender (RdmEndpoint's peer id); an operation failed with its
  // connection: that peer (RdmEndpoint::failure(peer) says why).
  uint32_t peer = 0;
  OpError error = OpError::kNone;
  FailureCause cause = FailureCause::kNone;  // for errors of a failed connection: its first
  uint64_t olen = 0;                         // truncated bytes
};

struct RdmConfig {
  net::SessionConfig session;   // EV mode, planes, MTU, windows, CC, random identifiers
  uint16_t ring_slots = 64;     // per peer and direction
  uint32_t slot_bytes = 16384;  // header + eager payload
  uint32_t max_peers = 1024;    // peers known at once (inserted or met)
  Time connect_retry = ms(20);
  Time connect_timeout = 10 * kPicosPerSecond;
  uint64_t max_message = 1ull << 32;  // libfabric's max_msg_size
  size_t eager_max() const { return slot_bytes - kSlotHeaderBytes; }
};

struct RdmCounters {
  uint64_t eager_sent = 0, rndv_sent = 0, received = 0, unexpected = 0;
  uint64_t setup_sent = 0, setup_received = 0, setup_bad = 0, setup_rejected = 0;
  uint64_t bad_slot = 0;  // a slot out of sequence or with a bad header (dropped)
  uint64_t credit_messages = 0;
  uint64_t peers_failed = 0;
};

class RdmEndpoint {
 public:
  // What the endpoint needs from the world: the driver told where a peer listens (returns the
  // engine's peer handle, QpAttr::peer), and setup datagrams sent.
  class Io {
   public:
    virtual ~Io() = default;
    virtual NetResult<uint32_t> bind_peer(const EndpointName& name) = 0;
    virtual void send_setup(const EndpointName& to, std::span<const uint8_t> datagram) = 0;
  };

  static NetResult<std::unique_ptr<RdmEndpoint>> create(Engine& engine, Io& io,
                                                        const RdmConfig& config,
                                                        const EndpointName& self);
  ~RdmEndpoint();

  const EndpointName& name() const { return self_; }
  const RdmConfig& config() const { return config_; }
  const RdmCounters& counters() const { return counters_; }
  // Why a peer's connection failed: its first error (nullptr while it has not failed).
  const PeerFailure* failure(uint32_t peer) const;
  // Each connection failure once, in the order they happened, for a log.
  bool poll_failure(PeerFailure& out);

  // The address vector: a peer id per name (the same name gives the same id).
  Result<uint32_t> insert_peer(const EndpointName& name);
  const EndpointName* peer_name(uint32_t peer) const;
  // A peer met through its connect request before the user inserted it has an id too.
  std::optional<uint32_t> find_peer(const EndpointName& name) const;

  // Operations. `context` comes back in the completion. Errors are values, nothing queued:
  // kInvalidArgument (bad peer, length over max_message), kQueueFull.
  Status send(Time now, uint32_t peer, const void* buf, uint64_t len, bool tagged, uint64_t tag,
              std::optional<uint64_t> data, void* context);
  // `peer` nullopt: from any peer. Tagged receives match (tag & ~ignore) == (msg & ~ignore).
  Status recv(Time now, std::optional<uint32_t> peer, void* buf, uint64_t len, bool tagged,
              uint64_t tag, uint64_t ignore, void* context);
  // RDMA write of [buf, buf+len) to the peer's (addr, key); `data` also raises a remote CQ
  // entry there once the data is placed.
  Status write(Time now, uint32_t peer, const void* buf, uint64_t len, uint64_t addr, uint32_t key,
               std::optional<uint64_t> data, void* context);
  // FI_PEEK: completes at once, with the length, tag and data of the first unclaimed arrived
  // message that a receive with these arguments would match (the message stays), or with
  // kNoMessage. With `claim` (FI_CLAIM) that message is set aside for recv_claimed(context).
  Status peek(std::optional<uint32_t> peer, uint64_t tag, uint64_t ignore, void* context,
              bool claim);
  // Receives the message peek(..., claim) set aside under `context`, into [buf, buf+len), or
  // with `discard` (FI_DISCARD) drops it (a zero-length completion). kInvalidArgument when
  // nothing is claimed under `context`.
  Status recv_claimed(Time now, void* context, void* buf, uint64_t len, bool discard);
  // Cancels a receive not yet matched (completes it with kCanceled); false if there is none
  // with that context.
  bool cancel(void* context);

  // Memory the peers may write (fi_mr_reg): the engine's keys.
  Result<MemoryKeys> register_memory(void* buf, uint64_t len, bool remote_write);
  Status deregister_memory(uint32_t lkey);

  // Inputs.
  void on_engine_completion(Time now, const Completion& c);
  // The engine's events: kQpError fails the QP's peer if no completion has said why already.
  void on_engine_event(Time now, const Event& e);
  void on_setup_datagram(Time now, std::span<const uint8_t> bytes);
  void on_timer(Time now);
  Time next_deadline() const;  // kNever when nothing waits

  bool poll_completion(FiCompletion& out);
  size_t completions_ready() const { return completions_.size(); }

 private:
  struct Peer;
  struct PendingSend;
  struct PostedRecv;
  struct Unexpected;
  struct WrRecord;

  RdmEndpoint(Engine& engine, Io& io, const RdmConfig& config, const EndpointName& self);
  NetStatus init();

  Peer* peer(uint32_t id);
  Result<Peer*> start_connect(Time now, Peer& p);
  NetStatus make_qp(Peer& p);
  NetStatus make_ready(Time now, Peer& p, const ConnectMsg& m);
  void set_ready(Time now, Peer& p);
  void send_connect(Peer& p, ConnectKind kind, uint64_t nonce);
  // Fails every operation of the peer with `why`. Only the first call for a connection
  // records its cause and text; later ones (consequences) change nothing.
  void fail_peer(Time now, Peer& p, OpError why, FailureCause cause, const std::string& what);
  // "peer N (mrc:[addr]:port,...;setup=port)".
  std::string describe(const Peer& p) const;
  // What the engine knows of a QP that failed: state, packets, paths, retry budget.
  std::string qp_detail(uint32_t qpn) const;
  static std::string describe_wr(const WrRecord& r);
  void fail_on_completion(Time now, Peer& p, const std::string& op, const Completion& c);
  void queue_fin(Peer& p, uint64_t send_cookie, uint64_t recv_cookie);
  // Completes the rendezvous send `send_cookie` (with the peer's error if it failed).
  void complete_rndv_send(Peer& p, uint64_t send_cookie);

  void enqueue(Time now, Peer& p, const PendingSend& w);
  static FiCompletion failed(const PendingSend& w, const Peer& p);
  void pump(Time now, Peer& p);
  bool send_slot(Time now, Peer& p, SlotHeader h, std::span<const uint8_t> payload,
                 uint64_t wr_tag);
  void return_credits(Time now, Peer& p, bool force);
  void on_slot(Time now, Peer& p, uint32_t slot, uint64_t byte_len);
  void deliver(Time now, Peer& p, const SlotHeader& h, std::span<const uint8_t> payload);
  bool matches(const PostedRecv& r, uint32_t peer, bool tagged, uint64_t tag) const;
  void match_arrival(Time now, Unexpected&& u);
  void take_unexpected(Time now, PostedRecv&& r, Unexpected&& u);
  void start_cts(Time now, PostedRecv&& r, const Unexpected& u);
  void complete(FiCompletion c) { completions_.push_back(c); }
  uint64_t new_wr(WrRecord r);

  Engine& engine_;
  Io& io_;
  RdmConfig config_;
  EndpointName self_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::map<EndpointName, uint32_t> by_name_;
  std::unordered_map<uint32_t, uint32_t> by_qpn_;  // our QPN -> peer id
  std::deque<PostedRecv> posted_;
  std::deque<Unexpected> unexpected_;
  std::unordered_map<uint64_t, WrRecord> wrs_;
  uint64_t next_wr_ = 1;
  uint64_t next_cookie_ = 1;
  std::deque<FiCompletion> completions_;
  RdmCounters counters_;
  std::deque<PeerFailure> failures_;  // not yet taken by poll_failure
};

}  // namespace mrc::fi
