// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data's atomics check: 64-bit compare and swap and fetch and add through
 * libibverbs, every value checked.
 *
 *   atomics  the device's attributes (atomic_cap IBV_ATOMIC_HCA, max_qp_rd_atom and
 *            max_qp_init_rd_atom 16); compare and swap, unequal and equal, and fetch and add
 *            (wrapping): the old values in the local buffer, the word in the responder's
 *            memory, the completions' opcode and byte_len; THREADS threads, each with its own
 *            context and QP on --dev, each doing ADDS fetch and adds of 1 on one counter of
 *            --dev2 (up to 16 in flight per QP): the counter ends at THREADS * ADDS and the
 *            old values the threads got are exactly 0 .. THREADS * ADDS - 1, each once; the
 *            errors: an unaligned address (IBV_WC_REM_INV_REQ_ERR), an MR and a QP without
 *            REMOTE_ATOMIC (IBV_WC_REM_ACCESS_ERR), a local buffer of 4 bytes
 *            (IBV_WC_LOC_LEN_ERR), each leaving the word as it was. Prints the number of
 *            atomics the responder executed ("atomics executed: N"), which the VM test
 *            compares with the NIC model's count.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "verbs_data.h"

#define THREADS 4
#define ADDS 500
#define DEPTH 16
#define ATOMIC_RW (RW | IBV_ACCESS_REMOTE_ATOMIC)

/* Atomics the responder executed, by this check's count. */
static int executed;

/* RESET -> RTS of `qp` towards QP `dest` at LID `dlid`, remote access `access`, READ and
 * atomic depth `depth` both ways. */
static void connect_raw(struct ibv_qp *qp, uint32_t dest, uint16_t dlid, int access, int depth)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = dest;
	a.rq_psn = 0x300 + dest;
	a.max_dest_rd_atomic = depth;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 0x300 + qp->qp_num;
	a.max_rd_atomic = depth;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* A QP on `s`'s PD and CQ (besides its own). */
static struct ibv_qp *more_qp(struct side *s)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq,
		.recv_cq = s->cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);

	if (!qp)
		die("ibv_create_qp");
	return qp;
}

