// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data's extended verbs check: CQs from ibv_create_cq_ex polled with
 * ibv_start_poll/ibv_next_poll/ibv_end_poll and the ibv_wc_read_* accessors, QPs from
 * ibv_create_qp_ex posting with the ibv_wr_* API.
 *
 *   ex  an RC pair of extended QPs on extended CQs (--dev to --dev2): SEND, SEND with
 *       immediate, WRITE, WRITE with immediate and READ from 0 B to 2 MiB with three SGEs
 *       (ibv_wr_set_sge_list), inline SENDs from two buffers (ibv_wr_set_inline_data_list),
 *       every byte and every completion field through the accessors; a batch of 16 WRITEs
 *       posted by one ibv_wr_complete and polled in one start/next/end pass; a batch with a
 *       call that fails (inline data past max_inline_data) posts nothing and
 *       ibv_wr_complete returns EINVAL; ibv_post_send during an open batch is EBUSY and
 *       ibv_wr_abort drops the batch; the fast path makes no system call: a thread in
 *       seccomp's strict mode (any system call but read, write, exit and sigreturn kills
 *       the process) posts a batch of SENDs and polls their completions on both CQs;
 *       IBTA 1.5's ATOMIC WRITE and FLUSH (ibv_wr_atomic_write, ibv_wr_flush): four ATOMIC
 *       WRITEs of 8 bytes and FLUSHes of their range and of the whole MR through an MR and
 *       a QP that allow IBV_ACCESS_FLUSH_GLOBAL, every completion and the 32 bytes; then a
 *       FLUSH to the persistence domain, which the NIC has not: IBV_WC_REM_ACCESS_ERR.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "verbs_data.h"

#define WC_FLAGS                                                                           \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |             \
	 IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |                  \
	 IBV_WC_EX_WITH_DLID_PATH_BITS)
#define SEND_OPS                                                                           \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_WRITE |   \
	 IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |                    \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |         \
	 IBV_QP_EX_WITH_ATOMIC_WRITE | IBV_QP_EX_WITH_FLUSH)
#define BATCH 16

struct ex_side {
	struct side s;
	struct ibv_cq_ex *cq;
	struct ibv_qp_ex *qp;
};

/* A side as side_open's, with an extended CQ and an extended RC QP. */
static void ex_open(struct ex_side *x, const char *dev, int n)
{
	side_open(&x->s, dev, n, RW);
	if (ibv_destroy_qp(x->s.qp) || ibv_destroy_cq(x->s.cq))
		die("destroy side_open's QP and CQ");
	struct ibv_cq_init_attr_ex ca = { .cqe = 256, .channel = x->s.ch, .wc_flags = WC_FLAGS };
	x->cq = ibv_create_cq_ex(x->s.ctx, &ca);
	if (!x->cq)
		die("ibv_create_cq_ex");
	x->s.cq = ibv_cq_ex_to_cq(x->cq);
	struct ibv_qp_init_attr_ex qa = {
		.send_cq = x->s.cq,
		.recv_cq = x->s.cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 64, .max_send_sge = 4,
			 .max_recv_sge = 4, .max_inline_data = 64 },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = x->s.pd,
		.send_ops_flags = SEND_OPS,
	};
	x->s.qp = ibv_create_qp_ex(x->s.ctx, &qa);
	if (!x->s.qp)
		die("ibv_create_qp_ex");
	x->qp = ibv_qp_to_qp_ex(x->s.qp);
	if (!x->qp)
		die("ibv_qp_to_qp_ex: no extended QP");
	x->s.max_inline = qa.cap.max_inline_data;
}

/* A completion as the accessors read it. */
struct exwc {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len, qp_num, src_qp, imm;
	unsigned int flags;
};

static void read_wc(struct ibv_cq_ex *cq, struct exwc *w)
{
	w->wr_id = cq->wr_id;
	w->status = cq->status;
	w->opcode = ibv_wc_read_opcode(cq);
	w->byte_len = ibv_wc_read_byte_len(cq);
	w->qp_num = ibv_wc_read_qp_num(cq);
	w->src_qp = ibv_wc_read_src_qp(cq);
	w->flags = ibv_wc_read_wc_flags(cq);
	w->imm = w->flags & IBV_WC_WITH_IMM ? ntohl(ibv_wc_read_imm_data(cq)) : 0;
}

/* Up to `max` completions from `cq` in one start/next/end pass once the first is there
 * (waiting up to 20 s for it); their number. */
