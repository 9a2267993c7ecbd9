// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data: RC transfers between two QPs through libibverbs, every byte verified.
 *
 * Usage: ordma-verbs-data [--dev A] [--dev2 B] [--mem 4k|huge:PATH|dmabuf] CHECK...
 *   --dev A, --dev2 B  the requester's and the responder's device (default ordma0 for both:
 *                      loopback on one NIC; two devices: between two NICs)
 *   --mem              the buffers: 4 KiB pages (anonymous, no THP; default), 2 MiB
 *                      hugetlbfs pages (files under PATH), or a udmabuf dma-buf (memfd)
 * CHECKs:
 *   transfers  SEND, SEND with immediate, RDMA WRITE, WRITE with immediate and RDMA READ at
 *              sizes 0 B to 2 MiB, three SGEs on the requester and two on the receive side
 *              where the size allows, inline SENDs up to max_inline_data: every byte, every
 *              completion field, and the PSNs both QPs report afterwards
 *   errors     each error completion provoked on a fresh pair: bad lkey (LOC_PROT_ERR),
 *              bad rkey, a range past the MR, an MR without remote write (REM_ACCESS_ERR),
 *              a receive buffer too small (REM_INV_REQ_ERR / LOC_LEN_ERR), no receive with
 *              rnr_retry 0 (RNR_RETRY_EXC_ERR), then the QP in ERR (a modify to RTS, before
 *              any query, EINVAL: the driver follows the NIC) and what was posted or is
 *              posted after flushed (WR_FLUSH_ERR) in order
 *   rnr        a SEND before its receive is posted, rnr_retry 7: completes once it is
 *   events     a completion wakes ibv_get_cq_event on an armed CQ
 *   cq-resize  ibv_resize_cq with completions not yet polled and under traffic: see
 *              cq_resize.c
 *   many       16 QP pairs on one context, PD, CQ and MR: a SEND and a WRITE of 64 KiB on
 *              each, all posted before any completion is polled; every completion once,
 *              every byte
 *   many-2m    the same with 2 MiB each (64 MiB in flight; on 4 KiB pages only): many.c
 *   shared, levels, rereg  MRs under the data path (rereg: ibv_rereg_mr): see mr_checks.c
 *   mw         memory windows, type 1 and 2, bound, used, invalidated: see mw.c
 *   scale          the object limits (max_pd, max_mr, max_cq, max_qp) reached and
 *                  enforced (ENOMEM), with create and destroy rates: see scale.c
 *   scale-hold     every doorbell page's context with objects, held until killed
 *   sends-hold=N   N SENDs A to B, then both QPs held until stdin closes (qp_counters.c)
 *   stale, drain    what the NIC touches after a deregistration, and when SQD is drained:
 *              see ownership.c (drain between two NICs: it takes --dev2's link down)
 *   quirks     what UCX and NCCL do that plain tests do not: see quirks.c
 *   srq, srq-resize, srq-events, srq-errnos, srq-hold  shared receive queues: see srq_checks.c
 *   atomics    compare and swap, fetch and add, threads counting on one word, the errors:
 *              see atomics.c
 *   uc         UC QPs: SEND, SEND with immediate, WRITE, WRITE with immediate, bytes
 *              verified; READ and atomics refused; RC's attributes refused: see uc.c
 *   ud         UD QPs and address handles: datagrams behind the GRH area, completion
 *              fields, Q_Key checks, refusals: see ud.c
 *   ud-hold    UD QPs, 64 AHs and an SRQ held, work in flight, until killed: see ud.c
 *   ex         extended CQs and QPs: ibv_create_cq_ex with ibv_start_poll and the
 *              accessors, ibv_create_qp_ex with the ibv_wr_* API, bytes verified, batches,
 *              refusals, no system call on the fast path: see ex.c
 *   stress[=N] N rounds (default 625) of 16 QP pairs between --dev and --dev2, each a
 *              fresh 2 MiB RDMA WRITE and four SENDs of up to 4 KiB: every byte; see
 *              stress.c. Between two machines: --listen PORT (this end receives and
 *              checks) on one, --peer HOST:PORT (this end sends) on the other, --dev each
 *   stress-until-killed  the same between two machines until one end is killed; the
 *              other reports how its transfers ended (stress.c)
 *   --retry N  the QPs' retry_cnt (default 7)
 * On an Ethernet (RoCE) port the QPs are addressed by GRH: the RoCE v2 GID of the port's
 * IPv4 address.
 * Prints a line per check; exits 0 only when all held.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <linux/udmabuf.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "verbs_data.h"

const char *dev_a = "ordma0", *dev_b = "ordma0", *mem_kind = "4k";
int failures;
enum ibv_qp_type qp_kind = IBV_QPT_RC;
int qp_timeout = 14, qp_retry_cnt = 7;
const char *net_listen, *net_peer;
const char *go_file, *end_file;

struct ibv_context *open_dev(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx) {
		fprintf(stderr, "cannot open %s\n", name);
		exit(2);
	}
	return ctx;
}

