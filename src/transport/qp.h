// One queue pair: the requester (segmentation, spraying, loss recovery, completions) and the
// responder (checks, placement, SACK generation, immediates) of an MRC or RoCEv2 RC
// connection. Owned and driven by Engine; see engine.h for the external contract.
//
// Requester bookkeeping, per PSN and per transmission:
//   pkts_    ring indexed by PSN (up to the MPR, rounded up to a power of two): which
//            WR/packet a PSN carries, its state (in flight / acknowledged / lost and queued
//            for resend) and its latest transmission.
//   recs_    ring of transmissions in send order (up to twice pkts_'s limit; records are
//            linked by sequence number, never by slot). Each transmission is also linked into a
//            FIFO per path. Both are consumed from the front only, so loss detection costs
//            O(1) amortized per packet:
//              - per-path order: paths are FIFO (a static SRv6 path or one ECMP hash), so
//                when a transmission on path e is acknowledged, every earlier transmission
//                on e still unacknowledged is lost;
//              - RACK (RFC 8985 in spirit): a transmission is lost when one sent more than
//                the reordering window later has been acknowledged, or when one sent on the
//                same port at the same instant but later in order has, and an RTT plus the
//                window have passed (a driver's batch shares one send time);
//              - PTO: the oldest transmission has waited longer than srtt + max(4 rttvar,
//                reordering window) (tail loss; no later packet exists to reveal it);
//              - trim NACKs (explicit, not a path failure) and the ACK timeout (RTO).
//
// Ring memory follows what is in flight, not the window: every ring (these two, the
// retransmission queue, the send queue, the responder's PSN bitmap and message ring, and the
// small control queues) starts at EngineConfig::qp_initial_ring entries and doubles when a
// new entry would not fit, up to its protocol limit (MPR, sq_depth, ...). Window checks use
// the limits, never the current size, so behaviour does not depend on how far a ring has
// grown. A simulated all-to-all holds ~a million QPs that carry a few packets each.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/array.h"
#include "transport/engine.h"
#include "transport/reverse_path.h"

namespace mrc {

class Qp {
 public:
  Qp(Engine& engine, uint32_t qpn, const QpCreateAttr& attr, uint64_t seed);
  ~Qp();

  uint32_t qpn() const { return qpn_; }
  uint32_t peer() const { return peer_; }  // QpAttr::peer (0 before RTR)
  QpState state() const { return state_; }
  const PathSet& paths() const { return paths_; }
  const QpStats& stats() const { return stats_; }
  QpMemory memory() const;
  const QpCreateAttr& create_attr() const { return create_; }

  Status modify(Time now, QpState target, const QpAttr& attr);
  Status post_write(Time now, const WriteWr& wr);
  Status post_recv(uint64_t wr_id);
  Status on_packet(Time now, const RxPacket& rx);
  Status set_path_denied(Time now, int ev_index, bool denied);
  Status replace_path(Time now, int ev_index, const PathDesc& desc);
  Status update(const QpUpdate& u);
  QpLimits limits() const;
  Status reconfigure_cc(const CcSpec& cc);
  const cc::CongestionControl* congestion_control() const { return cc_.get(); }
  void set_port_up(Time now, uint8_t port, bool up);
  // The peer's port-state bitmap (from its ACKs) changed: stop using its dead ports' planes.
  void on_peer_ports(Time now, uint32_t ports_down);

  // Control packets (ACK, NACK, CNP, probe, probe reply) pending?
  bool has_control() const;
  // Writes the next control packet into `out` if one can go out on a port in `mask`.
  bool produce_control(Time now, uint32_t mask, TxPacket& out);

  enum class DataResult { kSent, kPortsBusy, kIdle };
  // Writes the next data packet (retransmission first) into `out`. kPortsBusy: something
  // could be sent but not on the ports in `mask`; kIdle: nothing can be sent now (no work,
  // window, congestion window or pacing): the QP leaves the ready list.
  DataResult produce_data(Time now, uint32_t mask, TxPacket& out);