static int poll_ex(struct ibv_cq_ex *cq, struct exwc *w, int max)
{
	struct ibv_poll_cq_attr attr = {};
	struct timespec t0, t;
	int rc, n = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while ((rc = ibv_start_poll(cq, &attr)) == ENOENT) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20) {
			FAIL("no completion within 20 s");
			return 0;
		}
	}
	if (rc) {
		FAIL("ibv_start_poll: %s", strerror(rc));
		return 0;
	}
	do
		read_wc(cq, &w[n++]);
	while (n < max && (rc = ibv_next_poll(cq)) == 0);
	ibv_end_poll(cq);
	if (n < max && rc != ENOENT)
		FAIL("ibv_next_poll: %s", strerror(rc));
	return n;
}

/* Exactly `want` completions from `cq` (several passes if they come apart), into `w`. */
static int poll_exactly(struct ibv_cq_ex *cq, struct exwc *w, int want)
{
	int got = 0;

	while (got < want) {
		int n = poll_ex(cq, w + got, want - got);
		if (!n)
			break;
		got += n;
	}
	return got;
}

static const char *names[] = { "WRITE", "WRITE_IMM", "SEND", "SEND_IMM", "READ" };

/* One transfer a -> b through ibv_wr_*: `len` bytes (READ: b's into a), three SGEs or,
 * `inl`, inline from two buffers; every byte and completion field. */
static void wr_transfer(struct ex_side *a, struct ex_side *b, enum ibv_wr_opcode op, size_t len,
			int inl)
{
	static uint64_t id = 1000;
	uint8_t *src = a->s.buf.addr + 3, *dst = b->s.buf.addr + MAX_MSG + 64 + 5;
	int imm = op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM;
	int recv = op == IBV_WR_SEND || imm;
	uint32_t immv = 0xe0000000u | (uint32_t)len;
	struct ibv_sge ss[4], rs[4];
	char what[96];
	int bad = 0;

	snprintf(what, sizeof(what), "ibv_wr %s %zu B%s", names[op], len, inl ? " inline" : "");
	if (op == IBV_WR_RDMA_READ) {
		src = b->s.buf.addr + MAX_MSG + 64 + 5;
		dst = a->s.buf.addr + 3;
	}
	fill(src, len);
	memset(dst, 0x5a, len + 16);
	uint64_t sid = id++, rid = id++;
	if (recv) {
		int nr = op == IBV_WR_RDMA_WRITE_WITH_IMM ? 0 : sges(rs, 2, dst, len, b->s.mr->lkey);
		if (post_recv(&b->s, rid, rs, nr))
			return;
	}
	uint8_t *local = op == IBV_WR_RDMA_READ ? dst : src;
	uint64_t raddr = (uintptr_t)(op == IBV_WR_RDMA_READ ? src : dst);
	int ns = sges(ss, 3, local, len, a->s.mr->lkey);
	struct ibv_qp_ex *q = a->qp;
	ibv_wr_start(q);
	q->wr_id = sid;
	q->wr_flags = IBV_SEND_SIGNALED;
	switch (op) {
	case IBV_WR_SEND:
		ibv_wr_send(q);
		break;
	case IBV_WR_SEND_WITH_IMM:
		ibv_wr_send_imm(q, htonl(immv));
		break;
	case IBV_WR_RDMA_WRITE:
		ibv_wr_rdma_write(q, b->s.mr->rkey, raddr);
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		ibv_wr_rdma_write_imm(q, b->s.mr->rkey, raddr, htonl(immv));
		break;
	default:
		ibv_wr_rdma_read(q, b->s.mr->rkey, raddr);
		break;
	}
	if (inl) {
		struct ibv_data_buf bufs[2] = { { src, len / 2 }, { src + len / 2, len - len / 2 } };
		ibv_wr_set_inline_data_list(q, 2, bufs);
	} else {
		ibv_wr_set_sge_list(q, ns, ss);
	}
	int rc = ibv_wr_complete(q);
	if (rc) {
		FAIL("%s: ibv_wr_complete: %s", what, strerror(rc));
		return;
	}
	static const int wc_op[] = { IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_SEND, IBV_WC_SEND,
				     IBV_WC_RDMA_READ };
	struct exwc w;
	if (poll_exactly(a->cq, &w, 1) != 1 || w.wr_id != sid || w.status != IBV_WC_SUCCESS ||
	    (int)w.opcode != wc_op[op] || w.qp_num != a->s.qp->qp_num ||
	    (op == IBV_WR_RDMA_READ && w.byte_len != len)) {
		FAIL("%s: send completion wr_id %llu status %d opcode %d byte_len %u qp %u", what,
		     (unsigned long long)w.wr_id, w.status, w.opcode, w.byte_len, w.qp_num);
		bad = 1;
	}
	if (recv) {
		int want = op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
		if (poll_exactly(b->cq, &w, 1) != 1 || w.wr_id != rid || w.status != IBV_WC_SUCCESS ||
		    (int)w.opcode != want || w.byte_len != len || w.qp_num != b->s.qp->qp_num ||
		    w.src_qp != a->s.qp->qp_num || !!(w.flags & IBV_WC_WITH_IMM) != imm ||
		    (imm && w.imm != immv)) {
			FAIL("%s: receive completion wr_id %llu status %d opcode %d byte_len %u src_qp %u "
			     "flags %#x imm %#x", what, (unsigned long long)w.wr_id, w.status, w.opcode,
			     w.byte_len, w.src_qp, w.flags, w.imm);
			bad = 1;
		}
	}
	if (memcmp(src, dst, len)) {
		size_t i = 0;
		while (src[i] == dst[i])
			i++;
		FAIL("%s: byte %zu differs (%#x, sent %#x)", what, i, dst[i], src[i]);
		bad = 1;
	} else if (dst[len] != 0x5a) {
		FAIL("%s: bytes written past the message", what);
		bad = 1;
	}
	if (!bad)
		printf("ok %s\n", what);
}