void die(const char *what)
{
	fprintf(stderr, "%s: %s\n", what, strerror(errno));
	exit(2);
}

struct buf alloc_buf(int side)
{
	struct buf b = { .len = BUF_SIZE, .fd = -1 };

	if (!strncmp(mem_kind, "huge:", 5)) {
		char path[512];
		snprintf(path, sizeof(path), "%s/verbs-data-%d-%d", mem_kind + 5, getpid(), side);
		int fd = open(path, O_CREAT | O_RDWR, 0600);
		if (fd < 0)
			die(path);
		unlink(path);
		b.addr = mmap(NULL, b.len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		close(fd);
	} else if (!strcmp(mem_kind, "dmabuf")) {
		int memfd = memfd_create("verbs-data", MFD_ALLOW_SEALING);
		if (memfd < 0 || ftruncate(memfd, b.len) || fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK))
			die("memfd");
		int dev = open("/dev/udmabuf", O_RDWR);
		if (dev < 0)
			die("/dev/udmabuf");
		struct udmabuf_create c = { .memfd = memfd, .flags = UDMABUF_FLAGS_CLOEXEC, .size = b.len };
		b.fd = ioctl(dev, UDMABUF_CREATE, &c);
		if (b.fd < 0)
			die("UDMABUF_CREATE");
		close(dev);
		b.addr = mmap(NULL, b.len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
		close(memfd);
	} else {
		b.addr = mmap(NULL, b.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (b.addr != MAP_FAILED)
			madvise(b.addr, b.len, MADV_NOHUGEPAGE);
	}
	if (b.addr == MAP_FAILED)
		die("mmap");
	memset(b.addr, 0, b.len);
	return b;
}

struct ibv_mr *reg(struct side *s, int access)
{
	struct ibv_mr *mr;

	if (s->buf.fd >= 0)
		mr = ibv_reg_dmabuf_mr(s->pd, 0, s->buf.len, (uintptr_t)s->buf.addr, s->buf.fd, access);
	else
		mr = ibv_reg_mr(s->pd, s->buf.addr, s->buf.len, access);
	if (!mr)
		die("ibv_reg_mr");
	return mr;
}

/* s's port: its LID, or on an Ethernet port the RoCE v2 GID of an IPv4 address. */
void side_port(struct side *s)
{
	struct ibv_port_attr port;

	if (ibv_query_port(s->ctx, 1, &port))
		die("ibv_query_port");
	s->lid = port.lid;
	s->eth = port.link_layer == IBV_LINK_LAYER_ETHERNET;
	if (!s->eth)
		return;
	for (int i = 0; i < port.gid_tbl_len; i++) {
		struct ibv_gid_entry e;

		if (ibv_query_gid_ex(s->ctx, 1, i, &e, 0) || e.gid_type != IBV_GID_TYPE_ROCE_V2)
			continue;
		if (e.gid.raw[10] == 0xff && e.gid.raw[11] == 0xff) {
			s->gid = e.gid;
			s->gid_index = i;
			return;
		}
	}
	die("no RoCE v2 GID of an IPv4 address on an Ethernet port");
}

/* The address of `to` as `from` reaches it: its LID, or on Ethernet a GRH to its GID. */
void set_av(struct ibv_ah_attr *ah, struct side *from, struct side *to)
{
	ah->dlid = to->lid;
	ah->port_num = 1;
	if (to->eth) {
		ah->is_global = 1;
		ah->grh.dgid = to->gid;
		ah->grh.sgid_index = (uint8_t)from->gid_index;
		ah->grh.hop_limit = 64;
	}
}

void side_open(struct side *s, const char *dev, int n, int access)
{
	memset(s, 0, sizeof(*s));
	s->ctx = open_dev(dev);
	side_port(s);
	s->pd = ibv_alloc_pd(s->ctx);
	s->ch = ibv_create_comp_channel(s->ctx);
	if (!s->pd || !s->ch)
		die("ibv_alloc_pd/ibv_create_comp_channel");
	s->cq = ibv_create_cq(s->ctx, 256, NULL, s->ch, 0);
	if (!s->cq)
		die("ibv_create_cq");
	s->buf = alloc_buf(n);
	s->mr = reg(s, access);
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.qp_type = qp_kind,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4,
			 .max_recv_sge = 4, .max_inline_data = 64 },
	};
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->qp)
		die("ibv_create_qp");
	s->max_inline = ia.cap.max_inline_data;
}

