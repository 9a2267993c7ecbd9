// SPDX-License-Identifier: GPL-2.0
/*
 * stress: many verified transfers over many QPs between two NICs (--dev, --dev2), meant for
 * a wire that loses, duplicates, reorders and corrupts frames. SPAIRS RC QP pairs, each
 * with its own 2 MiB source on A and destination on B and its receive buffers; per round,
 * on every pair at once: a fresh pseudo-random 2 MiB RDMA WRITE and SMALL SENDs of 1 B to
 * 4 KiB, then every completion (status, QP, length) and every byte of every destination.
 * Progress every 50 rounds; one summary line with the counts and the time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "verbs_data.h"

#define SPAIRS 16
#define CHUNK (2u << 20)
#define SMALL 4
#define SMAX 4096u

struct end {
	struct side s;
	uint8_t *mem;
	size_t len;
	struct ibv_mr *mr;
	struct ibv_qp *qp[SPAIRS];
};

static void end_open(struct end *e, const char *dev)
{
	memset(e, 0, sizeof(*e));
	e->s.ctx = open_dev(dev);
	side_port(&e->s);
	e->s.pd = ibv_alloc_pd(e->s.ctx);
	e->s.cq = e->s.pd ? ibv_create_cq(e->s.ctx, 8 * SPAIRS * (SMALL + 1), NULL, NULL, 0) : NULL;
	if (!e->s.cq)
		die("ibv_alloc_pd/ibv_create_cq");
	/* Per pair: the 2 MiB WRITE's buffer, then SMALL buffers of SMAX for the SENDs. */
	e->len = SPAIRS * ((size_t)CHUNK + SMALL * SMAX);
	e->mem = mmap(NULL, e->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->mem == MAP_FAILED)
		die("mmap");
	e->mr = ibv_reg_mr(e->s.pd, e->mem, e->len, RW);
	if (!e->mr)
		die("ibv_reg_mr");
	for (int i = 0; i < SPAIRS; i++) {
		struct ibv_qp_init_attr ia = { .send_cq = e->s.cq, .recv_cq = e->s.cq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = SMALL + 2, .max_recv_wr = SMALL + 2,
							.max_send_sge = 1, .max_recv_sge = 1 } };
		e->qp[i] = ibv_create_qp(e->s.pd, &ia);
		if (!e->qp[i])
			die("ibv_create_qp");
	}
}

static void end_close(struct end *e)
{
	for (int i = 0; i < SPAIRS; i++)
		if (ibv_destroy_qp(e->qp[i]))
			die("ibv_destroy_qp");
	if (ibv_dereg_mr(e->mr) || ibv_destroy_cq(e->s.cq) || ibv_dealloc_pd(e->s.pd))
		die("destroy");
	munmap(e->mem, e->len);
	ibv_close_device(e->s.ctx);
}

/* Fresh pseudo-random bytes, 8 at a time (fill() goes byte by byte: too slow for 10 GB). */
static void fill_fast(uint8_t *p, size_t n)
{
	static uint64_t x = 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < n; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i, &x, n - i < 8 ? n - i : 8);
	}
}

static uint8_t *chunk(struct end *e, int i)
{
	return e->mem + (size_t)i * ((size_t)CHUNK + SMALL * SMAX);
}

static uint8_t *small(struct end *e, int i, int k)
{
	return chunk(e, i) + CHUNK + (size_t)k * SMAX;
}

/* Polls `want` completions from e's CQ (60 s at most), checking each: success, one of e's
 * QPs, and for receives the length `lens` says. Returns the number that were wrong. */
static int reap(struct end *e, int want, unsigned lens[SPAIRS][SMALL])
{
	int bad = 0;
	time_t end = time(NULL) + 60;

	for (int n = 0; n < want;) {
		struct ibv_wc wc[16];
		int got = ibv_poll_cq(e->s.cq, 16, wc);

		if (got < 0)
			die("ibv_poll_cq");
		if (!got) {
			if (time(NULL) > end) {
				FAIL("stress: %d of %d completions in 60 s", n, want);
				return bad + want - n;
			}
			continue;
		}
		for (int j = 0; j < got; j++, n++) {
			int i = (int)(wc[j].wr_id >> 8), k = (int)(wc[j].wr_id & 0xff);
			int ok = wc[j].status == IBV_WC_SUCCESS && i < SPAIRS && wc[j].qp_num == e->qp[i]->qp_num;

			if (ok && lens && (k >= SMALL || wc[j].byte_len != lens[i][k]))
				ok = 0;
			if (!ok) {
				if (bad++ < 5)
					FAIL("stress: completion wr_id %#llx status %s qp %u len %u",
					     (unsigned long long)wc[j].wr_id, ibv_wc_status_str(wc[j].status),
					     wc[j].qp_num, wc[j].byte_len);
			}
		}
	}
	return bad;
}