/* BATCH WRITEs of 64 KiB in one batch, one ibv_wr_complete; their completions in one pass. */
static void check_batch(struct ex_side *a, struct ex_side *b)
{
	const size_t piece = 64u << 10;
	uint8_t *src = a->s.buf.addr, *dst = b->s.buf.addr + MAX_MSG;
	struct exwc w[BATCH];

	fill(src, piece * BATCH);
	memset(dst, 0, piece * BATCH);
	ibv_wr_start(a->qp);
	for (int i = 0; i < BATCH; i++) {
		a->qp->wr_id = 5000 + i;
		a->qp->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_rdma_write(a->qp, b->s.mr->rkey, (uintptr_t)dst + i * piece);
		ibv_wr_set_sge(a->qp, a->s.mr->lkey, (uintptr_t)src + i * piece, piece);
	}
	int rc = ibv_wr_complete(a->qp);
	/* Wait for the last, then take them all in one pass. */
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!rc && memcmp(src + (BATCH - 1) * piece, dst + (BATCH - 1) * piece, piece)) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 20)
			break;
		usleep(1000);
	}
	usleep(100000);
	int n = rc ? 0 : poll_ex(a->cq, w, BATCH);
	n += n < BATCH ? poll_exactly(a->cq, w + n, BATCH - n) : 0;
	int order = 1;
	for (int i = 0; i < n; i++)
		order &= w[i].wr_id == 5000u + i && w[i].status == IBV_WC_SUCCESS;
	if (rc || n != BATCH || !order || memcmp(src, dst, piece * BATCH))
		FAIL("a batch of %d WRITEs: ibv_wr_complete %s, %d completions%s, bytes %s", BATCH,
		     strerror(rc), n, order ? " in order" : " out of order",
		     memcmp(src, dst, piece * BATCH) ? "differ" : "equal");
	else
		printf("ok a batch of %d WRITEs of 64 KiB, one ibv_wr_complete: %d completions in order, "
		       "every byte\n", BATCH, n);
}

/* A batch with a failed call posts nothing; ibv_post_send waits for an open batch (EBUSY);
 * ibv_wr_abort drops it. */