void side_close(struct side *s)
{
	if ((s->qp && ibv_destroy_qp(s->qp)) || ibv_dereg_mr(s->mr) || ibv_destroy_cq(s->cq) ||
	    ibv_destroy_comp_channel(s->ch) || ibv_dealloc_pd(s->pd))
		die("destroy");
	if (s->buf.fd >= 0)
		close(s->buf.fd);
	munmap(s->buf.addr, s->buf.len);
	ibv_close_device(s->ctx);
}

/* RESET -> INIT -> RTR -> RTS towards QP `qpn` of `to` (its port's address: LID, or GID on
 * an Ethernet port), PSNs 0x100 + qpn so each pair has its own; a UC QP (qp_kind) with UC's
 * attributes only (no timeout, retries, RNR timer, depths). Transport timer and retries:
 * qp_timeout and qp_retry_cnt. */
void connect_qpn(struct side *s, struct side *to, uint32_t qpn, int rnr_retry)
{
	int uc = s->qp->qp_type == IBV_QPT_UC;

	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = RW };

	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = qpn;
	a.rq_psn = 0x100 + qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1; /* 0.01 ms */
	set_av(&a.ah_attr, s, to);
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					     IBV_QP_RQ_PSN |
					     (uc ? 0 : IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = (uint8_t)qp_timeout;
	a.retry_cnt = (uint8_t)qp_retry_cnt;
	a.rnr_retry = rnr_retry;
	a.sq_psn = 0x100 + s->qp->qp_num;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN |
					     (uc ? 0 : IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
							       IBV_QP_MAX_QP_RD_ATOMIC)))
		die("modify to RTS");
}

void connect_qp(struct side *s, struct side *to, int rnr_retry)
{
	connect_qpn(s, to, to->qp->qp_num, rnr_retry);
}

/* One completion from s's CQ within 20 s, or a zeroed wc with status -1. */
struct ibv_wc poll_one(struct side *s)
{
	struct ibv_wc wc;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int n = ibv_poll_cq(s->cq, 1, &wc);
		if (n == 1)
			return wc;
		if (n < 0) {
			FAIL("ibv_poll_cq returned %d", n);
			break;
		}
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20) {
			FAIL("no completion within 20 s");
			break;
		}
	}
	memset(&wc, 0, sizeof(wc));
	wc.status = (enum ibv_wc_status)-1;
	return wc;
}

int expect_wc(struct side *s, const char *what, uint64_t wr_id, enum ibv_wc_status st,
		     int opcode, int64_t byte_len)
{
	struct ibv_wc wc = poll_one(s);

	if (wc.wr_id != wr_id || wc.status != st || (opcode >= 0 && (int)wc.opcode != opcode) ||
	    (byte_len >= 0 && wc.byte_len != byte_len) || wc.qp_num != s->qp->qp_num) {
		FAIL("%s: completion wr_id %llu status %s (%d) opcode %d byte_len %u qp %u; wanted wr_id %llu "
		     "status %s opcode %d byte_len %lld qp %u",
		     what, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.status, wc.opcode,
		     wc.byte_len, wc.qp_num, (unsigned long long)wr_id, ibv_wc_status_str(st), opcode,
		     (long long)byte_len, s->qp->qp_num);
		return -1;
	}
	return 0;
}

static uint64_t rng = 88172645463325252ull;
void fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		p[i] = (uint8_t)rng;
	}
}

