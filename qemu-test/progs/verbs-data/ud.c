// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data's UD check: UD QPs (IBV_QPT_UD) and address handles through libibverbs.
 *
 *   ud  SEND and SEND with immediate from 0 B to the port's MTU, and inline: every byte
 *       behind the 40-byte GRH area of the receive buffer, every completion field (byte_len
 *       40 + n, src_qp, slid, IBV_WC_WITH_IMM and the immediate data, no IBV_WC_GRH on this
 *       InfiniBand port, whose packets carry no GRH); an AH with a GRH (ibv_create_ah
 *       is_global) delivers too; a Q_Key that is not the receiver's drops the datagram (no
 *       completion at the receiver; the sender's succeeds) and the next one takes the
 *       receive; the sender's own Q_Key on request (bit 31 of remote_qkey); a WRITE, a READ,
 *       an atomic and a WR without an AH refused at post (EINVAL); ibv_create_ah for port
 *       2, LID 0, a multicast LID or GID index 1: EINVAL; a SEND above the MTU completes in
 *       IBV_WC_LOC_LEN_ERR.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "verbs_data.h"

#define QKEY 0x11110000u
#define GRH 40u

/* RESET -> INIT -> RTR -> RTS with Q_Key QKEY. */
static void ud_up(struct side *s)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qkey = QKEY };

	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
		die("UD modify to INIT");
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE))
		die("UD modify to RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0x100 + s->qp->qp_num;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("UD modify to RTS");
}

/* a on dev_a and b on dev_b, each with a UD QP in RTS. */
static void ud_pair(struct side *a, struct side *b)
{
	qp_kind = IBV_QPT_UD;
	side_open(a, dev_a, 0, RW);
	side_open(b, dev_b, 1, RW);
	qp_kind = IBV_QPT_RC;
	ud_up(a);
	ud_up(b);
}

/* Posts a receive of GRH + 4096 bytes at offset `off` of b's buffer, cleared first. */
static void recv_at(struct side *b, uint64_t wr_id, size_t off)
{
	struct ibv_sge s = { .addr = (uintptr_t)b->buf.addr + off, .length = GRH + 4096,
			     .lkey = b->mr->lkey };

	memset(b->buf.addr + off, 0xee, GRH + 4096);
	if (post_recv(b, wr_id, &s, 1))
		die("UD post_recv");
}

/* Posts a datagram of `len` bytes from the start of a's buffer to b through `ah`. */
static int send_to(struct side *a, struct side *b, struct ibv_ah *ah, uint64_t wr_id,
		   enum ibv_wr_opcode op, size_t len, uint32_t qkey, int flags)
{
	struct ibv_sge s = { .addr = (uintptr_t)a->buf.addr, .length = len, .lkey = a->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &s, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED | flags, .imm_data = htobe32(0xa1b2c3d4) },
			   *bad = NULL;

	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = b->qp->qp_num;
	wr.wr.ud.remote_qkey = qkey;
	return ibv_post_send(a->qp, &wr, &bad);
}

/* Whether s's CQ stays empty for 300 ms. */
static int quiet(struct side *s)
{
	struct ibv_wc wc;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		if (ibv_poll_cq(s->cq, 1, &wc) != 0)
			return 0;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < 300);
	return 1;
}

/* One datagram of `len` bytes a -> b, checked at both ends, byte for byte. */
static void datagram(struct side *a, struct side *b, struct ibv_ah *ah, enum ibv_wr_opcode op,
		     size_t len, int flags, const char *what)
{
	static uint64_t id = 1000;
	size_t off = (id % 4) * 8192;

	fill(a->buf.addr, len);
	recv_at(b, ++id, off);
	if (send_to(a, b, ah, id, op, len, QKEY, flags)) {
		FAIL("UD %s %zu B: post_send failed", what, len);
		return;
	}
	if (expect_wc(a, "UD send", id, IBV_WC_SUCCESS, IBV_WC_SEND, -1))
		return;
	struct ibv_wc wc = poll_one(b);
	int imm = op == IBV_WR_SEND_WITH_IMM;
	uint32_t want_flags = imm ? IBV_WC_WITH_IMM : 0;
	if (wc.wr_id != id || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
	    wc.byte_len != GRH + len || wc.src_qp != a->qp->qp_num || wc.slid != a->lid ||
	    wc.qp_num != b->qp->qp_num || (wc.wc_flags & (IBV_WC_WITH_IMM | IBV_WC_GRH)) != want_flags ||
	    (imm && be32toh(wc.imm_data) != 0xa1b2c3d4)) {
		FAIL("UD %s %zu B: receive wr_id %llu status %s opcode %d byte_len %u src_qp %u slid %u "
		     "qp %u wc_flags %#x imm %#x; wanted wr_id %llu, %zu bytes from QP %u LID %u",
		     what, len, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode,
		     wc.byte_len, wc.src_qp, wc.slid, wc.qp_num, wc.wc_flags, be32toh(wc.imm_data),
		     (unsigned long long)id, GRH + len, a->qp->qp_num, a->lid);
		return;
	}
	if (memcmp(b->buf.addr + off + GRH, a->buf.addr, len))
		FAIL("UD %s %zu B: the bytes differ", what, len);
	else if (len < 4096 && b->buf.addr[off + GRH + len] != 0xee)
		FAIL("UD %s %zu B: a byte written past the datagram", what, len);
}