static void check_refusals(struct ex_side *a, struct ex_side *b)
{
	uint8_t big[256] = { 0 };
	struct exwc w;

	ibv_wr_start(a->qp);
	a->qp->wr_id = 7001;
	a->qp->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(a->qp, b->s.mr->rkey, (uintptr_t)b->s.buf.addr);
	ibv_wr_set_sge(a->qp, a->s.mr->lkey, (uintptr_t)a->s.buf.addr, 8);
	a->qp->wr_id = 7002;
	ibv_wr_rdma_write(a->qp, b->s.mr->rkey, (uintptr_t)b->s.buf.addr);
	ibv_wr_set_inline_data(a->qp, big, a->s.max_inline + 1);
	int rc = ibv_wr_complete(a->qp);
	struct ibv_sge s = { (uintptr_t)a->s.buf.addr, 8, a->s.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7003, .sg_list = &s, .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
			   *badwr = NULL;
	wr.wr.rdma.remote_addr = (uintptr_t)b->s.buf.addr;
	wr.wr.rdma.rkey = b->s.mr->rkey;
	ibv_wr_start(a->qp);
	int busy = ibv_post_send(a->s.qp, &wr, &badwr);
	ibv_wr_abort(a->qp);
	int after = ibv_post_send(a->s.qp, &wr, &badwr);
	int n = after ? 0 : poll_exactly(a->cq, &w, 1);
	if (rc != EINVAL || busy != EBUSY || after || n != 1 || w.wr_id != 7003)
		FAIL("refusals: a batch with inline data past max_inline_data completed with %s "
		     "(wanted EINVAL); ibv_post_send in an open batch %s (wanted EBUSY), after "
		     "ibv_wr_abort %s; then %d completion(s), the first wr_id %llu (wanted 7003 alone)",
		     strerror(rc), strerror(busy), strerror(after), n, (unsigned long long)w.wr_id);
	else
		printf("ok a failed batch posts nothing (EINVAL); ibv_post_send in an open batch is "
		       "EBUSY; ibv_wr_abort drops the batch\n");
	usleep(100000);
	struct ibv_poll_cq_attr attr = {};
	if (ibv_start_poll(a->cq, &attr) != ENOENT) {
		FAIL("refusals: a completion of the failed batch (wr_id %llu)",
		     (unsigned long long)a->cq->wr_id);
		ibv_end_poll(a->cq);
	}
}

/* The strict-mode thread's work: BATCH SENDs posted and all completions polled. */
struct strict_run {
	struct ex_side *a, *b;
	int posted, sends, recvs, bad;
};

static void *strict_thread(void *arg)
{
	struct strict_run *r = arg;
	struct ibv_poll_cq_attr attr = {};
	unsigned long spins = 0;

	/* From here, any system call but read, write, _exit and sigreturn kills the process. */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_STRICT, 0, 0, 0)) {
		r->bad = -1;
		return NULL;
	}
	ibv_wr_start(r->a->qp);
	for (int i = 0; i < BATCH; i++) {
		r->a->qp->wr_id = 9000 + i;
		r->a->qp->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send(r->a->qp);
		ibv_wr_set_sge(r->a->qp, r->a->s.mr->lkey, (uintptr_t)r->a->s.buf.addr + 64 * i, 64);
	}
	r->posted = ibv_wr_complete(r->a->qp) == 0;
	while ((r->sends < BATCH || r->recvs < BATCH) && spins++ < 4000000000ul) {
		struct { struct ibv_cq_ex *cq; int *n; } cqs[2] = { { r->a->cq, &r->sends },
								    { r->b->cq, &r->recvs } };
		for (int c = 0; c < 2; c++) {
			if (ibv_start_poll(cqs[c].cq, &attr))
				continue;
			do {
				if (cqs[c].cq->status != IBV_WC_SUCCESS)
					r->bad++;
				(*cqs[c].n)++;
			} while (ibv_next_poll(cqs[c].cq) == 0);
			ibv_end_poll(cqs[c].cq);
		}
	}
	syscall(SYS_exit, 0);
	return NULL;
}

static void check_no_syscall(struct ex_side *a, struct ex_side *b)
{
	struct strict_run r = { .a = a, .b = b };
	struct ibv_sge s[BATCH];
	pthread_t t;

	for (int i = 0; i < BATCH; i++) {
		s[i] = (struct ibv_sge){ (uintptr_t)b->s.buf.addr + 64 * i, 64, b->s.mr->lkey };
		if (post_recv(&b->s, 8000 + i, &s[i], 1))
			return;
	}
	if (pthread_create(&t, NULL, strict_thread, &r) || pthread_join(t, NULL))
		die("the strict-mode thread");
	if (r.bad || !r.posted || r.sends != BATCH || r.recvs != BATCH)
		FAIL("in seccomp strict mode: ibv_wr_complete %s, %d send and %d receive completions "
		     "(wanted %d each), %d bad", r.posted ? "ok" : "failed", r.sends, r.recvs, BATCH,
		     r.bad);
	else
		printf("ok the fast path makes no system call: %d SENDs posted by ibv_wr_* and %d + %d "
		       "completions polled by ibv_start_poll in seccomp strict mode\n", BATCH, r.sends,
		       r.recvs);
}