/* Splits [addr, addr + len) into up to `max` SGEs of uneven sizes. */
int sges(struct ibv_sge *sg, int max, uint8_t *addr, size_t len, uint32_t lkey)
{
	int n = 0;
	size_t off = 0;

	while (n < max) {
		size_t piece = n == max - 1 ? len - off : (len - off) / 3;
		sg[n++] = (struct ibv_sge){ .addr = (uintptr_t)addr + off, .length = piece, .lkey = lkey };
		off += piece;
		if (off == len)
			break;
	}
	return n;
}

int post_send(struct side *s, uint64_t wr_id, enum ibv_wr_opcode op, struct ibv_sge *sg, int n,
		     int flags, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = sg, .num_sge = n, .opcode = op,
				  .send_flags = flags, .imm_data = htonl(imm) },
			   *bad = NULL;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	int rc = ibv_post_send(s->qp, &wr, &bad);
	if (rc)
		FAIL("ibv_post_send wr %llu: %s", (unsigned long long)wr_id, strerror(rc));
	return rc;
}

int post_recv(struct side *s, uint64_t wr_id, struct ibv_sge *sg, int n)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = sg, .num_sge = n }, *bad = NULL;
	int rc = ibv_post_recv(s->qp, &wr, &bad);
	if (rc)
		FAIL("ibv_post_recv wr %llu: %s", (unsigned long long)wr_id, strerror(rc));
	return rc;
}

static const char *op_name[] = { "WRITE", "WRITE_IMM", "SEND", "SEND_IMM", "READ" };

/* One transfer of `len` bytes a -> b (READ: b's bytes into a), checked byte for byte. */
void transfer(struct side *a, struct side *b, enum ibv_wr_opcode op, size_t len, int inl)
{
	static uint64_t id = 1;
	uint8_t *src = a->buf.addr + 3, *dst = b->buf.addr + MAX_MSG + 64 + 5;
	struct ibv_sge ss[4], rs[4];
	int ns, nr, imm = op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
	int recv = op == IBV_WR_SEND || imm;
	uint32_t immv = 0xc0de0000u | (uint32_t)len;
	char what[96];

	snprintf(what, sizeof(what), "%s %zu B%s", op_name[op], len, inl ? " inline" : "");
	if (op == IBV_WR_RDMA_READ) { /* the responder's bytes land in the requester's buffer */
		src = b->buf.addr + MAX_MSG + 64 + 5;
		dst = a->buf.addr + 3;
	}
	fill(src, len);
	memset(dst, 0xa5, len + 16);
	uint8_t guard[16];
	memcpy(guard, dst + len, 16);
	uint64_t sid = id++, rid = id++;
	if (recv) {
		nr = op == IBV_WR_RDMA_WRITE_WITH_IMM ? 0 : sges(rs, 2, dst, len, b->mr->lkey);
		if (post_recv(b, rid, rs, nr))
			return;
		if (b->qp->qp_type == IBV_QPT_UC) {
			/* UC has no RNR: a message that finds no receive is dropped. The receive's
			 * doorbell is a posted write to b's NIC; a query of b's QP is an admin
			 * command to the same NIC behind it, so once it returns the NIC has the
			 * receive (what an application's out-of-band handshake does). */
			struct ibv_qp_attr qa;
			struct ibv_qp_init_attr qi;
			if (ibv_query_qp(b->qp, &qa, IBV_QP_STATE, &qi))
				die("ibv_query_qp");
		}
	}
	if (op == IBV_WR_RDMA_READ)
		ns = sges(ss, 3, dst, len, a->mr->lkey);
	else
		ns = sges(ss, 3, src, len, a->mr->lkey);
	if (post_send(a, sid, op, ss, ns, IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0),
		      (uintptr_t)(op == IBV_WR_RDMA_READ ? src : dst),
		      b->mr->rkey, immv))
		return;
	static const int wc_op[] = { IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_SEND, IBV_WC_SEND,
				     IBV_WC_RDMA_READ };
	int bad = expect_wc(a, what, sid, IBV_WC_SUCCESS, wc_op[op], op == IBV_WR_RDMA_READ ? (int64_t)len : -1);
	if (op == IBV_WR_RDMA_WRITE && a->qp->qp_type == IBV_QPT_UC) {
		/* UC: the WRITE completes once sent, not once placed (no ACK); nothing tells the
		 * responder's side, so wait for the bytes, up to 20 s. */
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (memcmp(src, dst, len)) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			if (t.tv_sec - t0.tv_sec > 20)
				break;
			usleep(100);
		}
	}
	if (recv) {
		struct ibv_wc wc = poll_one(b);
		int want = op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
		if (wc.wr_id != rid || wc.status != IBV_WC_SUCCESS || (int)wc.opcode != want ||
		    wc.byte_len != len || wc.src_qp != a->qp->qp_num ||
		    !!(wc.wc_flags & IBV_WC_WITH_IMM) != imm || (imm && ntohl(wc.imm_data) != immv)) {
			FAIL("%s: receive completion wr_id %llu status %s opcode %d byte_len %u src_qp %u "
			     "flags %#x imm %#x", what, (unsigned long long)wc.wr_id,
			     ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len, wc.src_qp, wc.wc_flags,
			     ntohl(wc.imm_data));
			bad = -1;
		}
	}
	if (memcmp(src, dst, len)) {
		size_t i = 0;
		while (src[i] == dst[i])
			i++;
		FAIL("%s: byte %zu differs (%#x, sent %#x)", what, i, dst[i], src[i]);
		bad = -1;
	} else if (memcmp(guard, dst + len, 16)) {
		FAIL("%s: bytes written past the message", what);
		bad = -1;
	}
	if (!bad)
		printf("ok %s\n", what);
}