  Time deadline() const;
  void on_timer(Time now);

  // Engine bookkeeping.
  bool in_ready = false;
  bool in_control = false;
  Time armed = kNever;

 private:
  // ---- requester types --------------------------------------------------------------
  enum class PktState : uint8_t { kFree, kInflight, kAcked, kLost };
  struct SendWr {
    uint64_t wr_id = 0;
    const uint8_t* local = nullptr;  // host pointer of the source (nullptr: phantom)
    uint64_t length = 0;
    uint64_t remote_addr = 0;
    uint32_t rkey = 0;
    uint32_t imm = 0;
    uint32_t msg_num = 0;
    uint32_t npkts = 0;
    uint32_t next_pkt = 0;  // next packet index to send for the first time
    uint32_t acked_pkts = 0;
    bool with_imm = false;
    bool signaled = true;
  };
  struct TxPkt {
    uint64_t wr_seq = 0;  // sequence number of the WR (index into sq_ modulo capacity)
    uint32_t pkt_index = 0;
    uint32_t bytes = 0;
    Time sent_at = 0;  // latest transmission
    uint32_t rec = 0;  // latest transmission record
    uint16_t ev = 0;   // path of the latest transmission
    PktState state = PktState::kFree;
    uint8_t transmissions = 0;
  };
  static constexpr uint32_t kNil = UINT32_MAX;
  struct TxRecord {
    uint32_t psn = 0;
    uint32_t next = kNil;  // next transmission on the same path
    Time sent_at = 0;
    uint16_t ev = 0;
    bool linked = false;  // still in its path FIFO
  };
  struct PathFifo {
    uint32_t head = kNil, tail = kNil;
  };

  // ---- responder types --------------------------------------------------------------
  struct RxMessage {
    uint32_t msg_num = 0;
    uint32_t last_psn = 0;
    uint64_t bytes = 0;
    uint32_t imm = 0;
    bool seen = false;
    bool with_imm = false;
  };
  struct ProbeReply {
    wire::ProbeExt probe;
    uint8_t port = 0;
    Time arrived = 0;
  };
  struct TrimNack {
    uint32_t psn = 0;
    uint16_t ev = 0;
    uint8_t port = 0;
  };

  // ---- transitions --------------------------------------------------------------------
  Status to_init(const QpAttr& a);
  Status to_rtr(const QpAttr& a);
  Status to_rts(Time now, const QpAttr& a);
  void to_err(Time now, WcStatus first_status);

