// SPDX-License-Identifier: BSD-2-Clause
// uN (SRv6 End with the NEXT-C-SID flavour, RFC 9800 4.1) as a tc (clsact) ingress program:
// the switch data plane of mrc-fabric on kernels without SRv6 seg6local routes.
//
// One instance per switch, attached to every interface of the switch's namespace. Its SID
// (locator block + the switch's uSID, 48 bits: `lblen 32 nflen 16` in seg6local's words) is
// in the one-entry `usid_config` map, written by the loader before the program is attached.
// A packet whose destination starts with that SID is rewritten before the kernel routes it,
// exactly as seg6local's End with next-csid would (Linux net/ipv6/seg6_local.c):
//   - argument (bits 48..127) not zero: shift it left by 16 bits, zero-fill the last uSID;
//   - argument zero (end of the carrier): with an SRH whose segments left > 0, decrement it
//     and copy the new active segment into the destination; without one, drop (End needs an
//     SRH there, RFC 8986 4.1).
// Everything else passes untouched. The kernel then routes on the new destination and its
// forwarding path decrements the hop limit once, as it does after seg6local. Upper-layer
// checksums are not touched: the uSID sender computes them over the final destination
// (RFC 8200 8.1), as with seg6local; MRC's SRv6 mode sends zero UDP checksums (RFC 6936).
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

// Shared with the loader (net/usid_bpf.cc).
#define USID_SID_BYTES 6  // 32-bit locator block + 16-bit uSID
#define USID_ARG_BYTES 10 // the rest of the destination: the uSIDs that follow

enum usid_counter {
  USID_SHIFTED = 0,        // argument shifted (next uSID made active)
  USID_SEGMENT_NEXT = 1,   // end of carrier, next SRH segment copied in
  USID_DROPPED = 2,        // end of carrier with no segment left (or a malformed SRH)
  USID_COUNTERS = 3,
};

struct usid_config {
  __u8 sid[USID_SID_BYTES];
  __u8 valid;  // 0 until the loader wrote the SID: pass everything
  __u8 pad;
};

struct {
  __uint(type, BPF_MAP_TYPE_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct usid_config);
} usid_config SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, USID_COUNTERS);
  __type(key, __u32);
  __type(value, __u64);
} usid_stats SEC(".maps");

#define NEXTHDR_ROUTING 43
#define SRH_TYPE 4

static __always_inline void count(__u32 which) {
  __u64* v = bpf_map_lookup_elem(&usid_stats, &which);
  if (v) *v += 1;
}

static __always_inline int drop(void) {
  count(USID_DROPPED);
  return TC_ACT_SHOT;
}

// Offsets from the start of the frame (tc sees the Ethernet header on veth).
#define IP6_OFF ((int)sizeof(struct ethhdr))
#define DADDR_OFF (IP6_OFF + (int)offsetof(struct ipv6hdr, daddr))
#define SRH_OFF (IP6_OFF + (int)sizeof(struct ipv6hdr))

// End of the carrier: the next segment of an SRH right after the fixed header (the only
// place MRC's encoder puts one, wire/codec.h), or a drop.
static __always_inline int next_segment(struct __sk_buff* skb, __u8 nexthdr) {
  if (nexthdr != NEXTHDR_ROUTING) return drop();
  __u8 srh[8];
  if (bpf_skb_load_bytes(skb, SRH_OFF, srh, sizeof srh) < 0) return drop();
  const __u8 hdr_ext_len = srh[1], type = srh[2], segments_left = srh[3], last_entry = srh[4];
  // RFC 8754 2: 8-octet units beyond the first, two per 128-bit segment.
  if (type != SRH_TYPE || segments_left == 0 || segments_left > last_entry + 1 ||
      hdr_ext_len < 2 * (last_entry + 1))
    return drop();
  const __u8 next = segments_left - 1;
  __u8 segment[16];
  if (next > 127) return drop();  // bounds the offset for the verifier
  if (bpf_skb_load_bytes(skb, SRH_OFF + 8 + 16 * (int)next, segment, sizeof segment) < 0)
    return drop();
  if (bpf_skb_store_bytes(skb, SRH_OFF + 3, &next, 1, BPF_F_RECOMPUTE_CSUM) < 0 ||
      bpf_skb_store_bytes(skb, DADDR_OFF, segment, sizeof segment, BPF_F_RECOMPUTE_CSUM) < 0)
    return drop();
  count(USID_SEGMENT_NEXT);
  return TC_ACT_OK;
}

SEC("tc")
int usid_end(struct __sk_buff* skb) {
  if (skb->protocol != bpf_htons(ETH_P_IPV6)) return TC_ACT_OK;
  const __u32 zero = 0;
  const struct usid_config* cfg = bpf_map_lookup_elem(&usid_config, &zero);
  if (!cfg || !cfg->valid) return TC_ACT_OK;
  __u8 daddr[16];
  __u8 nexthdr;
  if (bpf_skb_load_bytes(skb, DADDR_OFF, daddr, sizeof daddr) < 0) return TC_ACT_OK;
  if (bpf_skb_load_bytes(skb, IP6_OFF + (int)offsetof(struct ipv6hdr, nexthdr), &nexthdr, 1) < 0)
    return TC_ACT_OK;
#pragma unroll
  for (int i = 0; i < USID_SID_BYTES; ++i)
    if (daddr[i] != cfg->sid[i]) return TC_ACT_OK;  // not this switch's SID: route as is
  __u8 any = 0;
#pragma unroll
  for (int i = USID_SID_BYTES; i < 16; ++i)
    any |= daddr[i];
  if (!any) return next_segment(skb, nexthdr);
  // Shift: bytes 6..15 move to 4..13, the last uSID becomes 0 (the end-of-carrier marker).
  __u8 shifted[USID_ARG_BYTES + 2];
#pragma unroll
  for (int i = 0; i < USID_ARG_BYTES; ++i)
    shifted[i] = daddr[USID_SID_BYTES + i];
  shifted[USID_ARG_BYTES] = 0;
  shifted[USID_ARG_BYTES + 1] = 0;
  if (bpf_skb_store_bytes(skb, DADDR_OFF + 4, shifted, sizeof shifted, BPF_F_RECOMPUTE_CSUM) < 0)
    return drop();
  count(USID_SHIFTED);
  return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