static uint32_t psn(struct side *s, int sq)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(s->qp, &a, IBV_QP_SQ_PSN | IBV_QP_RQ_PSN, &ia))
		die("ibv_query_qp");
	return sq ? a.sq_psn : a.rq_psn;
}

static enum ibv_qp_state qp_state(struct side *s)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(s->qp, &a, IBV_QP_STATE, &ia))
		die("ibv_query_qp");
	return a.qp_state;
}

void pair(struct side *a, struct side *b, int access_b, int rnr_retry)
{
	side_open(a, dev_a, 0, RW);
	side_open(b, dev_b, 1, access_b);
	connect_qp(a, b, rnr_retry);
	connect_qp(b, a, rnr_retry);
}

static void check_transfers(void)
{
	static const size_t sizes[] = { 0, 1, 63, 4095, 4096, 4097, 65536, (1u << 20) + 3, MAX_MSG };
	static const enum ibv_wr_opcode ops[] = { IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
						  IBV_WR_RDMA_WRITE_WITH_IMM, IBV_WR_RDMA_READ };
	struct side a, b;
	uint64_t pkts = 0;

	pair(&a, &b, RW, 7);
	uint32_t sq0 = psn(&a, 1), rq0 = psn(&b, 0);
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			transfer(&a, &b, ops[o], sizes[i], 0);
			pkts += sizes[i] ? (sizes[i] + 4095) / 4096 : 1;
		}
	for (size_t len = 1; len <= a.max_inline; len = len * 2 + 1) {
		transfer(&a, &b, IBV_WR_SEND, len, 1);
		transfer(&a, &b, IBV_WR_RDMA_WRITE_WITH_IMM, len, 1);
		pkts += 2;
	}
	/* One PSN per packet (path MTU 4096) on both ends; a READ request takes as many PSNs as
	 * its responses. */
	uint32_t sq = (psn(&a, 1) - sq0) & 0xffffff, rq = (psn(&b, 0) - rq0) & 0xffffff;
	if (sq != pkts || rq != pkts)
		FAIL("PSNs advanced by %u (requester) and %u (responder), %llu packets sent", sq, rq,
		     (unsigned long long)pkts);
	else
		printf("ok PSNs advanced by %llu packets on both QPs\n", (unsigned long long)pkts);
	printf("ok max_inline_data %u\n", a.max_inline);
	side_close(&a);
	side_close(&b);
}

/* A QP the NIC moved to ERR on its own, before anything asked the NIC its state: a modify
 * to RTS is invalid from ERR, so ib_core's state table refuses it (EINVAL), not the NIC. */