  // ---- requester ------------------------------------------------------------------------
  bool is_mrc() const { return transport_ == TransportMode::kMrc; }
  void ensure_requester_rings();
  void ensure_responder_rings();
  // The size a ring whose limit is `limit` (a power of two) starts at.
  uint32_t initial_ring(uint32_t limit) const;
  // Each doubles its ring (to at least `offset` + 1 entries for the responder's), keeping the
  // live entries at the slots their PSN / sequence number / message number names. Cold and
  // out of line: inlined, their loops would cost every packet's caller register spills.
  [[gnu::cold, gnu::noinline]] void grow_pkt_ring();
  [[gnu::cold, gnu::noinline]] void grow_and_start_new_packet(Time now, SendWr& w, uint32_t bytes);
  [[gnu::cold, gnu::noinline]] void grow_rec_ring();
  [[gnu::cold, gnu::noinline]] void grow_retx_ring();
  [[gnu::cold, gnu::noinline]] void grow_sq();
  [[gnu::cold, gnu::noinline]] void grow_rcv_ring(uint32_t offset);
  [[gnu::cold, gnu::noinline]] void grow_msg_ring(uint32_t offset);
  TxPkt& pkt(uint32_t psn) { return pkts_[psn & pkt_mask_]; }
  SendWr& wr_at(uint64_t seq) { return sq_[seq % sq_.size()]; }
  uint32_t outstanding_psns() const;
  bool window_allows_new(const SendWr& w) const;
  bool cc_allows(Time now, uint32_t bytes) const;
  DataResult blocked_by_cc(Time now);
  DataResult produce_roce_data(Time now, uint32_t mask, TxPacket& out);
  SendWr* sendable_new_packet(Time now, uint32_t& bytes, DataResult& why_not);
  void start_new_packet(Time now, SendWr& w, uint32_t bytes);
  void fill_data(Time now, uint32_t psn, int path, bool retransmit, TxPacket& out);
  uint32_t record_transmission(uint32_t psn, int path, Time now);
  bool psn_in_flight_range(uint32_t psn) const;
  bool record_current(uint32_t seq) const;
  Status validate_ack(const wire::SackExt& s) const;
  // Raises pto_floor_ to how long the acknowledgement of a packet sent at `sent_at`, already
  // declared lost, took; from the ACK's echoes of such packets.
  void learn_pto_floor(Time now, Time sent_at);
  void learn_pto_floor_from_echoes(Time now, const wire::SackExt& s);
  void on_ack(Time now, const RxPacket& rx);
  void on_roce_ack(Time now, const RxPacket& rx);
  void on_trim_nack(Time now, const RxPacket& rx);
  void on_probe_reply(Time now, const RxPacket& rx);
  // Marks `psn` acknowledged (first time only). Returns true if newly acknowledged.
  bool ack_psn(Time now, uint32_t psn);
  enum class LossCause : uint8_t { kPathOrder, kRack, kPto, kRto, kTrim, kOther };
  void declare_lost(Time now, uint32_t psn, bool mark_path, LossCause cause);
  void on_spurious_loss(Time now, uint16_t ev);
  void on_duplicate_echo();
  void widen_reorder_window();
  // `known_end`: PSNs from it on are beyond what the ACK reports (cumulative + SACK bitmap),
  // so their absence proves nothing.
  void detect_losses_on_path(Time now, uint16_t ev, uint32_t upto_rec, uint32_t known_end);
  void detect_losses_rack(Time now, bool check_pto);
  void compact_retx();
  void advance_una();
  void complete_send_wrs(Time now);
  void rtt_sample(Time rtt, Time raw);
  Time reorder_window() const;
  Time pto() const;
  // When the PTO fires for a transmission sent at `oldest_sent` (backed off, at most one
  // tail-loss probe per PTO).
  Time pto_due(Time oldest_sent) const;
  void note_delivered(Time sent_at, uint32_t seq, uint16_t ev);
  // When record `seq` is lost by RACK's tie rule; kNever where the rule does not apply.
  Time rack_tie_due(uint32_t seq) const;
  Time pto_floor_limit() const;
  Time rto_base() const;
  Time rto_interval() const;
  bool has_outstanding() const;
  void on_rto(Time now);
  void report_path_change(Time now, int ev, const PathStateChange& c);

  // ---- responder ------------------------------------------------------------------------
  Status drop(DropReason reason, Error error);
  Status on_data(Time now, const RxPacket& rx);
  Status on_roce_data(Time now, const RxPacket& rx);
  Result<const MemoryRegion*> check_data(const RxPacket& rx);
  Status accept_data(Time now, const RxPacket& rx, const MemoryRegion* region);
  void on_probe(Time now, const RxPacket& rx);
  bool rcv_bit(uint32_t psn) const;
  void set_rcv_bit(uint32_t psn, bool v);
  uint64_t rcv_bits64(uint32_t psn) const;
  void advance_rcv_base();
  void complete_recv_messages(Time now);
  void queue_echo(Time now, const RxPacket& rx, uint8_t flags);
  void fill_ack(Time now, TxPacket& out);
  int control_path(Time now, uint8_t preferred_port, int preferred_path, uint32_t mask,
                   bool allow_assumed_bad);
  void fill_common(TxPacket& out, uint8_t port, int path);
  int ack_repeat_path(uint32_t mask) const;
  // The path of an ACK or trim NACK: the reverse EV set's next (paper 2.4), else (set off or
  // empty) control_path(); `repeat`: the tail-ACK repeat (avoids the last ACK's path).
  int ack_path(Time now, uint8_t preferred_port, int preferred_path, uint32_t mask, bool repeat);
  void report_reverse_change(Time now, const ReverseChange& c);

