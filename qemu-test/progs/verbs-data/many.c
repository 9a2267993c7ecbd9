// SPDX-License-Identifier: GPL-2.0
/* many, many-2m: many QP pairs on one context at once (see verbs_data.c's usage). */
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "verbs_data.h"

/* Many QPs at once: NPAIRS connected pairs on one context, PD, CQ and MR; every pair's SEND
 * and WRITE of chunk bytes posted before any completion is polled, then all checked. */
#define NPAIRS 16
void check_many(unsigned chunk)
{
	struct side s;
	struct ibv_qp *qa[NPAIRS], *qb[NPAIRS];
	int n = 0, bad = 0;

	memset(&s, 0, sizeof(s));
	s.ctx = open_dev(dev_a);
	side_port(&s);
	s.pd = ibv_alloc_pd(s.ctx);
	s.ch = ibv_create_comp_channel(s.ctx);
	s.cq = s.pd && s.ch ? ibv_create_cq(s.ctx, 4 * NPAIRS, NULL, s.ch, 0) : NULL;
	if (!s.cq)
		die("ibv_alloc_pd/ibv_create_cq");
	if (3 * NPAIRS * (size_t)chunk <= BUF_SIZE) {
		s.buf = alloc_buf(0);
	} else {
		s.buf.len = 3 * NPAIRS * (size_t)chunk;
		s.buf.fd = -1;
		s.buf.addr = mmap(NULL, s.buf.len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (s.buf.addr == MAP_FAILED)
			die("mmap");
	}
	s.mr = reg(&s, RW);
	for (int i = 0; i < NPAIRS; i++) {
		struct ibv_qp_init_attr ia = { .send_cq = s.cq, .recv_cq = s.cq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
							.max_recv_sge = 1 } };
		qa[i] = ibv_create_qp(s.pd, &ia);
		qb[i] = ibv_create_qp(s.pd, &ia);
		if (!qa[i] || !qb[i])
			die("ibv_create_qp");
	}
	for (int i = 0; i < NPAIRS; i++) {
		struct side a = s, b = s;
		a.qp = qa[i];
		b.qp = qb[i];
		connect_qp(&a, &b, 7);
		connect_qp(&b, &a, 7);
	}
	/* Pair i: source at 3 * i * chunk, its SEND lands at + chunk, its WRITE at + 2 * chunk. */
	for (int i = 0; i < NPAIRS; i++) {
		uint8_t *src = s.buf.addr + 3 * i * chunk;
		struct ibv_sge sg = { .addr = (uintptr_t)src, .length = chunk, .lkey = s.mr->lkey };
		struct ibv_sge rg = { .addr = (uintptr_t)src + chunk, .length = chunk, .lkey = s.mr->lkey };
		struct ibv_recv_wr rwr = { .wr_id = 1000 + i, .sg_list = &rg, .num_sge = 1 }, *rbad;
		struct ibv_send_wr w[2] = {
			{ .wr_id = 2000 + i, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
			  .send_flags = IBV_SEND_SIGNALED, .next = &w[1] },
			{ .wr_id = 3000 + i, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
			  .send_flags = IBV_SEND_SIGNALED },
		}, *sbad;
		w[1].wr.rdma.remote_addr = (uintptr_t)src + 2 * chunk;
		w[1].wr.rdma.rkey = s.mr->rkey;
		fill(src, chunk);
		if (ibv_post_recv(qb[i], &rwr, &rbad) || ibv_post_send(qa[i], &w[0], &sbad))
			die("post");
	}
	int seen[4][NPAIRS] = { { 0 } };
	while (n < 3 * NPAIRS) {
		struct ibv_wc wc;
		int got = 0;
		/* More polls for bigger chunks (a co-simulated NIC under TCG is slow). */
		for (long t = 0; t < 2000000L * (chunk >> 16) && !(got = ibv_poll_cq(s.cq, 1, &wc)); t++)
			;
		if (got != 1) {
			FAIL("many QPs: %d of %d completions", n, 3 * NPAIRS);
			bad = 1;
			break;
		}
		int kind = (int)(wc.wr_id / 1000), i = (int)(wc.wr_id % 1000);
		struct ibv_qp *want = kind == 1 ? qb[i < NPAIRS ? i : 0] : qa[i < NPAIRS ? i : 0];
		if (kind < 1 || kind > 3 || i >= NPAIRS || wc.status != IBV_WC_SUCCESS || wc.qp_num != want->qp_num ||
		    seen[kind][i]++) {
			FAIL("many QPs: completion wr_id %llu status %s qp %u", (unsigned long long)wc.wr_id,
			     ibv_wc_status_str(wc.status), wc.qp_num);
			bad = 1;
		}
		n++;
	}
	for (int i = 0; i < NPAIRS; i++) {
		uint8_t *src = s.buf.addr + 3 * i * chunk;
		if (memcmp(src, src + chunk, chunk) || memcmp(src, src + 2 * chunk, chunk)) {
			FAIL("many QPs: pair %d's bytes differ", i);
			bad = 1;
		}
	}
	if (!bad)
		printf("ok %d QP pairs at once on one context: %d SENDs and %d WRITEs of %u B, every byte\n",
		       NPAIRS, NPAIRS, NPAIRS, chunk);
	for (int i = 0; i < NPAIRS; i++)
		if (ibv_destroy_qp(qa[i]) || ibv_destroy_qp(qb[i]))
			die("ibv_destroy_qp");
	s.qp = NULL;
	if (ibv_dereg_mr(s.mr) || ibv_destroy_cq(s.cq) || ibv_destroy_comp_channel(s.ch) || ibv_dealloc_pd(s.pd))
		die("destroy");
	munmap(s.buf.addr, s.buf.len);
	ibv_close_device(s.ctx);
}