static int expect_modify_refused(struct side *s, const char *what, const char *who)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_RTS };
	int r = ibv_modify_qp(s->qp, &attr, IBV_QP_STATE);

	if (r == EINVAL)
		return 0;
	FAIL("%s: the %s's QP in ERR: a modify to RTS returned %s, expected EINVAL", what, who,
	     r ? strerror(r) : "success");
	return -1;
}

/* An error completion on a fresh pair, then the QP in ERR (a modify to RTS refused) and
 * later WRs flushed. */
static void check_error(const char *what, int access_b, int rnr_retry, enum ibv_wr_opcode op, int bad_lkey,
			uint32_t rkey_xor, int64_t roff, size_t rlen_recv, enum ibv_wc_status want_a,
			int want_b)
{
	struct side a, b;
	struct ibv_sge s, r;
	size_t len = 8192;

	pair(&a, &b, access_b, rnr_retry);
	fill(a.buf.addr, len);
	if (rlen_recv) {
		r = (struct ibv_sge){ .addr = (uintptr_t)b.buf.addr, .length = rlen_recv, .lkey = b.mr->lkey };
		post_recv(&b, 50, &r, 1);
	}
	s = (struct ibv_sge){ .addr = (uintptr_t)a.buf.addr, .length = len,
			      .lkey = a.mr->lkey ^ (bad_lkey ? 0x5a00 : 0) };
	post_send(&a, 10, op, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)b.buf.addr + roff, b.mr->rkey ^ rkey_xor, 7);
	/* Posted behind it: unsignaled, then signaled; both flushed. */
	s.lkey = a.mr->lkey;
	post_send(&a, 11, IBV_WR_RDMA_WRITE, &s, 1, 0, (uintptr_t)b.buf.addr, b.mr->rkey, 0);
	post_send(&a, 12, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)b.buf.addr, b.mr->rkey, 0);
	int bad = expect_wc(&a, what, 10, want_a, -1, -1);
	bad |= expect_wc(&a, "flushed after the error (unsignaled)", 11, IBV_WC_WR_FLUSH_ERR, -1, -1);
	bad |= expect_wc(&a, "flushed after the error", 12, IBV_WC_WR_FLUSH_ERR, -1, -1);
	bad |= expect_modify_refused(&a, what, "requester");
	if (qp_state(&a) != IBV_QPS_ERR) {
		FAIL("%s: the requester's QP is in state %d, not ERR", what, qp_state(&a));
		bad = -1;
	}
	/* Posted in ERR: flushed too. */
	post_send(&a, 13, IBV_WR_SEND, &s, 1, IBV_SEND_SIGNALED, 0, 0, 0);
	bad |= expect_wc(&a, "posted in ERR", 13, IBV_WC_WR_FLUSH_ERR, -1, -1);
	if (want_b >= 0) {
		bad |= expect_wc(&b, what, 50, (enum ibv_wc_status)want_b, -1, -1);
		bad |= expect_modify_refused(&b, what, "responder");
		if (qp_state(&b) != IBV_QPS_ERR) {
			FAIL("%s: the responder's QP is in state %d, not ERR", what, qp_state(&b));
			bad = -1;
		}
	}
	struct ibv_wc extra;
	if (ibv_poll_cq(a.cq, 1, &extra) != 0 || ibv_poll_cq(b.cq, 1, &extra) != 0) {
		FAIL("%s: a completion more than expected (wr_id %llu, %s)", what,
		     (unsigned long long)extra.wr_id, ibv_wc_status_str(extra.status));
		bad = -1;
	}
	if (!bad)
		printf("ok %s: %s, then the QP in ERR (a modify to RTS EINVAL) and later WRs flushed\n", what,
		       ibv_wc_status_str(want_a));
	side_close(&a);
	side_close(&b);
}