/* ATOMIC WRITE and FLUSH from a to b, then a FLUSH to persistence (the QPs end in ERR). */
static void check_iba15(struct ex_side *a, struct ex_side *b)
{
	uint64_t v[4] = { 0x0102030405060708ull, 0x1112131415161718ull, ~0ull, 42 };
	uint8_t *dst = b->s.buf.addr;
	struct exwc w[8];
	struct ibv_mr *mr = ibv_reg_mr(b->s.pd, dst, 4096, RW | IBV_ACCESS_FLUSH_GLOBAL);
	struct ibv_qp_attr qa = { .qp_access_flags = RW | IBV_ACCESS_FLUSH_GLOBAL };

	if (!mr || ibv_modify_qp(b->s.qp, &qa, IBV_QP_ACCESS_FLAGS)) {
		FAIL("an MR and a QP allowing IBV_ACCESS_FLUSH_GLOBAL: %s", strerror(errno));
		return;
	}
	memset(dst, 0xee, 48);
	ibv_wr_start(a->qp);
	a->qp->wr_flags = IBV_SEND_SIGNALED;
	for (int i = 0; i < 4; i++) {
		a->qp->wr_id = 8000 + i;
		ibv_wr_atomic_write(a->qp, mr->rkey, (uintptr_t)dst + 8 * i, &v[i]);
	}
	a->qp->wr_id = 8004;
	ibv_wr_flush(a->qp, mr->rkey, (uintptr_t)dst, 32, IBV_FLUSH_GLOBAL, IBV_FLUSH_RANGE);
	a->qp->wr_id = 8005;
	ibv_wr_flush(a->qp, mr->rkey, 0, 0, IBV_FLUSH_GLOBAL, IBV_FLUSH_MR);
	int rc = ibv_wr_complete(a->qp);
	int n = rc ? 0 : poll_exactly(a->cq, w, 6);
	int ok = n == 6;
	for (int i = 0; i < n; i++)
		ok &= w[i].wr_id == 8000u + i && w[i].status == IBV_WC_SUCCESS &&
		      w[i].opcode == (i < 4 ? IBV_WC_ATOMIC_WRITE : IBV_WC_FLUSH) &&
		      w[i].byte_len == (i < 4 ? 8u : 0u);
	uint8_t tail[16];
	memset(tail, 0xee, sizeof(tail));
	if (rc || !ok || memcmp(dst, v, 32) || memcmp(dst + 32, tail, 16))
		FAIL("ATOMIC WRITE and FLUSH: ibv_wr_complete %s, %d completions%s, bytes %s",
		     strerror(rc), n, ok ? "" : " not all as wanted",
		     memcmp(dst, v, 32) ? "differ" : "beyond the words touched");
	else
		printf("ok 4 ATOMIC WRITEs of 8 bytes (each stored, nothing beyond), a FLUSH of their "
		       "range and of the whole MR: completions in order with their opcodes\n");
	ibv_wr_start(a->qp);
	a->qp->wr_id = 8006;
	ibv_wr_flush(a->qp, mr->rkey, (uintptr_t)dst, 8, IBV_FLUSH_PERSISTENT, IBV_FLUSH_RANGE);
	rc = ibv_wr_complete(a->qp);
	n = rc ? 0 : poll_exactly(a->cq, w, 1);
	if (n != 1 || w[0].status != IBV_WC_REM_ACCESS_ERR)
		FAIL("a FLUSH to the persistence domain: %s, status %s", strerror(rc),
		     n ? ibv_wc_status_str(w[0].status) : "none");
	else
		printf("ok a FLUSH to the persistence domain (which the NIC has not): "
		       "IBV_WC_REM_ACCESS_ERR\n");
	ibv_dereg_mr(mr);
}

void check_ex(void)
{
	static const size_t sizes[] = { 0, 1, 4095, 4097, 65536, (1u << 20) + 3, MAX_MSG };
	struct ex_side a, b;

	ex_open(&a, dev_a, 0);
	ex_open(&b, dev_b, 1);
	connect_qp(&a.s, &b.s, 7);
	connect_qp(&b.s, &a.s, 7);
	for (int op = IBV_WR_RDMA_WRITE; op <= IBV_WR_RDMA_READ; op++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			wr_transfer(&a, &b, op, sizes[i], 0);
	for (size_t len = 1; len <= a.s.max_inline; len = len * 2 + 1)
		wr_transfer(&a, &b, IBV_WR_SEND, len, 1);
	check_batch(&a, &b);
	check_refusals(&a, &b);
	check_no_syscall(&a, &b);
	check_iba15(&a, &b);
	side_close(&a.s);
	side_close(&b.s);
}
