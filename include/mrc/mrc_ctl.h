/* OCP MRC 1.0 controller API (ocp-mrc-api.md section 5), for the MRC software device.
 * Written from the interface reference; source-compatible with the published mrc_ctl.h.
 * Declaration order follows section 5.4. Every call needs CAP_NET_ADMIN (EPERM otherwise). */
#ifndef _MRC_CTL_API_H_
#define _MRC_CTL_API_H_

/* The reference's include order (ocp-mrc-api.md section 1). */
/* clang-format off */
#include <stdint.h>
#include <infiniband/verbs.h>
#include <mrc.h>
#include <mrc_ctl_api_ver.h>
/* clang-format on */

#ifdef __cplusplus
extern "C" {
#endif

/* Section 5.1. */
#define MRC_CTL_MAX_VENDOR_CFG_SIZE 128
/* An unset EV entry: value all zero, port 0 (ports are 1-based). C99 compound literal. */
#define MRC_CTL_EV_UNPOPULATED ((struct mrc_ctl_ev){.val = {0}, .port = 0})
#define MRC_CTL_EV_MAX_BYTES 32

enum mrc_ctl_protocol_version {
  MRC_CTL_PROTOCOL_VERSION_0 = 0,
  MRC_CTL_PROTOCOL_VERSION_1 = 1 << 0,
};

/* Implicit values 0, 1, 2 (section 5.2). */
enum mrc_ctl_profile_state {
  MRC_CTL_PROFILE_INIT,
  MRC_CTL_PROFILE_OFFLINE,
  MRC_CTL_PROFILE_ONLINE,
};

enum mrc_ctl_attr_opt {
  MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE = 1 << 0,
  MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE = 1 << 1,
  MRC_CTL_OPT_CAP_EV_EVENT = 1 << 2,
  MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE = 1 << 3,
  MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT = 1 << 4,
  MRC_CTL_OPT_CAP_EP_OP_EV_PROBE = 1 << 5,
};

/* Section 5.3. */
struct mrc_ctl_device_attr {
  uint32_t mrc_ctl_protocol_version; /* bitmap of enum mrc_ctl_protocol_version */
  struct {
    uint32_t ev_max_fmt_profiles;
    uint32_t ev_max_profiles;
    uint32_t ev_max_count;
    uint32_t ev_free_count;
    uint32_t ev_max_count_profile;
    uint32_t ev_count_align;
    uint32_t ev_max_width;
    uint32_t ev_fmt_mode_mask;  /* enum mrc_ctl_ev_fmt_mode bits */
    uint32_t ev_mode_mask;      /* enum mrc_ctl_ev_mode bits */
    uint32_t ev_op_max_entries; /* 0 = no limit */
  } ev;
  struct {
    uint32_t cc_max_profiles;
    const char** algorithms; /* NULL-terminated, library-owned */
  } cc;
  uint32_t phy_port_mask; /* bit N = port N (1-based) */
  uint32_t opt_attr;      /* enum mrc_ctl_attr_opt bits */
};

#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
int mrc_ctl_query_device_ex(struct ibv_context* context, struct mrc_context* mcontext,
                            struct mrc_ctl_device_attr* ctl_attr, int* supported);
#endif

int mrc_ctl_query_device(struct ibv_context* context, struct mrc_ctl_device_attr* ctl_attr);

void mrc_ctl_query_version(uint32_t* current_version, uint32_t* last_supported_version,
                           uint32_t* vendor_version, uint32_t* last_supported_vendor_version);

enum mrc_ctl_port_admin_state {
  MRC_CTL_PORT_ADMIN_DISABLED = 0,
  MRC_CTL_PORT_ADMIN_ENABLED = 1,
};

enum mrc_ctl_port_attr_mask {
  MRC_CTL_PORT_ADMIN_STATE = 1 << 0,
};

struct mrc_ctl_port_attr {
  enum mrc_ctl_port_admin_state port_admin_state;
};

int mrc_ctl_query_port(struct mrc_context* context, uint8_t port_num,
                       struct mrc_ctl_port_attr* attr, int attr_mask);
int mrc_ctl_modify_port(struct mrc_context* context, uint8_t port_num,
                        struct mrc_ctl_port_attr* attr, int attr_mask);

enum mrc_ctl_ev_fmt_mode {
  MRC_CTL_EV_FMT_MODE_STEV = 1 << 0,
  MRC_CTL_EV_FMT_MODE_SRV6 = 1 << 1,
  MRC_CTL_EV_FMT_MODE_UDP = 1 << 2,
};

enum mrc_ctl_ev_fmt_op {
  MRC_CTL_EV_FMT_OP_MODIFY_FIELDS = 0,
  MRC_CTL_EV_FMT_OP_QUERY_FIELDS = 1,
};

enum mrc_ctl_ev_fmt_profile_attr_mask {
  MRC_CTL_EV_FMT_PROFILE_STATE = 1 << 0,
  MRC_CTL_EV_FMT_PROFILE_CUR_STATE = 1 << 1,
  MRC_CTL_EV_FMT_PROFILE_MODE = 1 << 2,
  MRC_CTL_EV_FMT_PROFILE_OP = 1 << 3,
  MRC_CTL_EV_FMT_VENDOR_CFG = (int)0x80000000,
};

struct mrc_ctl_ev_fmt_field {
  uint8_t width; /* bits */
};

struct mrc_ctl_ev_fmt_profile_attr {
  enum mrc_ctl_profile_state profile_state;
  enum mrc_ctl_profile_state cur_profile_state;
  enum mrc_ctl_ev_fmt_mode ev_fmt_mode;
  struct {
    enum mrc_ctl_ev_fmt_op op;
    struct mrc_ctl_ev_fmt_field* fmt_fields;
    int fmt_field_count; /* in/out: required length on E2BIG */
  } ev_fmt_op;
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

int mrc_ctl_modify_ev_fmt_profile(struct mrc_context* mrc_ctx, uint64_t ev_fmt_profile_id,
                                  struct mrc_ctl_ev_fmt_profile_attr* attr, int attr_mask);
int mrc_ctl_query_ev_fmt_profile(struct mrc_context* mrc_ctx, uint64_t ev_fmt_profile_id,
                                 struct mrc_ctl_ev_fmt_profile_attr* attr, int attr_mask);

typedef uint8_t mrc_ctl_ev_t[MRC_CTL_EV_MAX_BYTES];

/* 33 bytes, alignment 1. val is MSB-first (section 6); port is 1-based. */
struct mrc_ctl_ev {
  mrc_ctl_ev_t val;
  uint8_t port;
};

enum mrc_ctl_ev_state {
  MRC_CTL_EV_GOOD = 1 << 0,
  MRC_CTL_EV_ASSUMED_BAD = 1 << 1,
  MRC_CTL_EV_DENIED = 1 << 2,
  MRC_CTL_EV_UNKNOWN = (int)0x80000000,
};

enum mrc_ctl_ev_mode {
  MRC_CTL_EV_MODE_AUTO = 1 << 0,
  MRC_CTL_EV_MODE_EXP = 1 << 1,
  MRC_CTL_EV_MODE_GEN = 1 << 2,
};

enum mrc_ctl_ev_op {
  MRC_CTL_EV_OP_REPLACE_EV = 0,
  MRC_CTL_EV_OP_MODIFY_EV_STATE = 1,
  MRC_CTL_EV_OP_QUERY_EV_STATE = 2,
  MRC_CTL_EV_OP_QUERY_EV_ARRAY = 3,
};

enum mrc_ctl_ev_fields_op {
  MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS = 0,
  MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS = 1,
};

enum mrc_ctl_ev_profile_attr_mask {
  MRC_CTL_EV_PROFILE_STATE = 1 << 0,
  MRC_CTL_EV_PROFILE_CUR_STATE = 1 << 1,
  MRC_CTL_EV_PROFILE_MODE = 1 << 2,
  MRC_CTL_EV_PROFILE_FMT_ID = 1 << 3,
  MRC_CTL_EV_PROFILE_COUNT = 1 << 4,
  MRC_CTL_EV_PROFILE_MIN_ACTIVE = 1 << 5,
  MRC_CTL_EV_PROFILE_EVENT_MASK = 1 << 6,
  MRC_CTL_EV_PROFILE_EV_OP = 1 << 7,
  MRC_CTL_EV_PROFILE_EV_FIELDS_OP = 1 << 8,
  MRC_CTL_EV_PROFILE_VENDOR_CFG = (int)0x80000000,
};

struct mrc_ctl_ev_field {
  uint32_t width;
  uint32_t init_val;
  uint32_t min_val;
  uint32_t max_val;
  uint32_t mask;
};

enum mrc_ctl_ev_op_flags {
  MRC_CTL_EV_OP_F_ALL_COPIES = 1 << 0,
};

struct mrc_ctl_ev_op_entry {
  struct mrc_ctl_ev ev;
  struct mrc_ctl_ev ev_new;
  enum mrc_ctl_ev_state state;
  uint32_t flags; /* enum mrc_ctl_ev_op_flags */
};

struct mrc_ctl_ev_profile_attr {
  enum mrc_ctl_profile_state profile_state;
  enum mrc_ctl_profile_state cur_profile_state;
  enum mrc_ctl_ev_mode ev_mode;
  uint64_t ev_fmt_profile_id;
  uint32_t ev_count;
  uint32_t ev_min_active;
  int ev_event_mask; /* MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD only */
  struct {
    enum mrc_ctl_ev_op op;
    struct mrc_ctl_ev_op_entry* entries;
    int entry_count; /* in/out: required length on E2BIG */
  } ev_op;
  struct {
    enum mrc_ctl_ev_fields_op op;
    struct mrc_ctl_ev_field* fields;
    int field_count; /* in/out: required length on E2BIG */
  } ev_fields_op;
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

int mrc_ctl_modify_ev_profile(struct mrc_context* mrc_ctx, uint64_t ev_profile_id,
                              struct mrc_ctl_ev_profile_attr* attr, int attr_mask);
int mrc_ctl_query_ev_profile(struct mrc_context* mrc_ctx, uint64_t ev_profile_id,
                             struct mrc_ctl_ev_profile_attr* attr, int attr_mask);

enum mrc_ctl_cc_profile_attr_mask {
  MRC_CTL_CC_PROFILE_STATE = 1 << 0,
  MRC_CTL_CC_PROFILE_CUR_STATE = 1 << 1,
  MRC_CTL_CC_PROFILE_ALGORITHM = 1 << 2,
  MRC_CTL_CC_PROFILE_CONFIG = 1 << 3,
  MRC_CTL_CC_PROFILE_VENDOR_CFG = (int)0x80000000,
};

struct mrc_ctl_cc_profile_attr {
  enum mrc_ctl_profile_state profile_state;
  enum mrc_ctl_profile_state cur_profile_state;
  const char* algorithm; /* one of cc.algorithms; NULL disables CC */
  const void* cc_config; /* struct mrc_ctl_cc_nscc_cfg for "uet-1.0-nscc" */
  uint8_t vendor_cfg[MRC_CTL_MAX_VENDOR_CFG_SIZE];
};

/* UET 1.0 NSCC configuration (section 5.3). */
struct mrc_ctl_cc_nscc_cfg {
  uint8_t disable_qa;
  uint32_t adjust_bytes_threshold;  /* bytes */
  uint32_t adjust_period_threshold; /* ns */
  uint32_t base_rtt;                /* ns */
  float eta;
  float fi;
  float fi_scale;
  float gamma;
  float max_md_jump;
  uint32_t max_cwnd;     /* bytes */
  uint8_t qa_gate;       /* shift */
  uint32_t qa_threshold; /* ns */
  uint32_t target_delay; /* ns */
};

int mrc_ctl_modify_cc_profile(struct mrc_context* mrc_ctx, uint64_t cc_profile_id,
                              struct mrc_ctl_cc_profile_attr* attr, int attr_mask);
int mrc_ctl_query_cc_profile(struct mrc_context* mrc_ctx, uint64_t cc_profile_id,
                             struct mrc_ctl_cc_profile_attr* attr, int attr_mask);

/* 56 bytes with the 1.0.1 `state` member, 48 without (section 5.6: stride hazard). */
struct mrc_ctl_ev_event {
  uint64_t profile_id;
  struct mrc_ctl_ev ev;
  uint32_t drop_count;
#if MRC_CTL_API_VER_USED >= MRC_CTL_API_VER(1, 0, 1)
  enum mrc_ctl_ev_state state;
#endif
};

struct mrc_cq* mrc_ctl_create_ev_event_cq(struct mrc_context* mrc_ctx, int cqe, void* cq_context,
                                          struct mrc_comp_channel* channel, int comp_vector);
/* Returns the count, or a negative errno value. */
int mrc_ctl_poll_ev_event(struct mrc_cq* ev_cq, int num_entries, struct mrc_ctl_ev_event* ev_event);

enum mrc_ctl_ep_op_type {
  MRC_CTL_EP_OP_EV_PROBE = 0,
  MRC_CTL_EP_OP_PORT_STATUS_UPDATE = 1,
};

struct mrc_ctl_ep_req {
  uint16_t req_id;
  union ibv_gid sgid;
  union ibv_gid dgid;
  enum mrc_ctl_ev_fmt_mode ev_fmt_mode;
  struct mrc_ctl_ev req_ev;
  union {
    struct {
      uint32_t port_status; /* bit per 1-based port */
    } port_status_update;
  } op;
};

struct mrc_ctl_ep_rsp {
  uint16_t req_id;
  uint8_t port;     /* 1-based arrival port */
  unsigned int rtt; /* ns */
  uint8_t adj_svc_time;
};

/* rsp_timeout in ns. ETIMEDOUT still fills rsp / *num_rsp with what arrived. */
int mrc_ctl_ep_batch_send_wait(struct mrc_context* mrc_ctx, uint8_t req_tc,
                               enum mrc_ctl_ep_op_type op_type, struct mrc_ctl_ep_req* req,
                               int num_req, uint32_t rsp_timeout, struct mrc_ctl_ep_rsp* rsp,
                               int* num_rsp);

#ifdef __cplusplus
}
#endif

#endif /* _MRC_CTL_API_H_ */
