// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data's checks of what the NIC may touch and when (the rig is verbs_data.c);
 * issue 18, items 1 and 4.
 *
 *   stale  the NIC never touches memory it no longer owns. A user who owns both ends keeps
 *          a WQE in flight, deregisters the MR under it, frees its memory and fills fresh
 *          memory with a pattern (the freed page frames come back to it: counted through
 *          /proc/self/pagemap), then lets the NIC go on:
 *          - READ of 2 MiB, the responder's QP still in INIT (the request is dropped, the
 *            requester's transport timer sends it again): its local MR goes; then the
 *            responder to RTS, and its responses must not land in the pattern;
 *          - WRITE of 2 MiB, likewise: its retransmissions must not carry the pattern to
 *            the responder;
 *          - SEND of 2 MiB stopped half-way into its receive buffer (two NICs only; see
 *            stale_recv): the receive's MR goes; the rest of the message must not land in
 *            the pattern.
 *          Either the deregistration succeeds and the WQE (the receive) ends in an error
 *          completion with its QP in ERR, or it fails with EBUSY (the MR in use) and the
 *          WQE may complete; either way no byte of the pattern changes and none reaches
 *          the responder.
 *   drain  IBV_EVENT_SQ_DRAINED only once every WQE outstanding at RTS->SQD has completed,
 *          with their ACKs and READ responses processed in SQD. Between two NICs, with the
 *          peer NIC's link down while the WQEs go out (so they are in flight, unanswered,
 *          at RTS->SQD): a READ of 1 MiB, then 16 WRITEs of 16 KiB (all within the
 *          requester's window). Then link up; at the event every WQE's completion must
 *          be on the CQ (success, in order, bytes right) and the QP still in SQD; then
 *          SQD->RTS and a WRITE more completes.
 * Every wait is bounded (60 s) and says what it saw.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "verbs_data.h"

#define STALE_LEN (2u << 20)      /* the WQE's local buffer, freed under it */
#define PATTERN_LEN (32u << 20)   /* the fresh memory the freed frames go to */
#define MAGIC 0x5ec7e7ull         /* the pattern's top 24 bits: "secret" */
#define WAIT_S 60

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static enum ibv_qp_state state_of(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		die("ibv_query_qp");
	return a.qp_state;
}

static const char *state_name(enum ibv_qp_state s)
{
	static const char *n[] = { "RESET", "INIT", "RTR", "RTS", "SQD", "SQE", "ERR" };
	return (unsigned)s < sizeof(n) / sizeof(n[0]) ? n[s] : "?";
}

static void init_qp(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = RW };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
}

/* INIT -> RTR -> RTS towards QP `dest` at LID `dlid`, with these PSNs, transport timer
 * `timeout` and retry_cnt 7: over the wire, a WQE nobody answers is sent 8 times, 4.096 us
 * x 2^timeout apart (the model waits at least 2^17: 0.54 s), before RETRY_EXC_ERR. */
static void rts_qp(struct ibv_qp *qp, uint32_t dest, uint16_t dlid, uint32_t rq_psn, uint32_t sq_psn,
		   int timeout)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_4096, .dest_qp_num = dest,
				 .rq_psn = rq_psn, .max_dest_rd_atomic = 1, .min_rnr_timer = 1 };

	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = sq_psn;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* s's QP to RTS towards `to`'s, PSNs as connect_qp's. */
static void to_rts(struct side *s, struct side *to, int timeout)
{
	rts_qp(s->qp, to->qp->qp_num, to->lid, 0x100 + to->qp->qp_num, 0x100 + s->qp->qp_num, timeout);
}

/* Up to `want` completions from s's CQ within WAIT_S seconds into wc[]; how many came. */
static int poll_n(struct side *s, struct ibv_wc *wc, int want)
{
	int n = 0;
	double end = now_s() + WAIT_S;

	while (n < want) {
		int got = ibv_poll_cq(s->cq, want - n, wc + n);
		if (got < 0) {
			FAIL("ibv_poll_cq returned %d", got);
			break;
		}
		n += got;
		if (!got && now_s() > end)
			break;
	}
	return n;
}

/* ---- stale ---- */

static void *map_4k(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap");
	madvise(p, len, MADV_NOHUGEPAGE);
	return p;
}