void check_stress(long rounds)
{
	struct end a, b;
	unsigned lens[SPAIRS][SMALL];
	long writes = 0, sends = 0;
	uint64_t bytes = 0;
	struct timespec t0, t1;

	end_open(&a, dev_a);
	end_open(&b, dev_b);
	for (int i = 0; i < SPAIRS; i++) {
		a.s.qp = a.qp[i];
		b.s.qp = b.qp[i];
		connect_qp(&a.s, &b.s, 7);
		connect_qp(&b.s, &a.s, 7);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long r = 0; r < rounds; r++) {
		for (int i = 0; i < SPAIRS; i++) {
			/* B's copy keeps the last round's bytes: a WRITE that went missing
			 * leaves them, which differ from this round's. */
			fill_fast(chunk(&a, i), CHUNK);
			for (int k = 0; k < SMALL; k++) {
				struct ibv_sge rg = { (uintptr_t)small(&b, i, k), SMAX, b.mr->lkey };
				struct ibv_recv_wr rwr = { .wr_id = ((uint64_t)i << 8) | (uint64_t)k, .sg_list = &rg,
							   .num_sge = 1 }, *rbad;

				lens[i][k] = 1 + (unsigned)rand() % SMAX;
				fill_fast(small(&a, i, k), lens[i][k]);
				memset(small(&b, i, k), 0, SMAX);
				if (ibv_post_recv(b.qp[i], &rwr, &rbad))
					die("ibv_post_recv");
			}
			struct ibv_sge sg = { (uintptr_t)chunk(&a, i), CHUNK, a.mr->lkey };
			struct ibv_send_wr w = { .wr_id = ((uint64_t)i << 8) | 0xff, .sg_list = &sg, .num_sge = 1,
						 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
					   *sbad;

			w.wr.rdma.remote_addr = (uintptr_t)chunk(&b, i);
			w.wr.rdma.rkey = b.mr->rkey;
			if (ibv_post_send(a.qp[i], &w, &sbad))
				die("ibv_post_send WRITE");
			for (int k = 0; k < SMALL; k++) {
				struct ibv_sge ss = { (uintptr_t)small(&a, i, k), lens[i][k], a.mr->lkey };
				struct ibv_send_wr sw = { .wr_id = ((uint64_t)i << 8) | (uint64_t)k, .sg_list = &ss,
							  .num_sge = 1, .opcode = IBV_WR_SEND,
							  .send_flags = IBV_SEND_SIGNALED };

				if (ibv_post_send(a.qp[i], &sw, &sbad))
					die("ibv_post_send SEND");
			}
		}
		int bad = reap(&a, SPAIRS * (SMALL + 1), NULL) + reap(&b, SPAIRS * SMALL, lens);

		for (int i = 0; i < SPAIRS; i++) {
			if (memcmp(chunk(&a, i), chunk(&b, i), CHUNK)) {
				FAIL("stress: round %ld, pair %d: the 2 MiB WRITE's bytes differ", r, i);
				bad++;
			}
			for (int k = 0; k < SMALL; k++)
				if (memcmp(small(&a, i, k), small(&b, i, k), lens[i][k])) {
					FAIL("stress: round %ld, pair %d: SEND %d's bytes differ", r, i, k);
					bad++;
				}
		}
		if (bad) {
			FAIL("stress: round %ld of %ld failed; stopping", r + 1, rounds);
			break;
		}
		writes += SPAIRS;
		sends += SPAIRS * SMALL;
		bytes += (uint64_t)SPAIRS * CHUNK;
		for (int i = 0; i < SPAIRS; i++)
			for (int k = 0; k < SMALL; k++)
				bytes += lens[i][k];
		if ((r + 1) % 50 == 0 || r + 1 == rounds) {
			printf("stress: %ld/%ld rounds, %ld WRITEs of 2 MiB and %ld SENDs checked\n", r + 1,
			       rounds, writes, sends);
			fflush(stdout);
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	if (writes == (long)SPAIRS * rounds)
		printf("ok stress: %ld WRITEs of 2 MiB and %ld SENDs of 1 B to 4 KiB over %d QP pairs, "
		       "%.0f MiB in %.1f s (%.1f MiB/s), every byte\n",
		       writes, sends, SPAIRS, (double)bytes / (1 << 20), s, (double)bytes / (1 << 20) / s);
	end_close(&a);
	end_close(&b);
}