  Engine& engine_;
  const uint32_t qpn_;
  QpCreateAttr create_;
  QpState state_ = QpState::kReset;
  TransportMode transport_ = TransportMode::kMrc;
  uint64_t seed_;

  // Attributes.
  uint32_t dest_qpn_ = 0, peer_ = 0, mtu_ = 4096;
  uint32_t mpr_psns_ = 1024, mpr_dest_psns_ = 1024;
  uint16_t max_wimm_ = 64, max_wimm_dest_ = 64;
  uint8_t timeout_ = 14, retry_linear_ = 7, retry_exp_ = 7;
  Time reorder_window_attr_ = 0;

  PathSet paths_;
  ReversePathSet reverse_;  // responder: where its ACKs go (paper 2.4)
  QpStats stats_;
  std::shared_ptr<const CcSpec> cc_spec_;  // the engine's copy (Engine::cc_specs_); set at INIT
  std::unique_ptr<cc::CongestionControl> cc_;
  Time pacing_wait_until_ = kNever;  // blocked by pacing until then
  bool probes_due_ = false;          // a path probe is due (control pending)
  bool reverse_probe_due_ = false;   // a reverse-set probe is due (control pending)

  // Requester state.
  Array<SendWr> sq_;      // indexed by WR sequence number modulo its size (up to sq_depth)
  uint64_t sq_head_ = 0;  // oldest WR not completed
  uint64_t sq_send_ = 0;  // WR being segmented
  uint64_t sq_tail_ = 0;  // next free
  uint32_t next_msg_num_ = 0;
  Array<TxPkt> pkts_;
  uint32_t pkt_mask_ = 0;   // pkts_.size() - 1
  uint32_t pkt_limit_ = 0;  // what pkts_ may grow to: the MPR rounded up to a power of two
  uint32_t snd_una_ = 0, next_psn_ = 0;
  uint32_t wimm_outstanding_ = 0;
  uint64_t inflight_bytes_ = 0;
  Array<TxRecord> recs_;
  uint32_t rec_mask_ = 0;   // recs_.size() - 1
  uint32_t rec_limit_ = 0;  // 2 x pkt_limit_: also the limit on transmissions in flight
  uint32_t rec_head_ = 0, rec_tail_ = 0;
  Array<PathFifo> path_fifos_;
  Array<uint32_t> retx_;  // ring of PSNs queued for retransmission (up to pkt_limit_)
  uint32_t retx_mask_ = 0;
  uint32_t retx_head_ = 0, retx_size_ = 0;
  uint32_t gbn_next_ = 0;  // RoCE: next PSN to (re)send in go-back-N
  Time rack_time_ = 0;     // latest send time of a transmission known delivered
  // Per transmit queue (a port, or a path: Engine::transmit_order), the newest delivered
  // transmission, ties in send time broken by send order (note_delivered, rack_tie_due).
  // Sized by the highest queue seen.
  struct QueueRack {
    Time sent_at = 0;
    uint32_t seq = 0;
    bool seen = false;
  };
  Array<QueueRack> queue_rack_;
  // The transmit queue whose order a transmission on path `ev` keeps.
  uint32_t transmit_queue(uint16_t ev) const;
  bool same_instant_sends_ = false;  // set once two transmissions shared a send time
  Time srtt_ = 0, rttvar_ = 0, min_rtt_ = kNever;
  // The same smoothing over raw samples (send to ACK arrival, the responder's service time
  // included): the PTO waits for an ACK, so it must cover a responder that holds packets
  // (a software responder reading its socket late); srtt_ stays the path's RTT for CC.
  Time raw_srtt_ = 0, raw_rttvar_ = 0;
  // Window up to 4 min RTTs, or to srtt + 4 rttvar where that is more (reorder_window()).
  static constexpr uint32_t kMaxReorderMultiplier = 4096;
  uint32_t reorder_multiplier_ = 0;  // grows with each spurious loss detection
  // RFC 8985 6.2 lets a widened window persist for 16 loss recoveries without evidence of a
  // spurious one; here: every 16 losses detected by RACK or path order since the last
  // spurious loss halve the multiplier.
  static constexpr uint32_t kReorderPersistLosses = 16;
  uint32_t losses_since_spurious_ = 0;
  // Learned lower bound of the PTO: how long the acknowledgement of a packet we had already
  // declared lost took (a responder descheduled for milliseconds, a software path), where the
  // previous ACK could have reported it or an echo names it. Zero on hardware paths (nothing
  // is ever undone); halves every kPtoFloorHalfLife without new evidence; at most
  // pto_floor_limit() (half the ACK timeout). If the ACKs between were lost, a sample includes
  // that gap too (bounded by the limit and the half-life).
  static constexpr Time kPtoFloorHalfLife = ms(1000);
  Time pto_floor_ = 0;
  Time pto_floor_at_ = 0;
  // sack_base of the newest ACK so far: PSNs in [it, it + 128) were reportable by that ACK.
  uint32_t ack_reach_base_ = 0;
  // Tail-loss probing: the last PTO and how often it fired without progress since (each
  // doubles the next wait, as RFC 8985 backs off).
  static constexpr uint32_t kMaxPtoBackoff = 6;
  Time pto_fired_at_ = 0;
  uint32_t pto_backoff_ = 0;
  bool pto_probe_due_ = false;  // the next retransmission is the probe: it ignores the cwnd
  Time last_progress_ = 0;
  uint32_t rto_count_ = 0;  // consecutive ACK timeouts without progress