/* The page frames of [p, p + len) (0 for a page not present); NULL without pagemap. */
static uint64_t *frames(void *p, size_t len)
{
	size_t n = len / 4096;
	uint64_t *f = calloc(n, sizeof(*f));
	int fd = open("/proc/self/pagemap", O_RDONLY);

	if (!f || fd < 0) {
		free(f);
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t e;
		off_t off = (off_t)(((uintptr_t)p / 4096 + i) * 8);
		if (pread(fd, &e, 8, off) == 8 && (e >> 63))
			f[i] = e & ((1ull << 55) - 1);
	}
	close(fd);
	return f;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* How many of `old`'s frames (n_old pages, sorted here) back `p` now. */
static size_t reused(uint64_t *old, size_t n_old, void *p, size_t len)
{
	uint64_t *now = frames(p, len);
	size_t k = 0;

	if (!old || !now) {
		free(now);
		return 0;
	}
	qsort(old, n_old, sizeof(*old), cmp_u64);
	for (size_t i = 0; i < len / 4096; i++)
		if (now[i] && bsearch(&now[i], old, n_old, sizeof(*old), cmp_u64))
			k++;
	free(now);
	return k;
}

static uint64_t pattern_word(size_t i)
{
	return MAGIC << 40 | (uint64_t)i;
}

static void pattern_fill(uint64_t *p, size_t len)
{
	for (size_t i = 0; i < len / 8; i++)
		p[i] = pattern_word(i);
}

/* Bytes of the pattern that changed; the first few printed. */
static size_t pattern_check(const char *what, uint64_t *p, size_t len)
{
	size_t bad = 0, shown = 0;

	for (size_t i = 0; i < len / 8; i++) {
		uint64_t w = pattern_word(i);
		if (p[i] == w)
			continue;
		for (int b = 0; b < 8; b++)
			bad += ((p[i] ^ w) >> (8 * b) & 0xff) != 0;
		if (shown++ < 4)
			printf("  %s: pattern word at offset %#zx (page %zu) is %#018llx, was %#018llx\n", what,
			       i * 8, i * 8 / 4096, (unsigned long long)p[i], (unsigned long long)w);
	}
	if (bad) {
		size_t pages = 0;
		for (size_t pg = 0; pg < len / 4096; pg++)
			for (size_t i = pg * 512; i < (pg + 1) * 512; i++)
				if (p[i] != pattern_word(i)) {
					pages++;
					break;
				}
		printf("  %s: %zu pattern bytes changed, in %zu of %zu pages\n", what, bad, pages, len / 4096);
	}
	return bad;
}

/* One stale case: op is IBV_WR_RDMA_READ (responses into a freed buffer) or
 * IBV_WR_RDMA_WRITE (retransmissions from a freed buffer). */
static void stale_case(enum ibv_wr_opcode op)
{
	int read = op == IBV_WR_RDMA_READ;
	const char *what = read ? "stale READ" : "stale WRITE";
	int failed = failures;
	struct side a, b;
	struct ibv_wc wc;

	side_open(&a, dev_a, 0, RW);
	side_open(&b, dev_b, 1, RW);
	/* The WQE's local buffer: its own 4 KiB pages and MR. The responder's bytes (READ) are
	 * 0xee, the requester's (WRITE) 0x11; the WRITE's target is b's zeroed buffer. */
	uint8_t *l = map_4k(STALE_LEN);
	memset(l, read ? 0x5a : 0x11, STALE_LEN);
	memset(b.buf.addr, read ? 0xee : 0, STALE_LEN);
	struct ibv_mr *lmr = ibv_reg_mr(a.pd, l, STALE_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!lmr)
		die("ibv_reg_mr");
	uint64_t *old = frames(l, STALE_LEN);
	init_qp(a.qp);
	init_qp(b.qp);
	to_rts(&a, &b, 18); /* 1.07 s between sends, 8.6 s before RETRY_EXC_ERR */

	/* b stays in INIT: the request is dropped there, a's timer sends it again. */
	struct ibv_sge sg = { .addr = (uintptr_t)l, .length = STALE_LEN, .lkey = lmr->lkey };
	if (post_send(&a, 1, op, &sg, 1, IBV_SEND_SIGNALED, (uintptr_t)b.buf.addr, b.mr->rkey, 0))
		exit(1);
	double t0 = now_s();
	int drc = ibv_dereg_mr(lmr); /* an errno */
	munmap(l, STALE_LEN);
	uint64_t *p = map_4k(PATTERN_LEN);
	pattern_fill(p, PATTERN_LEN);
	size_t k = reused(old, STALE_LEN / 4096, p, PATTERN_LEN);
	printf("%s: %s of 2 MiB posted, b in INIT; ibv_dereg_mr: %s; buffer freed; %zu of its %u page "
	       "frames now hold a %u MiB pattern (%.2f s)\n", what, read ? "READ" : "WRITE",
	       drc ? strerror(drc) : "ok", k, STALE_LEN / 4096, PATTERN_LEN >> 20, now_s() - t0);
	int early = ibv_poll_cq(a.cq, 1, &wc);
	if (early)
		printf("%s: the WQE ended before the responder was ready (%s): nothing left in flight\n", what,
		       early > 0 ? ibv_wc_status_str(wc.status) : "poll failed");
	if (!k && !early)
		printf("%s: note: none of the freed frames came back to the pattern; a write into them "
		       "cannot be seen here\n", what);

	/* Now b answers: READ responses, or ACKs for the WRITE's packets sent again. */
	to_rts(&b, &a, 18);
	if (!early && poll_n(&a, &wc, 1) != 1) {
		FAIL("%s: no completion within %d s", what, WAIT_S);
		goto check;
	}
	enum ibv_qp_state st = state_of(a.qp);
	printf("%s: completion %s (%d), byte_len %u; the requester's QP in %s\n", what,
	       ibv_wc_status_str(wc.status), wc.status, wc.byte_len, state_name(st));
	if (!drc && wc.status == IBV_WC_SUCCESS)
		FAIL("%s: the WQE completed successfully after its MR was deregistered (its memory "
		     "freed and reused)", what);
	if (wc.status != IBV_WC_SUCCESS && st != IBV_QPS_ERR)
		FAIL("%s: an error completion, but the QP is in %s, not ERR", what, state_name(st));
	if (drc && drc != EBUSY)
		FAIL("%s: ibv_dereg_mr of an MR in use failed with %s, not EBUSY", what, strerror(drc));
check:;
	size_t bad = pattern_check(what, p, PATTERN_LEN);
	if (bad)
		FAIL("%s: the NIC wrote %zu bytes into memory freed by the MR's owner and reused", what, bad);
	if (!read) {
		/* The target: zero (not written), or the WQE's own bytes (its MR was kept); never a
		 * word of the pattern. */
		uint64_t *t = (uint64_t *)b.buf.addr;
		size_t leaked = 0, other = 0;
		for (size_t i = 0; i < STALE_LEN / 8; i++) {
			if (t[i] >> 40 == MAGIC)
				leaked++;
			else if (t[i] && t[i] != 0x1111111111111111ull)
				other++;
		}
		printf("%s: the responder's buffer holds %zu words of the pattern, %zu other words\n", what,
		       leaked, other);
		if (leaked)
			FAIL("%s: the NIC sent %zu words of memory freed by the MR's owner and reused to the "
			     "other side", what, leaked);
	}
	if (failures == failed)
		printf("ok %s: nothing the NIC no longer owned was touched\n", what);
	munmap(p, PATTERN_LEN);
	if (ibv_destroy_qp(a.qp))
		die("ibv_destroy_qp");
	a.qp = NULL;
	if (drc && ibv_dereg_mr(lmr))
		FAIL("%s: ibv_dereg_mr still fails once its QP is gone", what);
	free(old);
	side_close(&a);
	side_close(&b);
}

/* Another RC QP on s's PD and CQ. */
static struct ibv_qp *extra_qp(struct side *s)
{
	struct ibv_qp_init_attr ia = { .send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ibv_qp *qp = ibv_create_qp(s->pd, &ia);

	if (!qp)
		die("ibv_create_qp");
	init_qp(qp);
	return qp;
}

static void post_on(struct ibv_qp *qp, uint64_t id, enum ibv_wr_opcode op, void *addr, uint32_t len,
		    uint32_t lkey, void *raddr, uint32_t rkey)
{
	struct ibv_sge sg = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sg, .num_sge = 1, .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad))
		die("ibv_post_send");
}

