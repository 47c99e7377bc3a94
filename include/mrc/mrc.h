/* OCP MRC 1.0 application API (ocp-mrc-api.md section 3), for the MRC software device.
 * Written from the interface reference; source-compatible with the published mrc.h.
 * Declaration order follows section 3.5. Objects are opaque (section 3.3). */
#ifndef _MRC_API_H_
#define _MRC_API_H_

/* The reference's include order (ocp-mrc-api.md section 1). */
/* clang-format off */
#include <stdint.h>
#include <infiniband/verbs.h>
#include <mrc_api_ver.h>
/* clang-format on */

#ifdef __cplusplus
extern "C" {
#endif

/* Section 3.1. */
#define MRC_MAX_VENDOR_CFG_SIZE 128

/* Section 3.2: wire-protocol version bits. */
enum mrc_protocol_version {
  MRC_PROTOCOL_VERSION_0 = 0,
  MRC_PROTOCOL_VERSION_1 = 1 << 0,
};

/* Section 3.3: opaque objects. */
struct mrc_context;
struct mrc_qp_hint;
struct mrc_qp;
struct mrc_cq;
struct mrc_comp_channel;

/* Section 3.2: optional device features (mrc_device_attr.cap). */
enum mrc_device_cap {
  MRC_DEVICE_CAP_TRIM_NACK = 1 << 0,
  MRC_DEVICE_CAP_DYNAMIC_MPR = 1 << 1,
  MRC_DEVICE_CAP_SVC_TIME = 1 << 2,
};

/* Section 3.4. */
struct mrc_device_attr {
  uint32_t mrc_protocol_version; /* bitmap of enum mrc_protocol_version */
  struct {
    uint16_t max_wimm;      /* largest requestor max_wimm */
    uint16_t max_wimm_dest; /* largest responder max_wimm_dest */
  } wimm_attr;
  struct {
    uint8_t max_mpr;        /* units of 128 PSNs */
    uint8_t mpr_resolution; /* units of 128 PSNs */
  } mpr_attr;
  struct {
    uint32_t max_qp_hint;
  } qp_attr;
  uint32_t cap; /* bitmap of enum mrc_device_cap */
};

#if MRC_API_VER_USED >= MRC_API_VER(1, 0, 1)
/* Section 3.7: 0 / -1 + errno; *supported = 0 is not an error. */
int mrc_query_device_ex(struct ibv_context* context, struct mrc_context* mcontext,
                        struct mrc_device_attr* attr, int* supported);
#endif

int mrc_query_device(struct ibv_context* context, struct mrc_device_attr* attr, int* supported);

void mrc_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                       uint32_t* vendor_version, uint32_t* last_supported_vendor_version);

struct mrc_context_attr {
  uint32_t mrc_api_version_used;        /* MRC_API_VER value; 0 = not stated */
  uint32_t mrc_vendor_api_version_used; /* 0 = not stated */
};

struct mrc_context* mrc_create_context(struct ibv_context* vcontext,
                                       struct mrc_context_attr* context_attr);
int mrc_destroy_context(struct mrc_context* mrc_ctx);

int mrc_create_comp_channel(struct mrc_context* mrc_ctx, struct mrc_comp_channel** channel);
int mrc_get_comp_channel_fd(struct mrc_comp_channel* channel, int* fd);
int mrc_destroy_comp_channel(struct mrc_comp_channel* channel);

struct mrc_cq* mrc_create_cq(struct mrc_context* mrc_ctx, int cqe, void* cq_context,
                             struct mrc_comp_channel* channel, int comp_vector);
int mrc_poll_cq(struct mrc_cq* cq, int num_entries, struct ibv_wc* wc);
int mrc_destroy_cq(struct mrc_cq* cq);