/* A WRITE, a READ, a compare and swap and a SEND without an AH: EINVAL, nothing posted. */
static void check_refused(struct side *a, struct side *b, struct ibv_ah *ah)
{
	static const enum ibv_wr_opcode ops[] = { IBV_WR_RDMA_WRITE, IBV_WR_RDMA_READ,
						  IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_SEND };
	static const char *names[] = { "a WRITE", "a READ", "a compare and swap", "a SEND without an AH" };

	for (int i = 0; i < 4; i++) {
		int rc = send_to(a, b, ops[i] == IBV_WR_SEND ? NULL : ah, 90 + i, ops[i], 8, QKEY, 0);
		if (rc != EINVAL)
			FAIL("UD: %s posted: %s; wanted EINVAL", names[i], rc ? strerror(rc) : "success");
		else
			printf("ok UD: %s refused at post (EINVAL)\n", names[i]);
	}
	if (!quiet(a))
		FAIL("UD: a completion after the refused posts");
}

/* ibv_create_ah's refusals: EINVAL each. */
static void check_bad_ahs(struct side *a, uint16_t lid)
{
	struct {
		const char *what;
		struct ibv_ah_attr attr;
	} bad[] = {
		{ "port 2", { .dlid = lid, .port_num = 2 } },
		{ "LID 0", { .dlid = 0, .port_num = 1 } },
		{ "a multicast LID", { .dlid = 0xc001, .port_num = 1 } },
		{ "GID index 1", { .dlid = lid, .port_num = 1, .is_global = 1,
				   .grh = { .sgid_index = 1, .hop_limit = 64 } } },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		errno = 0;
		struct ibv_ah *ah = ibv_create_ah(a->pd, &bad[i].attr);
		if (ah || errno != EINVAL) {
			FAIL("ibv_create_ah for %s: %s; wanted EINVAL", bad[i].what,
			     ah ? "created" : strerror(errno));
			if (ah)
				ibv_destroy_ah(ah);
		} else {
			printf("ok UD: ibv_create_ah for %s refused (EINVAL)\n", bad[i].what);
		}
	}
}