/* A SEND of 2 MiB stopped half-way into its receive buffer, which its owner then
 * deregisters and frees; then the rest of the message comes. RC's BTH names only the
 * destination QP, so any QP of the requester's node may send on a connection whose PSNs it
 * knows: b's QP is connected to a's, and d (on a's NIC, towards b's QP, at b's next PSN)
 * sends the SEND. b's ACKs go to a, which has nothing in flight and ignores them, so d
 * sends its window (256 packets, 1 MiB) and waits. To let it go on, f (on a's NIC) writes
 * one byte to b2 (on b's NIC, connected to d) at the PSN of d's 256th packet: b2's ACK of
 * it reaches d as the ACK of its first 256 packets, and d sends the other 256. */
static void stale_recv(void)
{
	const char *what = "stale receive";
	int failed = failures;
	struct side a, b;
	struct ibv_wc wc;

	side_open(&a, dev_a, 0, RW);
	side_open(&b, dev_b, 1, RW);
	struct ibv_qp *d = extra_qp(&a), *f = extra_qp(&a), *b2 = extra_qp(&b);
	uint32_t p0 = 0x100 + a.qp->qp_num; /* b's first PSN */
	init_qp(a.qp);
	init_qp(b.qp);
	rts_qp(a.qp, b.qp->qp_num, b.lid, 0x100 + b.qp->qp_num, 0x5000, 18);
	rts_qp(b.qp, a.qp->qp_num, a.lid, p0, 0x100 + b.qp->qp_num, 18);
	rts_qp(d, b.qp->qp_num, b.lid, 0x6000, p0, 18);
	rts_qp(b2, d->qp_num, a.lid, p0 + 255, 0x7000, 18);
	rts_qp(f, b2->qp_num, b.lid, 0x8000, p0 + 255, 18);

	uint8_t *r = map_4k(STALE_LEN);
	memset(r, 0x5a, STALE_LEN);
	struct ibv_mr *rmr = ibv_reg_mr(b.pd, r, STALE_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!rmr)
		die("ibv_reg_mr");
	uint64_t *old = frames(r, STALE_LEN);
	struct ibv_sge rs = { .addr = (uintptr_t)r, .length = STALE_LEN, .lkey = rmr->lkey };
	if (post_recv(&b, 1, &rs, 1))
		exit(1);
	fill(a.buf.addr, STALE_LEN);
	post_on(d, 2, IBV_WR_SEND, a.buf.addr, STALE_LEN, a.mr->lkey, NULL, 0);
	/* The first 1 MiB lands in r; then nothing more comes. */
	double end = now_s() + WAIT_S;
	while (memcmp(r, a.buf.addr, 1u << 20) && now_s() < end)
		usleep(1000);
	int half = !memcmp(r, a.buf.addr, 1u << 20), early = ibv_poll_cq(b.cq, 1, &wc);
	if (!half || early) {
		FAIL("%s: the SEND did not stop half-way (first 1 MiB %s, receive %s)", what,
		     half ? "received" : "not received", early ? "completed" : "not completed");
		if (ibv_destroy_qp(b.qp) || ibv_dereg_mr(rmr))
			die("destroy");
		b.qp = NULL;
		munmap(r, STALE_LEN);
		goto out;
	}
	double t0 = now_s();
	int drc = ibv_dereg_mr(rmr); /* an errno */
	munmap(r, STALE_LEN);
	uint64_t *p = map_4k(PATTERN_LEN);
	pattern_fill(p, PATTERN_LEN);
	size_t k = reused(old, STALE_LEN / 4096, p, PATTERN_LEN);
	printf("%s: SEND of 2 MiB half received; ibv_dereg_mr of the receive buffer's MR: %s; buffer "
	       "freed; %zu of its %u page frames now hold a %u MiB pattern (%.2f s)\n", what,
	       drc ? strerror(drc) : "ok", k, STALE_LEN / 4096, PATTERN_LEN >> 20, now_s() - t0);
	/* The rest of the message. */
	post_on(f, 3, IBV_WR_RDMA_WRITE, a.buf.addr, 1, a.mr->lkey, b.buf.addr, b.mr->rkey);
	if (poll_n(&b, &wc, 1) != 1) {
		FAIL("%s: no receive completion within %d s", what, WAIT_S);
	} else {
		enum ibv_qp_state st = state_of(b.qp);
		printf("%s: receive completion %s (%d), byte_len %u; the receiver's QP in %s\n", what,
		       ibv_wc_status_str(wc.status), wc.status, wc.byte_len, state_name(st));
		if (wc.wr_id != 1)
			FAIL("%s: a completion of wr_id %llu, not the receive's", what, (unsigned long long)wc.wr_id);
		if (!drc && wc.status == IBV_WC_SUCCESS)
			FAIL("%s: the receive completed successfully after its MR was deregistered (its memory "
			     "freed and reused)", what);
		if (wc.status != IBV_WC_SUCCESS && st != IBV_QPS_ERR)
			FAIL("%s: an error completion, but the QP is in %s, not ERR", what, state_name(st));
	}
	if (drc && drc != EBUSY)
		FAIL("%s: ibv_dereg_mr of an MR in use failed with %s, not EBUSY", what, strerror(drc));
	size_t bad = pattern_check(what, p, PATTERN_LEN);
	if (bad)
		FAIL("%s: the NIC wrote %zu bytes into memory freed by the MR's owner and reused", what, bad);
	if (failures == failed)
		printf("ok %s: nothing the NIC no longer owned was touched\n", what);
	munmap(p, PATTERN_LEN);
	if (ibv_destroy_qp(b.qp))
		die("ibv_destroy_qp");
	b.qp = NULL;
	if (drc && ibv_dereg_mr(rmr))
		FAIL("%s: ibv_dereg_mr still fails once its QP is gone", what);
out:
	free(old);
	if (ibv_destroy_qp(d) || ibv_destroy_qp(f) || ibv_destroy_qp(b2))
		die("ibv_destroy_qp");
	side_close(&a);
	side_close(&b);
}

