// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data's check of what UCX and NCCL do that plain tests do not (the rig is
 * verbs_data.c):
 *   quirks  - a zero-length RDMA WRITE with num_sge 0, rkey 0 and remote_addr 0, inline and
 *             not (UCX's flush): completes, touches nothing;
 *           - receives posted with no SGE take a WRITE with immediate (NCCL);
 *           - a QP connected to itself READs 1 byte of its own MR (NCCL's flush);
 *           - ibv_reg_dmabuf_mr with fd -1 fails with EBADF (UCX and NCCL probe with it);
 *           - ibv_reg_mr_iova2: an MR whose iova is not its address: local SGEs and remote
 *             addresses in iova space, WRITE and READ land on the right bytes;
 *           - an RC QP with 5 send SGEs and 64 bytes inline: a SEND gathered from 5 SGEs,
 *             and a 64-byte inline SEND, every byte
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "verbs_data.h"

/* The zero-length WRITE UCX posts to flush a QP: no SGE, no key, no address. */
static void zero_write(struct side *a, int inl)
{
	const char *what = inl ? "zero-length inline WRITE, no SGE, rkey 0, address 0" :
				 "zero-length WRITE, no SGE, rkey 0, address 0";
	uint64_t id = inl ? 901 : 902;

	if (post_send(a, id, IBV_WR_RDMA_WRITE, NULL, 0, IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0), 0, 0, 0))
		return;
	if (!expect_wc(a, what, id, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1))
		printf("ok %s\n", what);
}

static void zero_sge_recv(struct side *a, struct side *b)
{
	const char *what = "WRITE with immediate into receives posted with no SGE";
	uint8_t *src = a->buf.addr + 100, *dst = b->buf.addr + 300;
	struct ibv_sge s = { .addr = (uintptr_t)src, .length = 4000, .lkey = a->mr->lkey };
	int bad = 0;

	fill(src, s.length);
	memset(dst, 0, s.length);
	for (uint64_t i = 0; i < 3; i++)
		if (post_recv(b, 910 + i, NULL, 0))
			return;
	for (uint32_t i = 0; i < 3; i++)
		if (post_send(a, 920 + i, IBV_WR_RDMA_WRITE_WITH_IMM, &s, 1, IBV_SEND_SIGNALED,
			      (uintptr_t)dst, b->mr->rkey, 0xabc0 + i))
			return;
	for (uint32_t i = 0; i < 3; i++) {
		bad |= expect_wc(a, what, 920 + i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1);
		struct ibv_wc wc = poll_one(b);
		if (wc.wr_id != 910 + i || wc.status != IBV_WC_SUCCESS ||
		    wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || !(wc.wc_flags & IBV_WC_WITH_IMM) ||
		    ntohl(wc.imm_data) != 0xabc0 + i || wc.byte_len != s.length) {
			FAIL("%s: receive %u: wr_id %llu status %s opcode %d flags %#x imm %#x byte_len %u",
			     what, i, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status),
			     wc.opcode, wc.wc_flags, ntohl(wc.imm_data), wc.byte_len);
			bad = -1;
		}
	}
	if (memcmp(src, dst, s.length)) {
		FAIL("%s: the bytes differ", what);
		bad = -1;
	}
	if (!bad)
		printf("ok %s (3 of 4000 B)\n", what);
}

/* NCCL's flush: a QP connected to itself READs one byte of its own MR. */
static void self_read(void)
{
	const char *what = "1-byte READ on a QP connected to itself";
	struct side s;

	side_open(&s, dev_a, 0, RW);
	connect_qp(&s, &s, 7);
	uint8_t *src = s.buf.addr + 4096 + 17, *dst = s.buf.addr + 8192 + 3;
	*src = 0x5a;
	*dst = 0;
	dst[1] = 0xee;
	struct ibv_sge sg = { .addr = (uintptr_t)dst, .length = 1, .lkey = s.mr->lkey };
	if (!post_send(&s, 930, IBV_WR_RDMA_READ, &sg, 1, IBV_SEND_SIGNALED, (uintptr_t)src, s.mr->rkey, 0) &&
	    !expect_wc(&s, what, 930, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 1)) {
		if (*dst != 0x5a || dst[1] != 0xee)
			FAIL("%s: read %#x (want 0x5a), the next byte %#x (want 0xee)", what, *dst, dst[1]);
		else
			printf("ok %s\n", what);
	}
	side_close(&s);
}