void check_ud(void)
{
	static const size_t sizes[] = { 0, 1, 63, 1000, 4095, 4096 };
	struct side a, b;
	struct ibv_port_attr port;

	ud_pair(&a, &b);
	if (ibv_query_port(a.ctx, 1, &port))
		die("ibv_query_port");
	if (port.active_mtu != IBV_MTU_4096)
		FAIL("UD: the port's MTU is %d, the check assumes 4096", port.active_mtu);
	struct ibv_ah_attr aa = { .dlid = b.lid, .port_num = 1 };
	struct ibv_ah *ah = ibv_create_ah(a.pd, &aa);
	if (!ah)
		die("ibv_create_ah");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		datagram(&a, &b, ah, IBV_WR_SEND, sizes[i], 0, "SEND");
		datagram(&a, &b, ah, IBV_WR_SEND_WITH_IMM, sizes[i], 0, "SEND with immediate");
	}
	for (size_t len = 1; len <= a.max_inline; len = len * 2 + 1)
		datagram(&a, &b, ah, IBV_WR_SEND, len, IBV_SEND_INLINE, "inline SEND");
	printf("ok UD: SEND and SEND with immediate, 0 B to 4096 B and inline, bytes and completions\n");

	union ibv_gid gid;
	if (ibv_query_gid(b.ctx, 1, 0, &gid))
		die("ibv_query_gid");
	struct ibv_ah_attr ga = { .dlid = b.lid, .port_num = 1, .is_global = 1,
				  .grh = { .dgid = gid, .sgid_index = 0, .hop_limit = 64 } };
	struct ibv_ah *gah = ibv_create_ah(a.pd, &ga);
	if (!gah)
		die("ibv_create_ah with a GRH");
	datagram(&a, &b, gah, IBV_WR_SEND, 777, 0, "SEND through a GRH AH");
	if (ibv_destroy_ah(gah))
		die("ibv_destroy_ah");
	printf("ok UD: an AH with a GRH delivers\n");

	/* A wrong Q_Key: dropped; the receive stays for the next datagram. */
	fill(a.buf.addr, 100);
	recv_at(&b, 7, 0);
	if (send_to(&a, &b, ah, 8, IBV_WR_SEND, 100, QKEY + 1, 0))
		die("UD post_send");
	expect_wc(&a, "UD send with a wrong Q_Key", 8, IBV_WC_SUCCESS, IBV_WC_SEND, -1);
	if (!quiet(&b))
		FAIL("UD: a datagram with a wrong Q_Key was received");
	if (send_to(&a, &b, ah, 9, IBV_WR_SEND, 100, 0x80000000u, 0))
		die("UD post_send");
	expect_wc(&a, "UD send with the sender's own Q_Key", 9, IBV_WC_SUCCESS, IBV_WC_SEND, -1);
	if (!expect_wc(&b, "UD receive after a wrong Q_Key", 7, IBV_WC_SUCCESS, IBV_WC_RECV, GRH + 100))
		printf("ok UD: a wrong Q_Key dropped, the sender's own Q_Key (bit 31) taken\n");

	check_refused(&a, &b, ah);
	check_bad_ahs(&a, b.lid);

	/* Above the MTU: LOC_LEN_ERR at the sender (its QP then in ERR). */
	if (send_to(&a, &b, ah, 10, IBV_WR_SEND, 4097, QKEY, 0))
		die("UD post_send");
	if (!expect_wc(&a, "UD send above the MTU", 10, IBV_WC_LOC_LEN_ERR, -1, -1))
		printf("ok UD: a SEND above the MTU completes in IBV_WC_LOC_LEN_ERR\n");

	if (ibv_destroy_ah(ah))
		die("ibv_destroy_ah");
	side_close(&a);
	side_close(&b);
}

/* ud-hold: two UD QPs (dev_a's and dev_b's) with a datagram checked between them, 64 AHs,
 * an SRQ on dev_b with a third UD QP on it, receives posted on both, sends and their
 * completions left unpolled; held until the process is killed (what uverbs must clean up:
 * AHs, UD QPs, an SRQ, in-flight work). */
void check_ud_hold(void)
{
	struct side a, b;

	ud_pair(&a, &b);
	struct ibv_ah *ah[64];
	for (int i = 0; i < 64; i++) {
		struct ibv_ah_attr aa = { .dlid = b.lid, .port_num = 1 };
		ah[i] = ibv_create_ah(a.pd, &aa);
		if (!ah[i])
			die("ibv_create_ah");
	}
	datagram(&a, &b, ah[63], IBV_WR_SEND, 1000, 0, "SEND");
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 64, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(b.pd, &sa);
	if (!srq)
		die("ibv_create_srq");
	struct ibv_qp_init_attr ia = { .send_cq = b.cq, .recv_cq = b.cq, .srq = srq,
				       .qp_type = IBV_QPT_UD,
				       .cap = { .max_send_wr = 8, .max_send_sge = 1 } };
	struct side c = b;
	c.qp = ibv_create_qp(b.pd, &ia);
	if (!c.qp)
		die("ibv_create_qp on the SRQ");
	ud_up(&c);
	for (uint32_t i = 0; i < 16; i++) {
		struct ibv_sge s = { .addr = (uintptr_t)b.buf.addr + 65536 + i * 8192,
				     .length = GRH + 4096, .lkey = b.mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &s, .num_sge = 1 }, *bad = NULL;
		if (ibv_post_srq_recv(srq, &wr, &bad))
			die("ibv_post_srq_recv");
		recv_at(&b, 100 + i, (i % 4) * 8192);
	}
	for (int i = 0; i < 8; i++)
		if (send_to(&a, i % 2 ? &b : &c, ah[i], 200 + (uint64_t)i, IBV_WR_SEND, 512, QKEY, 0))
			die("UD post_send");
	printf("holding 3 UD QPs (one on an SRQ), 64 AHs, receives posted, completions unpolled\n");
	fflush(stdout);
	for (;;)
		pause();
}