void check_stale(void)
{
	cpu_set_t one;

	/* One CPU: frames freed go to its per-CPU lists, which the next allocations take. */
	CPU_ZERO(&one);
	CPU_SET(0, &one);
	sched_setaffinity(0, sizeof(one), &one);
	stale_case(IBV_WR_RDMA_READ);
	stale_case(IBV_WR_RDMA_WRITE);
	if (strcmp(dev_a, dev_b))
		stale_recv();
}

/* ---- drain ---- */

/* The NIC model index of device `dev` (ordmaN: N, the probe order, which is the NICs'). */
static int nic_of(const char *dev)
{
	const char *p = dev + strlen(dev);

	while (p > dev && p[-1] >= '0' && p[-1] <= '9')
		p--;
	return atoi(p);
}

/* A request on NIC model `nic`'s control channel, through the harness
 * (qemu-test/progs/nic-control.sh's nic_ctl; ORDMA_NIC_CONTROL names another script); the
 * reply line is printed. 0 for "ok". */
static int nic_ctl(int nic, const char *req)
{
	const char *sh = getenv("ORDMA_NIC_CONTROL");
	char cmd[512];

	if (!sh)
		sh = "/ordma/src/qemu-test/progs/nic-control.sh";
	snprintf(cmd, sizeof(cmd),
		 "bash -c '. %s && r=$(nic_ctl %d %s); s=$?; echo \"  (nic_ctl %d %s: $r)\"; exit $s'", sh, nic,
		 req, nic, req);
	fflush(stdout);
	int rc = system(cmd);
	if (rc)
		FAIL("nic_ctl %d %s: status %d", nic, req, rc);
	return rc;
}