static void check_errors(void)
{
	check_error("bad lkey", RW, 7, IBV_WR_RDMA_WRITE, 1, 0, 0, 0, IBV_WC_LOC_PROT_ERR, -1);
	check_error("bad rkey", RW, 7, IBV_WR_RDMA_WRITE, 0, 0x5a00, 0, 0, IBV_WC_REM_ACCESS_ERR, -1);
	check_error("WRITE past the MR's end", RW, 7, IBV_WR_RDMA_WRITE, 0, 0, BUF_SIZE - 100, 0,
		    IBV_WC_REM_ACCESS_ERR, -1);
	check_error("READ past the MR's end", RW, 7, IBV_WR_RDMA_READ, 0, 0, BUF_SIZE - 100, 0,
		    IBV_WC_REM_ACCESS_ERR, -1);
	check_error("WRITE to an MR without remote write", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 7,
		    IBV_WR_RDMA_WRITE, 0, 0, 0, 0, IBV_WC_REM_ACCESS_ERR, -1);
	check_error("SEND longer than the receive buffer", RW, 7, IBV_WR_SEND, 0, 0, 0, 100,
		    IBV_WC_REM_INV_REQ_ERR, IBV_WC_LOC_LEN_ERR);
	check_error("SEND with no receive posted, rnr_retry 0", RW, 0, IBV_WR_SEND, 0, 0, 0, 0,
		    IBV_WC_RNR_RETRY_EXC_ERR, -1);
}

static void check_rnr(void)
{
	struct side a, b;
	struct ibv_sge s, r;

	pair(&a, &b, RW, 7);
	fill(a.buf.addr, 1000);
	s = (struct ibv_sge){ .addr = (uintptr_t)a.buf.addr, .length = 1000, .lkey = a.mr->lkey };
	post_send(&a, 1, IBV_WR_SEND, &s, 1, IBV_SEND_SIGNALED, 0, 0, 0);
	usleep(200000);
	struct ibv_wc wc;
	if (ibv_poll_cq(a.cq, 1, &wc) != 0)
		FAIL("rnr: the SEND completed (%s) before any receive was posted", ibv_wc_status_str(wc.status));
	r = (struct ibv_sge){ .addr = (uintptr_t)b.buf.addr + 4096, .length = 4096, .lkey = b.mr->lkey };
	post_recv(&b, 2, &r, 1);
	int bad = expect_wc(&a, "SEND retried after RNR", 1, IBV_WC_SUCCESS, IBV_WC_SEND, -1);
	bad |= expect_wc(&b, "its receive", 2, IBV_WC_SUCCESS, IBV_WC_RECV, 1000);
	if (memcmp(a.buf.addr, b.buf.addr + 4096, 1000)) {
		FAIL("rnr: the bytes differ");
		bad = -1;
	}
	if (!bad)
		printf("ok SEND before its receive (RNR NAK, rnr_retry 7) completed once the receive was posted\n");
	side_close(&a);
	side_close(&b);
}

/* a's CQ, armed: a 64-byte WRITE (wr_id) to b wakes ibv_get_cq_event for it within 20 s,
 * and its completion is the one polled. 0, or -1 (a failure counted). */
int write_wakes_cq_event(struct side *a, struct side *b, uint64_t wr_id, const char *what)
{
	struct ibv_sge s = { .addr = (uintptr_t)a->buf.addr, .length = 64, .lkey = a->mr->lkey };
	struct ibv_cq *cq;
	void *cq_ctx;

	post_send(a, wr_id, IBV_WR_RDMA_WRITE, &s, 1, IBV_SEND_SIGNALED, (uintptr_t)b->buf.addr, b->mr->rkey, 0);
	struct pollfd p = { .fd = a->ch->fd, .events = POLLIN };
	if (poll(&p, 1, 20000) != 1 || ibv_get_cq_event(a->ch, &cq, &cq_ctx) || cq != a->cq) {
		FAIL("%s: no completion event within 20 s", what);
		return -1;
	}
	ibv_ack_cq_events(cq, 1);
	return expect_wc(a, "the completion behind the event", wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1);
}

static void check_events(void)
{
	struct side a, b;

	pair(&a, &b, RW, 7);
	if (ibv_req_notify_cq(a.cq, 0))
		die("ibv_req_notify_cq");
	if (!write_wakes_cq_event(&a, &b, 1, "events"))
		printf("ok a completion on an armed CQ woke ibv_get_cq_event\n");
	side_close(&a);
	side_close(&b);
}

