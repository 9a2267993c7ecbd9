// SPDX-License-Identifier: GPL-2.0
/* ordma-verbs-data's shared rig: buffers, one side of a connection, posting and polling
 * (verbs_data.c), used by its checks there and in mr_checks.c. */
#ifndef VERBS_DATA_H
#define VERBS_DATA_H
#include <infiniband/verbs.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define BUF_SIZE (6u << 20) /* per side: a source and a destination of 2 MiB and more (3 huge pages) */
#define MAX_MSG (2u << 20)
#define RW (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

extern const char *dev_a, *dev_b, *mem_kind;
extern int failures;
extern enum ibv_qp_type qp_kind; /* the QPs side_open makes (IBV_QPT_RC by default) */
extern int qp_timeout, qp_retry_cnt; /* connect_qp's transport timer and retries */
extern const char *net_listen, *net_peer; /* stress between two machines: --listen, --peer */
/* health.c: start when this file exists (--go), close when that one does (--end) */
extern const char *go_file, *end_file;

#define FAIL(...)                                                                          \
	do {                                                                               \
		printf("FAIL: " __VA_ARGS__);                                              \
		printf("\n");                                                              \
		failures++;                                                                \
	} while (0)

struct buf {
	uint8_t *addr;
	size_t len;
	int fd; /* the dma-buf, or -1 */
};

struct side {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct buf buf;
	struct ibv_mr *mr;
	uint16_t lid;
	uint32_t max_inline;
	/* An Ethernet (RoCE) port: QPs towards this side are addressed by this GID (its
	 * RoCE v2 IPv4 address), from the index `gid_index` of its own table. */
	int eth;
	union ibv_gid gid;
	int gid_index;
};

void die(const char *what);
struct ibv_context *open_dev(const char *name);
struct buf alloc_buf(int side);
struct ibv_mr *reg(struct side *s, int access);
void side_open(struct side *s, const char *dev, int n, int access);
void side_port(struct side *s);
void set_av(struct ibv_ah_attr *ah, struct side *from, struct side *to);
void side_close(struct side *s);
void connect_qp(struct side *s, struct side *to, int rnr_retry);
void connect_qpn(struct side *s, struct side *to, uint32_t qpn, int rnr_retry);
struct ibv_wc poll_one(struct side *s);
int expect_wc(struct side *s, const char *what, uint64_t wr_id, enum ibv_wc_status st,
	      int opcode, int64_t byte_len);
void fill(uint8_t *p, size_t n);
int sges(struct ibv_sge *sg, int max, uint8_t *addr, size_t len, uint32_t lkey);
int post_send(struct side *s, uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sg, int n,
	      int flags, uint64_t raddr, uint32_t rkey, uint32_t imm);
int post_recv(struct side *s, uint64_t wr_id, struct ibv_sge *sg, int n);
void pair(struct side *a, struct side *b, int access_b, int rnr_retry);
void transfer(struct side *a, struct side *b, enum ibv_wr_opcode op, size_t len, int inl);
int write_wakes_cq_event(struct side *a, struct side *b, uint64_t wr_id, const char *what);

void check_shared(void);
void check_levels(void);
void check_stale(void);
void check_drain(void);
void check_quirks(void);
void check_srq(void);
void check_srq_resize(void);
void check_cq_resize(void);
void check_srq_events(void);
void check_srq_errnos(void);
void check_srq_hold(void);
void check_atomics(void);
void check_uc(void);
void check_ud(void);
void check_ud_hold(void);
void check_stress(long rounds);
void check_many(unsigned chunk);
void check_ex(void);
void check_rereg(void);
void check_mw(void);
void check_scale(int count);
void check_scale_hold(void);
void check_sends_hold(int n);
void check_arm_storm(int seconds, int pause_ms);
void check_cq_wakeups(int rounds);

#endif