  // Responder state.
  Array<uint64_t> rcv_bits_;
  uint32_t rcv_mask_ = 0;  // bits in the ring - 1 (at least 64 bits)
  // The responder's ring limit, in PSNs and in messages: MPR_dest rounded up to a power of
  // two, at least 128. A PSN further behind rcv_base_ is stale; a message further ahead of
  // msg_base_ is out of the window.
  uint32_t rcv_limit_ = 0;
  uint32_t rcv_base_ = 0;  // every PSN before it has been received
  Array<RxMessage> rx_msgs_;
  uint32_t msg_mask_ = 0;        // rx_msgs_.size() - 1
  uint32_t msg_base_ = 0;        // next message to complete (also the AETH MSN)
  uint32_t wimm_dest_open_ = 0;  // WRITE-with-imm messages seen but not completed
  uint64_t received_bytes_ = 0;
  Array<uint64_t> rq_;  // posted receive wr_ids (ring)
  uint32_t rq_head_ = 0, rq_size_ = 0;
  std::array<wire::AckEcho, wire::kMaxAckEchoes> echoes_{};
  uint32_t echo_count_ = 0;
  uint32_t unacked_packets_ = 0;  // accepted since the last ACK
  bool ack_now_ = false;
  Time ack_due_ = kNever;
  Time newest_arrival_ = 0;
  uint8_t ack_port_ = 0;
  int ack_path_ = -1;  // path index of the newest packet to acknowledge
  // Tail-ACK repeat (Engine::set_ack_repeat_after): due when no packet arrives by then after
  // an ACK; pending once due; the port and path the last ACK took (the repeat avoids them).
  Time ack_repeat_due_ = kNever;
  bool ack_repeat_now_ = false;
  uint8_t last_ack_port_ = 0;
  int last_ack_path_ = -1;
  Array<TrimNack> nacks_;
  uint32_t nack_head_ = 0, nack_size_ = 0;
  Array<ProbeReply> probe_replies_;
  uint32_t probe_reply_head_ = 0, probe_reply_size_ = 0;
  bool roce_nak_pending_ = false;
  bool roce_nak_sent_for_base_ = false;
  bool cnp_pending_ = false;
  Time last_cnp_ = 0;
  bool cnp_ever_ = false;
};

}  // namespace mrc