int verbs_data_main(int argc, char **argv);
int verbs_data_main(int argc, char **argv)
{
	int i = 1;

	for (; i + 1 < argc && !strncmp(argv[i], "--", 2); i += 2) {
		if (!strcmp(argv[i], "--dev"))
			dev_a = dev_b = argv[i + 1];
		else if (!strcmp(argv[i], "--dev2"))
			dev_b = argv[i + 1];
		else if (!strcmp(argv[i], "--mem"))
			mem_kind = argv[i + 1];
		else if (!strcmp(argv[i], "--listen"))
			net_listen = argv[i + 1];
		else if (!strcmp(argv[i], "--peer"))
			net_peer = argv[i + 1];
		else if (!strcmp(argv[i], "--retry"))
			qp_retry_cnt = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--go"))
			go_file = argv[i + 1];
		else if (!strcmp(argv[i], "--end"))
			end_file = argv[i + 1];
		else
			break;
	}
	if (i >= argc) {
		fprintf(stderr, "usage: %s [--dev A] [--dev2 B] [--mem 4k|huge:PATH|dmabuf] "
				"[--listen PORT|--peer HOST:PORT] [--retry N] [--go FILE] [--end FILE] transfers|errors|rnr|events|many|many-2m|shared|levels|rereg|mw|stale|drain|quirks|"
				"cq-resize|srq|srq-resize|srq-events|srq-errnos|srq-hold|atomics|uc|ud|ud-hold|ex|scale[=N]|scale-hold|sends-hold=N|stress[=N]|arm-storm=S[,P]|cq-wakeups=N...\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("%s -> %s, buffers: %s\n", dev_a, dev_b, mem_kind);
	for (; i < argc; i++) {
		if (!strcmp(argv[i], "transfers"))
			check_transfers();
		else if (!strcmp(argv[i], "errors"))
			check_errors();
		else if (!strcmp(argv[i], "rnr"))
			check_rnr();
		else if (!strcmp(argv[i], "events"))
			check_events();
		else if (!strcmp(argv[i], "many"))
			check_many(64u << 10);
		else if (!strcmp(argv[i], "many-2m"))
			check_many(2u << 20);
		else if (!strcmp(argv[i], "shared"))
			check_shared();
		else if (!strcmp(argv[i], "levels"))
			check_levels();
		else if (!strcmp(argv[i], "rereg"))
			check_rereg();
		else if (!strcmp(argv[i], "mw"))
			check_mw();
		else if (!strcmp(argv[i], "scale"))
			check_scale(0);
		else if (!strncmp(argv[i], "scale=", 6))
			check_scale(atoi(argv[i] + 6));
		else if (!strcmp(argv[i], "scale-hold"))
			check_scale_hold();
		else if (!strcmp(argv[i], "stale"))
			check_stale();
		else if (!strcmp(argv[i], "drain"))
			check_drain();
		else if (!strcmp(argv[i], "quirks"))
			check_quirks();
		else if (!strcmp(argv[i], "srq"))
			check_srq();
		else if (!strcmp(argv[i], "cq-resize"))
			check_cq_resize();
		else if (!strcmp(argv[i], "srq-resize"))
			check_srq_resize();
		else if (!strcmp(argv[i], "srq-events"))
			check_srq_events();
		else if (!strcmp(argv[i], "srq-errnos"))
			check_srq_errnos();
		else if (!strcmp(argv[i], "srq-hold"))
			check_srq_hold();
		else if (!strcmp(argv[i], "atomics"))
			check_atomics();
		else if (!strcmp(argv[i], "uc"))
			check_uc();
		else if (!strcmp(argv[i], "ud"))
			check_ud();
		else if (!strcmp(argv[i], "ud-hold"))
			check_ud_hold();
		else if (!strcmp(argv[i], "ex"))
			check_ex();
		else if (!strcmp(argv[i], "stress"))
			check_stress(625);
		else if (!strncmp(argv[i], "stress=", 7))
			check_stress(atol(argv[i] + 7));
		else if (!strcmp(argv[i], "stress-until-killed"))
			check_stress(-1);
		else if (!strncmp(argv[i], "sends-hold=", 11))
			check_sends_hold(atoi(argv[i] + 11));
		else if (!strncmp(argv[i], "arm-storm=", 10)) {
			const char *pause = strchr(argv[i], ',');
			check_arm_storm(atoi(argv[i] + 10), pause ? atoi(pause + 1) : 0);
		}
		else if (!strncmp(argv[i], "cq-wakeups=", 11))
			check_cq_wakeups(atoi(argv[i] + 11));
		else {
			fprintf(stderr, "unknown check %s\n", argv[i]);
			return 2;
		}
	}
	printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
	return failures ? 1 : 0;
}