/* Posts an atomic from `s`: its old value into `local` (`len` bytes, s's MR). */
static int post_atomic(struct side *s, uint64_t wr_id, enum ibv_wr_opcode op, void *local, uint32_t len,
		       uint64_t raddr, uint32_t rkey, uint64_t compare_add, uint64_t swap)
{
	struct ibv_sge sg = { .addr = (uintptr_t)local, .length = len, .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = wr_id, .sg_list = &sg, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad = NULL;
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = compare_add;
	wr.wr.atomic.swap = swap;
	int rc = ibv_post_send(s->qp, &wr, &bad);
	if (rc)
		FAIL("ibv_post_send atomic %llu: %s", (unsigned long long)wr_id, strerror(rc));
	return rc;
}

/* A pair with remote atomics allowed on b's MR (`mr_b`) and both QPs (`qp_access`). */
static void atomic_pair(struct side *a, struct side *b, int mr_b, int qp_access)
{
	side_open(a, dev_a, 0, ATOMIC_RW);
	side_open(b, dev_b, 1, mr_b);
	connect_raw(a->qp, b->qp->qp_num, b->lid, qp_access, DEPTH);
	connect_raw(b->qp, a->qp->qp_num, a->lid, qp_access, DEPTH);
}

static void check_attributes(void)
{
	struct side a;
	struct ibv_device_attr d;

	side_open(&a, dev_b, 0, RW);
	if (ibv_query_device(a.ctx, &d))
		die("ibv_query_device");
	if (d.atomic_cap != IBV_ATOMIC_HCA || d.max_qp_rd_atom != 16 || d.max_qp_init_rd_atom != 16)
		FAIL("%s: atomic_cap %d, max_qp_rd_atom %d, max_qp_init_rd_atom %d; wanted IBV_ATOMIC_HCA (%d), 16, 16",
		     dev_b, d.atomic_cap, d.max_qp_rd_atom, d.max_qp_init_rd_atom, IBV_ATOMIC_HCA);
	else
		printf("ok %s: atomic_cap IBV_ATOMIC_HCA, max_qp_rd_atom 16, max_qp_init_rd_atom 16\n", dev_b);
	side_close(&a);
}

static void check_semantics(void)
{
	struct side a, b;
	int bad = 0;

	atomic_pair(&a, &b, ATOMIC_RW, ATOMIC_RW);
	volatile uint64_t *word = (uint64_t *)(b.buf.addr + 0x1000);
	volatile uint64_t *old = (uint64_t *)(a.buf.addr + 0x2000);
	*word = 0x1111222233334444ull;
	uint64_t raddr = (uintptr_t)word;
	/* Unequal: unchanged; equal: swapped; then an add that wraps. */
	post_atomic(&a, 1, IBV_WR_ATOMIC_CMP_AND_SWP, (void *)&old[0], 8, raddr, b.mr->rkey, 5, 6);
	post_atomic(&a, 2, IBV_WR_ATOMIC_CMP_AND_SWP, (void *)&old[1], 8, raddr, b.mr->rkey,
		    0x1111222233334444ull, 0xfffffffffffffff0ull);
	post_atomic(&a, 3, IBV_WR_ATOMIC_FETCH_AND_ADD, (void *)&old[2], 8, raddr, b.mr->rkey, 0x20, 0);
	bad |= expect_wc(&a, "compare and swap, unequal", 1, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 8);
	bad |= expect_wc(&a, "compare and swap, equal", 2, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP, 8);
	bad |= expect_wc(&a, "fetch and add", 3, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD, 8);
	if (old[0] != 0x1111222233334444ull || old[1] != 0x1111222233334444ull ||
	    old[2] != 0xfffffffffffffff0ull || *word != 0x10) {
		FAIL("atomics: old values %#llx %#llx %#llx, the word %#llx; wanted 0x1111222233334444 twice, "
		     "0xfffffffffffffff0, 0x10",
		     (unsigned long long)old[0], (unsigned long long)old[1], (unsigned long long)old[2],
		     (unsigned long long)*word);
		bad = -1;
	}
	executed += 3;
	if (!bad)
		printf("ok compare and swap (unequal, equal) and fetch and add (wrapping): old values and the word\n");
	side_close(&a);
	side_close(&b);
}

struct adder {
	struct side s;
	uint64_t raddr;
	uint32_t rkey;
	int failed;
};

/* One thread: ADDS fetch and adds of 1, up to DEPTH in flight, each old value kept. */
static void *add_many(void *arg)
{
	struct adder *t = arg;
	uint64_t *old = (uint64_t *)t->s.buf.addr;
	int posted = 0, done = 0;

	while (done < ADDS) {
		while (posted < ADDS && posted - done < DEPTH) {
			if (post_atomic(&t->s, posted, IBV_WR_ATOMIC_FETCH_AND_ADD, &old[posted], 8, t->raddr,
					t->rkey, 1, 0)) {
				t->failed = 1;
				return NULL;
			}
			posted++;
		}
		struct ibv_wc wc = poll_one(&t->s);
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_FETCH_ADD || wc.byte_len != 8 ||
		    wc.wr_id != (uint64_t)done) {
			FAIL("thread: fetch and add %d: status %s opcode %d byte_len %u wr_id %llu", done,
			     ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len, (unsigned long long)wc.wr_id);
			t->failed = 1;
			return NULL;
		}
		done++;
	}
	return NULL;
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;

	return a < b ? -1 : a > b;
}