static void dmabuf_bad_fd(struct side *a)
{
	errno = 0;
	struct ibv_mr *mr = ibv_reg_dmabuf_mr(a->pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
	if (mr) {
		FAIL("ibv_reg_dmabuf_mr with fd -1 succeeded");
		ibv_dereg_mr(mr);
	} else if (errno != EBADF) {
		FAIL("ibv_reg_dmabuf_mr with fd -1: %s (%d), want EBADF", strerror(errno), errno);
	} else {
		printf("ok ibv_reg_dmabuf_mr with fd -1: EBADF\n");
	}
}

/* An MR registered at an iova that is not its address: both ends address it by iova. */
static void iova2(struct side *a, struct side *b)
{
	const char *what = "ibv_reg_mr_iova2 (iova 0x7000000000 + 0x123)";
	const uint64_t iova = 0x7000000000ull + 0x123;
	const size_t len = 3 * 4096 + 100;
	uint8_t *mem_a = a->buf.addr + 0x123, *mem_b = b->buf.addr + MAX_MSG + 0x123;
	struct ibv_mr *ma = ibv_reg_mr_iova2(a->pd, mem_a, 2 * len, iova, RW);
	struct ibv_mr *mb = ibv_reg_mr_iova2(b->pd, mem_b, 2 * len, iova, RW);
	int bad = 0;

	if (!ma || !mb) {
		FAIL("%s: %s", what, strerror(errno));
		goto out;
	}
	/* WRITE: a's first len bytes (by iova) to b's second len bytes (by iova). */
	fill(mem_a, len);
	memset(mem_b, 0, 2 * len);
	struct ibv_sge sg = { .addr = iova, .length = len, .lkey = ma->lkey };
	if (post_send(a, 940, IBV_WR_RDMA_WRITE, &sg, 1, IBV_SEND_SIGNALED, iova + len, mb->rkey, 0))
		goto out;
	bad |= expect_wc(a, what, 940, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1);
	if (memcmp(mem_a, mem_b + len, len) || mem_b[0] || mem_b[len - 1]) {
		FAIL("%s: WRITE: the bytes are not where the iova says", what);
		bad = -1;
	}
	/* READ: b's first len bytes (by iova) into a's second len bytes (by iova). */
	fill(mem_b, len);
	memset(mem_a + len, 0, len);
	sg.addr = iova + len;
	if (post_send(a, 941, IBV_WR_RDMA_READ, &sg, 1, IBV_SEND_SIGNALED, iova, mb->rkey, 0))
		goto out;
	bad |= expect_wc(a, what, 941, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, len);
	if (memcmp(mem_b, mem_a + len, len)) {
		FAIL("%s: READ: the bytes are not where the iova says", what);
		bad = -1;
	}
	if (!bad)
		printf("ok %s: a WRITE and a READ of %zu B by iova on both ends\n", what, len);
out:
	if ((ma && ibv_dereg_mr(ma)) || (mb && ibv_dereg_mr(mb)))
		die("ibv_dereg_mr (iova2)");
}

/* An RC QP with 5 send SGEs and 64 bytes inline, as UCX's rc_verbs asks for. */
static void five_sges(struct side *a, struct side *b)
{
	const char *what = "RC QP with 5 send SGEs and 64 B inline";
	struct ibv_qp_init_attr ia = {
		.send_cq = a->cq,
		.recv_cq = a->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16, .max_send_sge = 5, .max_recv_sge = 1,
			 .max_inline_data = 64 },
	};
	struct ibv_qp *qp = ibv_create_qp(a->pd, &ia), *old = a->qp;
	if (!qp) {
		FAIL("%s: ibv_create_qp: %s", what, strerror(errno));
		return;
	}
	if (ia.cap.max_send_sge < 5 || ia.cap.max_inline_data < 64)
		FAIL("%s: got %u SGEs and %u B inline", what, ia.cap.max_send_sge, ia.cap.max_inline_data);
	/* b's QP is connected to a's first one: reconnect b to this one for the test. */
	a->qp = qp;
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
	if (ibv_modify_qp(b->qp, &r, IBV_QP_STATE))
		die("modify to RESET");
	connect_qp(a, b, 7);
	connect_qp(b, a, 7);
	uint8_t *src = a->buf.addr + 5000, *dst = b->buf.addr + MAX_MSG + 64;
	size_t lens[5] = { 1, 4095, 4097, 7, 20000 }, total = 0, off = 0;
	struct ibv_sge sg[5];
	for (int i = 0; i < 5; i++)
		total += lens[i];
	fill(src, total + 5 * 64);
	for (int i = 0; i < 5; i++) { /* five pieces, 64 bytes apart */
		sg[i] = (struct ibv_sge){ .addr = (uintptr_t)src + off + 64 * i, .length = lens[i], .lkey = a->mr->lkey };
		off += lens[i];
	}
	memset(dst, 0, total + 16);
	struct ibv_sge rs = { .addr = (uintptr_t)dst, .length = total, .lkey = b->mr->lkey };
	int bad = 0;
	if (post_recv(b, 950, &rs, 1) || post_send(a, 951, IBV_WR_SEND, sg, 5, IBV_SEND_SIGNALED, 0, 0, 0))
		return;
	bad |= expect_wc(a, what, 951, IBV_WC_SUCCESS, IBV_WC_SEND, -1);
	bad |= expect_wc(b, what, 950, IBV_WC_SUCCESS, IBV_WC_RECV, total);
	for (int i = 0, o = 0; i < 5; o += lens[i], i++)
		if (memcmp(dst + o, (uint8_t *)(uintptr_t)sg[i].addr, lens[i])) {
			FAIL("%s: SGE %d's bytes differ", what, i);
			bad = -1;
		}
	/* 64 bytes inline, the buffer overwritten right after the post. */
	uint8_t inl[64], keep[64];
	fill(inl, 64);
	memcpy(keep, inl, 64);
	memset(dst, 0, 64);
	struct ibv_sge is = { .addr = (uintptr_t)inl, .length = 64, .lkey = 0 };
	if (post_recv(b, 952, &rs, 1) ||
	    post_send(a, 953, IBV_WR_SEND, &is, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0, 0, 0))
		return;
	memset(inl, 0, 64);
	bad |= expect_wc(a, what, 953, IBV_WC_SUCCESS, IBV_WC_SEND, -1);
	bad |= expect_wc(b, what, 952, IBV_WC_SUCCESS, IBV_WC_RECV, 64);
	if (memcmp(dst, keep, 64)) {
		FAIL("%s: the 64 inline bytes differ", what);
		bad = -1;
	}
	if (!bad)
		printf("ok %s: a SEND of %zu B from 5 SGEs, a 64 B inline SEND\n", what, total);
	if (ibv_destroy_qp(qp))
		die("ibv_destroy_qp");
	a->qp = old;
}

void check_quirks(void)
{
	struct side a, b;

	pair(&a, &b, RW, 7);
	zero_write(&a, 1);
	zero_write(&a, 0);
	zero_sge_recv(&a, &b);
	dmabuf_bad_fd(&a);
	iova2(&a, &b);
	five_sges(&a, &b);
	side_close(&a);
	side_close(&b);
	self_read();
}