struct mrc_qp_hint_attr {
  int num_qps_per_peer;
  int num_send_peers;
  int num_remote_recv_peers;
  uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

/* Bit 31 written as (int)0x80000000 (section 3.2, "About bit 31"): same value, no overflow. */
enum mrc_qp_hint_attr_mask {
  MRC_QP_HINT_NUM_QPS_PER_PEER = 1 << 0,
  MRC_QP_HINT_NUM_SEND_PEERS = 1 << 1,
  MRC_QP_HINT_NUM_REMOTE_RECV_PEERS = 1 << 2,
  MRC_QP_HINT_VENDOR_CFG = (int)0x80000000,
};

struct mrc_qp_hint_init_attr {
  struct mrc_qp_hint_attr attr;
};

struct mrc_qp_hint* mrc_create_qp_hint(struct mrc_context* mrc_ctx,
                                       struct mrc_qp_hint_init_attr* init_attr);
int mrc_destroy_qp_hint(struct mrc_qp_hint* qp_hint);
int mrc_query_qp_hint(struct mrc_qp_hint* qp_hint, struct mrc_qp_hint_attr* qp_hint_attr,
                      int qp_hint_attr_mask);
int mrc_modify_qp_hint(struct mrc_qp_hint* qp_hint, struct mrc_qp_hint_attr* qp_hint_attr,
                       int qp_hint_attr_mask);

struct mrc_qp_init_attr {
  void* qp_context;
  struct mrc_cq* send_cq;
  struct mrc_cq* recv_cq;
  struct ibv_qp_cap cap;
  int sq_sig_all;
  struct ibv_pd* pd;
  uint64_t send_ops_flags; /* IBV_QP_EX_WITH_RDMA_WRITE[_WITH_IMM]; 0 = both */
  enum mrc_protocol_version protocol_version;
};

struct mrc_qp* mrc_create_qp(struct mrc_context* mrc_ctx, struct mrc_qp_init_attr* mrc_qp_attr);
int mrc_destroy_qp(struct mrc_qp* qp);

enum mrc_qp_attr_mask {
  MRC_QP_MAX_WIMM = 1 << 0,
  MRC_QP_MAX_WIMM_DEST = 1 << 1,
  MRC_QP_MPR = 1 << 2,
  MRC_QP_MPR_DEST = 1 << 3,
  MRC_QP_TIMEOUT = 1 << 4,
  MRC_QP_EV_PROFILE_ID = 1 << 5,
  MRC_QP_CC_PROFILE_ID = 1 << 6,
  MRC_QP_HINT = 1 << 7,
  MRC_QP_RETRY_CNT = 1 << 8,
  MRC_QP_CAP = 1 << 9,
  MRC_QP_VENDOR_CFG = (int)0x80000000,
};

enum mrc_qp_cap {
  MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED = 1 << 0,
  MRC_QP_CAP_DYNAMIC_MPR = 1 << 1,
  MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED = 1 << 2,
};

struct mrc_qp_attr {
  struct {
    uint8_t mpr;      /* requestor, units of 128 PSNs */
    uint8_t mpr_dest; /* responder, units of 128 PSNs */
  } mpr;
  struct {
    uint16_t max_wimm;
    uint16_t max_wimm_dest;
  } wimm;
  uint8_t timeout; /* 1.024 us * 2^timeout, <= 24 */
  struct {
    uint64_t ev_profile_id;
    uint64_t cc_profile_id;
  } profile;
  struct {
    uint8_t linear_cnt; /* <= 7 */
    uint8_t exp_cnt;    /* <= 25; 25 = infinite */
  } retry;
  struct mrc_qp_hint* qp_hint;
  uint32_t cap; /* bitmap of enum mrc_qp_cap */
  uint8_t vendor_cfg[MRC_MAX_VENDOR_CFG_SIZE];
};

int mrc_query_qp(struct mrc_qp* qp, struct ibv_qp_attr* vattr, int vattr_mask,
                 struct mrc_qp_attr* mrc_attr, int mrc_attr_mask,
                 struct mrc_qp_init_attr* init_attr);
int mrc_modify_qp(struct mrc_qp* qp, struct ibv_qp_attr* vattr, int vattr_mask,
                  struct mrc_qp_attr* mrc_attr, int mrc_attr_mask);
int mrc_get_qpn(struct mrc_qp* qp, uint32_t* qpn);

int mrc_post_recv(struct mrc_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad_wr);
int mrc_post_send(struct mrc_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad_wr);

struct mrc_async_event {
  union {
    struct mrc_cq* cq;
    struct mrc_qp* qp;
    int port_num;
  } element;
  enum ibv_event_type event_type;
};

int mrc_get_async_event(struct mrc_context* mrc_ctx, struct mrc_async_event* event);
void mrc_ack_async_event(struct mrc_async_event* event);

int mrc_req_notify_cq(struct mrc_cq* cq, int solicited_only);
int mrc_get_cq_event(struct mrc_comp_channel* channel, struct mrc_cq** cq, void** cq_context);
void mrc_ack_cq_events(struct mrc_cq* cq, unsigned int nevents);

#ifdef __cplusplus
}
#endif

#endif /* _MRC_API_H_ */