static void check_counting(void)
{
	struct side b;
	struct adder t[THREADS];
	pthread_t th[THREADS];
	struct ibv_qp *extra[THREADS] = { NULL };

	side_open(&b, dev_b, 1, ATOMIC_RW);
	volatile uint64_t *counter = (uint64_t *)(b.buf.addr + 0x3000);
	*counter = 0;
	for (int i = 0; i < THREADS; i++) {
		memset(&t[i], 0, sizeof(t[i]));
		side_open(&t[i].s, dev_a, 10 + i, ATOMIC_RW);
		struct ibv_qp *rq = i == 0 ? b.qp : (extra[i] = more_qp(&b));
		connect_raw(t[i].s.qp, rq->qp_num, b.lid, ATOMIC_RW, DEPTH);
		connect_raw(rq, t[i].s.qp->qp_num, t[i].s.lid, ATOMIC_RW, DEPTH);
		t[i].raddr = (uintptr_t)counter;
		t[i].rkey = b.mr->rkey;
	}
	for (int i = 0; i < THREADS; i++)
		if (pthread_create(&th[i], NULL, add_many, &t[i]))
			die("pthread_create");
	int failed = 0;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(th[i], NULL);
		failed |= t[i].failed;
	}
	uint64_t *all = calloc(THREADS * ADDS, sizeof(uint64_t));
	if (!all)
		die("calloc");
	for (int i = 0; i < THREADS; i++)
		memcpy(all + i * ADDS, t[i].s.buf.addr, ADDS * sizeof(uint64_t));
	qsort(all, THREADS * ADDS, sizeof(uint64_t), cmp_u64);
	int k = 0;
	while (k < THREADS * ADDS && all[k] == (uint64_t)k)
		k++;
	if (failed) {
		FAIL("%d threads x %d fetch and adds: a thread failed", THREADS, ADDS);
	} else if (*counter != THREADS * ADDS || k != THREADS * ADDS) {
		FAIL("%d threads x %d fetch and adds of 1: the counter is %llu, the old values are 0.. %d and then "
		     "%llu; wanted %d and each of 0 .. %d once",
		     THREADS, ADDS, (unsigned long long)*counter, k - 1,
		     (unsigned long long)(k < THREADS * ADDS ? all[k] : 0), THREADS * ADDS, THREADS * ADDS - 1);
	} else {
		printf("ok %d threads (a context and QP each) x %d fetch and adds of 1 on one counter: %llu, and "
		       "the old values are 0 .. %d, each once\n",
		       THREADS, ADDS, (unsigned long long)*counter, THREADS * ADDS - 1);
	}
	executed += THREADS * ADDS;
	free(all);
	/* The responder's extra QPs, then every side. */
	for (int i = 1; i < THREADS; i++)
		if (ibv_destroy_qp(extra[i]))
			die("ibv_destroy_qp");
	for (int i = 0; i < THREADS; i++)
		side_close(&t[i].s);
	side_close(&b);
}

/* An atomic that must fail with `want` on a fresh pair; the word stays as it was. */
static void check_error(const char *what, int mr_b, int qp_access, uint64_t off, uint32_t len,
			enum ibv_wc_status want)
{
	struct side a, b;

	atomic_pair(&a, &b, mr_b, qp_access);
	volatile uint64_t *word = (uint64_t *)(b.buf.addr + 0x1000);
	*word = 77;
	post_atomic(&a, 9, IBV_WR_ATOMIC_FETCH_AND_ADD, a.buf.addr, len, (uintptr_t)word + off, b.mr->rkey, 1,
		    0);
	int bad = expect_wc(&a, what, 9, want, -1, -1);
	if (*word != 77) {
		FAIL("%s: the word changed to %llu", what, (unsigned long long)*word);
		bad = -1;
	}
	if (!bad)
		printf("ok %s: %s, the word unchanged\n", what, ibv_wc_status_str(want));
	side_close(&a);
	side_close(&b);
}

void check_atomics(void)
{
	check_attributes();
	check_semantics();
	check_counting();
	check_error("an unaligned address", ATOMIC_RW, ATOMIC_RW, 4, 8, IBV_WC_REM_INV_REQ_ERR);
	check_error("an MR without REMOTE_ATOMIC", RW, ATOMIC_RW, 0, 8, IBV_WC_REM_ACCESS_ERR);
	check_error("a QP without REMOTE_ATOMIC", ATOMIC_RW, RW, 0, 8, IBV_WC_REM_ACCESS_ERR);
	check_error("a local buffer of 4 bytes", ATOMIC_RW, ATOMIC_RW, 0, 4, IBV_WC_LOC_LEN_ERR);
	printf("atomics executed: %d\n", executed);
}