/* Waits up to WAIT_S seconds for IBV_EVENT_SQ_DRAINED of s's QP; other events are printed
 * and skipped. 0 once it came. */
static int wait_drained(struct side *s)
{
	double end = now_s() + WAIT_S;
	int fd = s->ctx->async_fd;

	if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK))
		die("fcntl");
	for (;;) {
		struct ibv_async_event ev;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int left = (int)((end - now_s()) * 1000);

		if (left <= 0)
			return -1;
		if (poll(&p, 1, left) != 1 || ibv_get_async_event(s->ctx, &ev))
			continue;
		enum ibv_event_type type = ev.event_type;
		struct ibv_qp *qp = ev.element.qp;
		ibv_ack_async_event(&ev);
		if (type == IBV_EVENT_SQ_DRAINED && qp == s->qp)
			return 0;
		printf("  (async event: %s)\n", ibv_event_type_str(type));
	}
}

/* n WQEs (one READ of 1 MiB, or 16 WRITEs of 16 KiB) posted while the peer NIC's link is
 * down, RTS->SQD with the async notification, link up: the drained event and what is on
 * the CQ then. */
static void drain_round(int reads)
{
	const char *what = reads ? "drain, a READ of 1 MiB" : "drain, 16 WRITEs of 16 KiB";
	int n = reads ? 1 : 16, nic = nic_of(dev_b), failed = failures;
	size_t len = reads ? (1u << 20) : (16u << 10);
	struct side a, b;
	struct ibv_send_wr wr[16], *bad = NULL;
	struct ibv_sge sg[16];
	struct ibv_wc wc[16];

	side_open(&a, dev_a, 0, RW);
	side_open(&b, dev_b, 1, RW);
	init_qp(a.qp);
	init_qp(b.qp);
	to_rts(&a, &b, 18);
	to_rts(&b, &a, 18);
	uint8_t *src = reads ? b.buf.addr : a.buf.addr, *dst = reads ? a.buf.addr + (2u << 20) : b.buf.addr + (3u << 20);
	fill(src, n * len);
	memset(dst, 0, n * len);
	memset(wr, 0, sizeof(wr));
	for (int i = 0; i < n; i++) {
		sg[i] = (struct ibv_sge){ .addr = (uintptr_t)(reads ? dst : src) + i * len, .length = len,
					  .lkey = a.mr->lkey };
		wr[i].wr_id = 100 + i;
		wr[i].sg_list = &sg[i];
		wr[i].num_sge = 1;
		wr[i].opcode = reads ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
		wr[i].send_flags = IBV_SEND_SIGNALED;
		wr[i].wr.rdma.remote_addr = (uintptr_t)(reads ? src : dst) + i * len;
		wr[i].wr.rdma.rkey = b.mr->rkey;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	if (nic_ctl(nic, "link down"))
		goto out;
	if (ibv_post_send(a.qp, wr, &bad))
		die("ibv_post_send");
	struct ibv_qp_attr at = { .qp_state = IBV_QPS_SQD, .en_sqd_async_notify = 1 };
	if (ibv_modify_qp(a.qp, &at, IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY))
		die("modify RTS -> SQD");
	printf("%s: posted with NIC %d's link down, then RTS -> SQD (async notify)\n", what, nic);
	if (nic_ctl(nic, "link up"))
		goto out;
	int got = 0;
	if (wait_drained(&a)) {
		FAIL("%s: no IBV_EVENT_SQ_DRAINED within %d s", what, WAIT_S);
	} else {
		enum ibv_qp_state st = state_of(a.qp);
		int k;
		while (got < n && (k = ibv_poll_cq(a.cq, n - got, wc + got)) > 0)
			got += k;
		printf("%s: IBV_EVENT_SQ_DRAINED; then %d of %d completions on the CQ, the QP in %s\n", what,
		       got, n, state_name(st));
		if (got != n)
			FAIL("%s: IBV_EVENT_SQ_DRAINED came with %d of the %d WQEs outstanding at RTS->SQD "
			     "completed", what, got, n);
		if (st != IBV_QPS_SQD)
			FAIL("%s: at the drained event the QP is in %s, not SQD", what, state_name(st));
	}
	at.qp_state = IBV_QPS_RTS;
	if (ibv_modify_qp(a.qp, &at, IBV_QP_STATE))
		die("modify SQD -> RTS");
	int more = poll_n(&a, wc + got, n - got);
	if (more)
		printf("%s: %d completion(s) more after SQD -> RTS\n", what, more);
	if (got + more != n)
		FAIL("%s: %d of %d completions within %d s", what, got + more, n, WAIT_S);
	for (int i = 0; i < got + more; i++)
		if (wc[i].wr_id != (uint64_t)(100 + i) || wc[i].status != IBV_WC_SUCCESS ||
		    wc[i].opcode != (reads ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE))
			FAIL("%s: completion %d: wr_id %llu status %s opcode %d", what, i,
			     (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status), wc[i].opcode);
	if (got + more == n && memcmp(src, dst, n * len))
		FAIL("%s: the bytes differ", what);
	/* Back in RTS, the QP carries on. */
	fill(a.buf.addr, 65536);
	struct ibv_sge s1 = { .addr = (uintptr_t)a.buf.addr, .length = 65536, .lkey = a.mr->lkey };
	if (!post_send(&a, 200, IBV_WR_RDMA_WRITE, &s1, 1, IBV_SEND_SIGNALED, (uintptr_t)b.buf.addr, b.mr->rkey, 0) &&
	    !expect_wc(&a, "a WRITE after SQD -> RTS", 200, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1) &&
	    memcmp(a.buf.addr, b.buf.addr, 65536))
		FAIL("%s: the WRITE after SQD -> RTS moved the wrong bytes", what);
	if (failures == failed)
		printf("ok %s: SQ_DRAINED only after all %d completed in SQD; SQD -> RTS carries on\n", what, n);
out:
	side_close(&a);
	side_close(&b);
}

void check_drain(void)
{
	drain_round(1);
	drain_round(0);
}
