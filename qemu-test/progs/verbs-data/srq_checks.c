// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data's SRQ checks (shared receive queues), between --dev (the senders) and
 * --dev2 (the receivers, on one SRQ):
 *
 *   srq         4 RC QPs on one SRQ of 32 WQEs receive 400 SENDs with immediate (the
 *               message's number) of 0 B to 1 MiB + 3 from 4 sender QPs, all at once, each
 *               receive reposted as soon as it completes (slots come back out of order):
 *               every message once, on the QP it was sent to, its bytes and length exact,
 *               the wr_id the one posted with its buffer
 *   srq-events  the limit: 10 WQEs, the limit armed at 8 and queried, 3 messages ->
 *               IBV_EVENT_SRQ_LIMIT_REACHED for the SRQ (ibv_get_async_event), the limit
 *               then 0; a receiving QP moved to ERR -> IBV_EVENT_QP_LAST_WQE_REACHED for it,
 *               and the SRQ's WQEs left still reach the other QP
 *   srq-resize  the srq check on an SRQ of 7 WQEs resized to 40 after 100 messages, with
 *               SENDs in flight and receives unpolled; the device says IBV_DEVICE_SRQ_RESIZE
 *   srq-errnos  exact errnos: max_wr 0 or above max_srq_wr, max_sge above max_srq_sge
 *               (EINVAL); max_wr 4096 (UCX's) answered 8191; ibv_create_srq_ex basic
 *               (works) and tag matching (EOPNOTSUPP); a limit above max_wr
 *               (EINVAL); a resize above max_srq_wr (EINVAL), to less (nothing changes),
 *               to 10000, to 20000 with a limit of 12000; too many SGEs (EINVAL, bad_wr), max_wr + 1
 *               WQEs (ENOMEM); ibv_post_recv on a QP on an SRQ (EINVAL); destroying an SRQ a
 *               QP uses (EBUSY); max_srq SRQs, then ENOMEM
 *   srq-hold    2 SRQs with QPs and WQEs posted, a SEND received; prints "holding" and
 *               sleeps (the test kills it: nothing may stay on the NIC)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <infiniband/verbs.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "verbs_data.h"

#define NQP 4
#define SRQ_WR 32
#define MSGS 400
#define RBUF ((1u << 20) + 4096) /* a receive buffer: the largest message, 1 MiB + 3, fits */

/* The receiving side: a context, PD, CQ, SRQ, its QPs, one MR over the receive buffers. */
struct srq_side {
	struct side s; /* ctx, pd, cq, mr, buf, lid (its qp unused) */
	struct ibv_srq *srq;
	struct ibv_qp *qp[NQP];
	uint8_t *bufs;
	size_t bufs_len;
	struct ibv_mr *bufs_mr;
	uint32_t nbufs;
	uint32_t max_wr;
};

static struct ibv_context *open_ctx(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (!ctx)
		die(name);
	return ctx;
}

static struct ibv_qp *qp_on(struct ibv_pd *pd, struct ibv_cq *cq, struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.srq = srq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 64, .max_recv_wr = srq ? 17 : 64, .max_send_sge = 1,
			 .max_recv_sge = srq ? 3 : 1 },
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp)
		die("ibv_create_qp");
	if (srq && (ia.cap.max_recv_wr || ia.cap.max_recv_sge))
		FAIL("a QP on an SRQ reports a receive queue: max_recv_wr %u max_recv_sge %u",
		     ia.cap.max_recv_wr, ia.cap.max_recv_sge);
	return qp;
}

/* `q` (of a side whose port LID is `lid`) RESET -> RTS towards QP `dest` at `dlid`. */
static void connect_to(struct ibv_qp *q, uint32_t dest, uint16_t dlid)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = RW };

	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = dest;
	a.rq_psn = 0x200 + dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = dlid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7; /* the SRQ may run dry for a moment: RNR until it is refilled */
	a.sq_psn = 0x200 + q->qp_num;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* The receiver on `dev`: an SRQ of at least `wr` WQEs and its QPs; `nbufs` receive buffers. */
static void srq_open(struct srq_side *r, const char *dev, uint32_t wr, uint32_t nbufs)
{
	struct ibv_port_attr port;

	memset(r, 0, sizeof(*r));
	r->s.ctx = open_ctx(dev);
	if (ibv_query_port(r->s.ctx, 1, &port))
		die("ibv_query_port");
	r->s.lid = port.lid;
	r->s.pd = ibv_alloc_pd(r->s.ctx);
	r->s.cq = ibv_create_cq(r->s.ctx, 1024, NULL, NULL, 0);
	if (!r->s.pd || !r->s.cq)
		die("ibv_alloc_pd/ibv_create_cq");
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = wr, .max_sge = 2 } };
	r->srq = ibv_create_srq(r->s.pd, &sa);
	if (!r->srq)
		die("ibv_create_srq");
	r->max_wr = sa.attr.max_wr;
	if (sa.attr.max_wr < wr || sa.attr.max_sge < 2)
		FAIL("ibv_create_srq answered max_wr %u max_sge %u for %u and 2", sa.attr.max_wr,
		     sa.attr.max_sge, wr);
	r->nbufs = nbufs;
	r->bufs_len = (size_t)nbufs * RBUF;
	r->bufs = mmap(NULL, r->bufs_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->bufs == MAP_FAILED)
		die("mmap");
	r->bufs_mr = ibv_reg_mr(r->s.pd, r->bufs, r->bufs_len, IBV_ACCESS_LOCAL_WRITE);
	if (!r->bufs_mr)
		die("ibv_reg_mr");
	for (int i = 0; i < NQP; i++)
		r->qp[i] = qp_on(r->s.pd, r->s.cq, r->srq);
}

static void srq_close(struct srq_side *r)
{
	for (int i = 0; i < NQP; i++)
		if (r->qp[i] && ibv_destroy_qp(r->qp[i]))
			die("ibv_destroy_qp");
	if (ibv_destroy_srq(r->srq) || ibv_dereg_mr(r->bufs_mr) || ibv_destroy_cq(r->s.cq) ||
	    ibv_dealloc_pd(r->s.pd))
		die("destroy");
	munmap(r->bufs, r->bufs_len);
	ibv_close_device(r->s.ctx);
}

/* Posts receive buffer `b` (wr_id b): two SGEs over its RBUF bytes. */
static int srq_post(struct srq_side *r, uint32_t b)
{
	uint8_t *p = r->bufs + (size_t)b * RBUF;
	struct ibv_sge sg[2] = {
		{ .addr = (uintptr_t)p, .length = 4096 + 5, .lkey = r->bufs_mr->lkey },
		{ .addr = (uintptr_t)p + 4096 + 5, .length = RBUF - 4096 - 5, .lkey = r->bufs_mr->lkey },
	};
	struct ibv_recv_wr wr = { .wr_id = b, .sg_list = sg, .num_sge = 2 }, *bad = NULL;
	memset(p, 0xa5, 16);
	int rc = ibv_post_srq_recv(r->srq, &wr, &bad);
	if (rc)
		FAIL("ibv_post_srq_recv of buffer %u: %s", b, strerror(rc));
	return rc;
}

/* The senders on `dev`: a context, PD, CQ, NQP QPs and a source MR. */
struct senders {
	struct side s;
	struct ibv_qp *qp[NQP];
};

static void senders_open(struct senders *t, const char *dev)
{
	struct ibv_port_attr port;

	memset(t, 0, sizeof(*t));
	t->s.ctx = open_ctx(dev);
	if (ibv_query_port(t->s.ctx, 1, &port))
		die("ibv_query_port");
	t->s.lid = port.lid;
	t->s.pd = ibv_alloc_pd(t->s.ctx);
	t->s.cq = ibv_create_cq(t->s.ctx, 1024, NULL, NULL, 0);
	if (!t->s.pd || !t->s.cq)
		die("ibv_alloc_pd/ibv_create_cq");
	t->s.buf = alloc_buf(0);
	t->s.mr = reg(&t->s, RW);
	for (int i = 0; i < NQP; i++)
		t->qp[i] = qp_on(t->s.pd, t->s.cq, NULL);
}

static void senders_close(struct senders *t)
{
	for (int i = 0; i < NQP; i++)
		if (ibv_destroy_qp(t->qp[i]))
			die("ibv_destroy_qp");
	if (ibv_dereg_mr(t->s.mr) || ibv_destroy_cq(t->s.cq) || ibv_dealloc_pd(t->s.pd))
		die("destroy");
	munmap(t->s.buf.addr, t->s.buf.len);
	ibv_close_device(t->s.ctx);
}

static void join(struct senders *t, struct srq_side *r)
{
	for (int i = 0; i < NQP; i++) {
		connect_to(t->qp[i], r->qp[i]->qp_num, r->s.lid);
		connect_to(r->qp[i], t->qp[i]->qp_num, t->s.lid);
	}
}

/* Message m's length and bytes (a pattern of its number). */
static size_t msg_len(uint32_t m)
{
	static const size_t lens[] = { 0, 1, 63, 4096, 4097, 65536, (1u << 20) + 3, 300 };
	return lens[m % (sizeof(lens) / sizeof(lens[0]))];
}

static void msg_fill(uint8_t *p, uint32_t m, size_t len)
{
	uint32_t x = m * 2654435761u + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

/* SEND with immediate m on sender QP q, from a source area of its own. */
static int send_msg(struct senders *t, int q, uint32_t m)
{
	size_t len = msg_len(m);
	uint8_t *src = t->s.buf.addr + (size_t)q * (MAX_MSG / 2 + 4096);
	msg_fill(src, m, len);
	struct ibv_sge sg = { .addr = (uintptr_t)src, .length = len, .lkey = t->s.mr->lkey };
	struct ibv_send_wr wr = { .wr_id = m, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND_WITH_IMM,
				  .send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(m) },
			   *bad = NULL;
	int rc = ibv_post_send(t->qp[q], &wr, &bad);
	if (rc)
		FAIL("ibv_post_send of message %u: %s", m, strerror(rc));
	return rc;
}

static int poll_cq_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (long spins = 0; spins < 200000000L; spins++) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n;
		if (spins % 1024 == 0)
			usleep(10);
	}
	return 0;
}

/*
 * MSGS SENDs with immediate from the NQP sender QPs to the NQP QPs on the SRQ, one in
 * flight per sender QP, each receive reposted as soon as it completes; the SRQ starts with
 * `posted` buffers. With `resize_to`, once `resize_at` messages are in, the SRQ is resized
 * (ibv_modify_srq IBV_SRQ_MAX_WR) to `resize_to` WQEs with SENDs in flight and receives
 * unpolled, and the rest of the buffers are posted into the new room. 0 or failures.
 */
static void srq_traffic(struct senders *t, struct srq_side *r, uint32_t posted, uint32_t resize_at,
			uint32_t resize_to)
{
	uint8_t seen[MSGS] = { 0 }, sent_on[MSGS] = { 0 };
	uint32_t sent = 0, got = 0, done = 0, in_flight[NQP] = { 0 };
	int bad = failures;
	uint8_t *tmp = malloc(RBUF);

	if (!tmp)
		die("malloc");
	for (uint32_t b = 0; b < posted; b++)
		srq_post(r, b);
	while (got < MSGS || done < MSGS) {
		for (int q = 0; q < NQP && sent < MSGS; q++)
			if (!in_flight[q]) {
				if (send_msg(t, q, sent))
					goto out;
				sent_on[sent] = (uint8_t)q;
				in_flight[q] = sent + 1;
				sent++;
			}
		struct ibv_wc wc;
		int n = ibv_poll_cq(t->s.cq, 1, &wc);
		if (n < 0) {
			FAIL("sender poll: %d", n);
			goto out;
		}
		if (n == 1) {
			if (wc.status != IBV_WC_SUCCESS) {
				FAIL("SEND %llu: %s", (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
				goto out;
			}
			for (int q = 0; q < NQP; q++)
				if (in_flight[q] == wc.wr_id + 1)
					in_flight[q] = 0;
			done++;
		}
		n = ibv_poll_cq(r->s.cq, 1, &wc);
		if (n < 0) {
			FAIL("receiver poll: %d", n);
			goto out;
		}
		if (n == 0)
			continue;
		uint32_t m = ntohl(wc.imm_data), b = (uint32_t)wc.wr_id;
		int q = -1;
		for (int i = 0; i < NQP; i++)
			if (r->qp[i]->qp_num == wc.qp_num)
				q = i;
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || !(wc.wc_flags & IBV_WC_WITH_IMM) ||
		    m >= MSGS || b >= r->nbufs || q < 0) {
			FAIL("receive: status %s opcode %d flags %#x imm %u wr_id %u qp %u",
			     ibv_wc_status_str(wc.status), wc.opcode, wc.wc_flags, m, b, wc.qp_num);
			goto out;
		}
		if (seen[m]++)
			FAIL("message %u received twice", m);
		if (q != sent_on[m] || wc.src_qp != t->qp[q]->qp_num)
			FAIL("message %u sent on QP %u received on %u (src_qp %u)", m,
			     t->qp[sent_on[m]]->qp_num, wc.qp_num, wc.src_qp);
		size_t len = msg_len(m);
		if (wc.byte_len != len)
			FAIL("message %u: byte_len %u, sent %zu", m, wc.byte_len, len);
		msg_fill(tmp, m, len);
		uint8_t *dst = r->bufs + (size_t)b * RBUF;
		if (memcmp(dst, tmp, len))
			FAIL("message %u: bytes differ in buffer %u", m, b);
		got++;
		srq_post(r, b);
		if (resize_to && got == resize_at) {
			struct ibv_srq_attr a = { .max_wr = resize_to };
			uint32_t before = r->max_wr;
			int rc = ibv_modify_srq(r->srq, &a, IBV_SRQ_MAX_WR);
			memset(&a, 0, sizeof(a));
			if (rc || ibv_query_srq(r->srq, &a) || a.max_wr < resize_to) {
				FAIL("resizing the SRQ from %u to %u WQEs: %s, max_wr now %u", before, resize_to,
				     rc ? strerror(rc) : "done", a.max_wr);
				goto out;
			}
			r->max_wr = a.max_wr;
			/* The new room: every other buffer, more than the SRQ held before. */
			for (uint32_t b = posted; b < r->nbufs; b++)
				if (srq_post(r, b))
					goto out;
			printf("ok SRQ resized from max_wr %u to %u with %u messages in and SENDs in flight; "
			       "%u WQEs posted\n",
			       before, a.max_wr, got, r->nbufs);
		}
		if (failures > bad + 5)
			goto out;
	}
	for (uint32_t m = 0; m < MSGS; m++)
		if (!seen[m])
			FAIL("message %u never received", m);
out:
	free(tmp);
}

void check_srq(void)
{
	struct senders t;
	struct srq_side r;
	int bad = failures;

	senders_open(&t, dev_a);
	srq_open(&r, dev_b, SRQ_WR, SRQ_WR);
	join(&t, &r);
	srq_traffic(&t, &r, SRQ_WR, 0, 0);
	if (failures == bad)
		printf("ok SRQ: %u SENDs of 0 B to 1 MiB + 3 from %d QPs to %d QPs on one SRQ of %u WQEs, "
		       "every message once, every byte\n",
		       MSGS, NQP, NQP, SRQ_WR);
	/* Every receive still posted is flushed when the QPs go; then the objects. */
	srq_close(&r);
	senders_close(&t);
}

/*
 * An SRQ of 7 WQEs resized to 40 in the middle of the traffic: what was posted before keeps
 * its buffer, the NIC goes on from the WQE it was at, the 33 buffers posted after it take
 * the new slots, every message arrives once with its bytes.
 */
void check_srq_resize(void)
{
	struct senders t;
	struct srq_side r;
	struct ibv_device_attr da;
	int bad = failures;

	senders_open(&t, dev_a);
	srq_open(&r, dev_b, 7, 40);
	if (ibv_query_device(r.s.ctx, &da) || !(da.device_cap_flags & IBV_DEVICE_SRQ_RESIZE))
		FAIL("the device does not say IBV_DEVICE_SRQ_RESIZE (flags %#x)", da.device_cap_flags);
	if (r.max_wr != 7)
		FAIL("an SRQ of 7 WQEs was made with max_wr %u", r.max_wr);
	join(&t, &r);
	srq_traffic(&t, &r, 7, 100, 40);
	if (failures == bad)
		printf("ok SRQ resize: %u SENDs of 0 B to 1 MiB + 3, the SRQ grown from 7 to %u WQEs after "
		       "100, every message once, every byte\n",
		       MSGS, r.max_wr);
	srq_close(&r);
	senders_close(&t);
}

static struct ibv_async_event next_event(struct ibv_context *ctx)
{
	struct ibv_async_event ev;
	struct pollfd p = { .fd = ctx->async_fd, .events = POLLIN };

	memset(&ev, 0, sizeof(ev));
	ev.event_type = (enum ibv_event_type)-1;
	if (poll(&p, 1, 10000) != 1) {
		FAIL("no async event within 10 s");
		return ev;
	}
	if (ibv_get_async_event(ctx, &ev)) {
		FAIL("ibv_get_async_event: %s", strerror(errno));
		ev.event_type = (enum ibv_event_type)-1;
		return ev;
	}
	ibv_ack_async_event(&ev);
	return ev;
}

/* Sends message m on QP q and waits for both completions; the receive's QP. */
static uint32_t one_message(struct senders *t, struct srq_side *r, int q, uint32_t m)
{
	struct ibv_wc wc;

	if (send_msg(t, q, m))
		return 0;
	if (!poll_cq_one(t->s.cq, &wc) || wc.status != IBV_WC_SUCCESS) {
		FAIL("SEND %u did not complete: %s", m, ibv_wc_status_str(wc.status));
		return 0;
	}
	if (!poll_cq_one(r->s.cq, &wc) || wc.status != IBV_WC_SUCCESS || ntohl(wc.imm_data) != m) {
		FAIL("receive of %u: %s", m, ibv_wc_status_str(wc.status));
		return 0;
	}
	return wc.qp_num;
}

void check_srq_events(void)
{
	struct senders t;
	struct srq_side r;
	struct ibv_srq_attr a;
	int bad = failures;

	senders_open(&t, dev_a);
	srq_open(&r, dev_b, 16, 16);
	join(&t, &r);
	for (uint32_t b = 0; b < 10; b++)
		srq_post(&r, b);
	a.srq_limit = 8;
	if (ibv_modify_srq(r.srq, &a, IBV_SRQ_LIMIT))
		FAIL("ibv_modify_srq IBV_SRQ_LIMIT 8: %s", strerror(errno));
	memset(&a, 0, sizeof(a));
	if (ibv_query_srq(r.srq, &a) || a.srq_limit != 8 || a.max_wr != r.max_wr || a.max_sge < 2)
		FAIL("ibv_query_srq: limit %u max_wr %u max_sge %u, wanted 8, %u, 2", a.srq_limit, a.max_wr,
		     a.max_sge, r.max_wr);
	for (uint32_t m = 0; m < 3; m++)
		one_message(&t, &r, (int)m % NQP, m * 8 + 1); /* small messages */
	struct ibv_async_event ev = next_event(r.s.ctx);
	if (ev.event_type != IBV_EVENT_SRQ_LIMIT_REACHED || ev.element.srq != r.srq)
		FAIL("event %d (%s) for %p, wanted SRQ_LIMIT_REACHED for the SRQ %p", ev.event_type,
		     ibv_event_type_str(ev.event_type), (void *)ev.element.srq, (void *)r.srq);
	else
		printf("ok IBV_EVENT_SRQ_LIMIT_REACHED once 7 WQEs were left under a limit of 8\n");
	if (ibv_query_srq(r.srq, &a) || a.srq_limit != 0)
		FAIL("after the event the limit is %u, wanted 0 (disarmed)", a.srq_limit);
	/* QP 0 to ERR: it takes no more WQEs, and says so. */
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_ERR };
	if (ibv_modify_qp(r.qp[0], &qa, IBV_QP_STATE))
		FAIL("modify to ERR: %s", strerror(errno));
	ev = next_event(r.s.ctx);
	if (ev.event_type != IBV_EVENT_QP_LAST_WQE_REACHED || ev.element.qp != r.qp[0])
		FAIL("event %d (%s) for %p, wanted QP_LAST_WQE_REACHED for QP %p", ev.event_type,
		     ibv_event_type_str(ev.event_type), (void *)ev.element.qp, (void *)r.qp[0]);
	else
		printf("ok IBV_EVENT_QP_LAST_WQE_REACHED for a QP on the SRQ moved to ERR\n");
	/* The SRQ's 7 WQEs are still there for the others: 7 messages on QP 1. */
	for (uint32_t m = 0; m < 7; m++)
		if (one_message(&t, &r, 1, 100 + m * 8 + 1) != r.qp[1]->qp_num)
			FAIL("message %u after QP 0 left did not reach QP 1", 100 + m);
	if (failures == bad)
		printf("ok the SRQ's 7 WQEs left went to another QP\n");
	srq_close(&r);
	senders_close(&t);
}

static void expect_errno(const char *what, int got, int want)
{
	if (got != want)
		FAIL("%s: %s (%d), wanted %s (%d)", what, strerror(got), got, strerror(want), want);
	else
		printf("ok %s: %s\n", what, strerror(want));
}

void check_srq_errnos(void)
{
	struct ibv_context *ctx = open_ctx(dev_a);
	struct ibv_device_attr da;
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	struct ibv_srq *srq;
	int bad = failures;

	if (!pd || !cq || ibv_query_device(ctx, &da))
		die("setup");
	printf("max_srq %d, max_srq_wr %d, max_srq_sge %d\n", da.max_srq, da.max_srq_wr, da.max_srq_sge);
	if (da.max_srq <= 0 || da.max_srq_wr < 4096 || da.max_srq_sge < 1)
		FAIL("the device reports max_srq %d, max_srq_wr %d (UCX needs 4096), max_srq_sge %d",
		     da.max_srq, da.max_srq_wr, da.max_srq_sge);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 0, .max_sge = 1 } };
	errno = 0;
	srq = ibv_create_srq(pd, &sa);
	expect_errno("ibv_create_srq max_wr 0", srq ? 0 : errno, EINVAL);
	sa.attr.max_wr = (uint32_t)da.max_srq_wr + 1;
	srq = ibv_create_srq(pd, &sa);
	expect_errno("ibv_create_srq max_wr max_srq_wr + 1", srq ? 0 : errno, EINVAL);
	sa.attr = (struct ibv_srq_attr){ .max_wr = 8, .max_sge = (uint32_t)da.max_srq_sge + 1 };
	srq = ibv_create_srq(pd, &sa);
	expect_errno("ibv_create_srq max_sge max_srq_sge + 1", srq ? 0 : errno, EINVAL);
	/* UCX's request. */
	sa.attr = (struct ibv_srq_attr){ .max_wr = 4096, .max_sge = 1, .srq_limit = 77 };
	srq = ibv_create_srq(pd, &sa);
	if (!srq)
		die("ibv_create_srq of 4096");
	struct ibv_srq_attr a;
	if (ibv_query_srq(srq, &a) || a.max_wr != sa.attr.max_wr || a.max_wr < 4096 || a.srq_limit != 0)
		FAIL("4096 asked: created %u, queried max_wr %u limit %u", sa.attr.max_wr, a.max_wr, a.srq_limit);
	else
		printf("ok ibv_create_srq max_wr 4096: %u, the limit at create ignored\n", a.max_wr);
	a.srq_limit = a.max_wr + 1;
	expect_errno("ibv_modify_srq limit above max_wr", ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT), EINVAL);
	/* A resize: beyond max_srq_wr, no; one it holds already, nothing changes; larger, yes. */
	uint32_t had = a.max_wr;
	a.max_wr = (uint32_t)da.max_srq_wr + 1;
	expect_errno("ibv_modify_srq IBV_SRQ_MAX_WR above max_srq_wr", ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR),
		     EINVAL);
	a.max_wr = 100;
	expect_errno("ibv_modify_srq IBV_SRQ_MAX_WR below max_wr (nothing to do)",
		     ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), 0);
	if (ibv_query_srq(srq, &a) || a.max_wr != had)
		FAIL("after a resize to less, max_wr %u, was %u", a.max_wr, had);
	a.max_wr = 10000;
	expect_errno("ibv_modify_srq IBV_SRQ_MAX_WR 10000 (resize)", ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR), 0);
	if (ibv_query_srq(srq, &a) || a.max_wr < 10000 || a.max_wr > (uint32_t)da.max_srq_wr)
		FAIL("resized to 10000: max_wr %u", a.max_wr);
	/* The resize and the limit at once: a limit the new size allows. */
	a.max_wr = 20000;
	a.srq_limit = 12000;
	expect_errno("ibv_modify_srq IBV_SRQ_MAX_WR 20000 and IBV_SRQ_LIMIT 12000",
		     ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT), 0);
	if (ibv_query_srq(srq, &a) || a.max_wr < 20000 || a.srq_limit != 12000)
		FAIL("resized to 20000 with a limit of 12000: max_wr %u limit %u", a.max_wr, a.srq_limit);
	expect_errno("ibv_modify_srq an unknown mask bit", ibv_modify_srq(srq, &a, 1 << 7), EINVAL);
	if (ibv_destroy_srq(srq))
		die("ibv_destroy_srq");
	/* ibv_create_srq_ex: a basic SRQ (libibverbs makes it an ibv_create_srq); XRC, not. */
	struct ibv_srq_init_attr_ex sx = {
		.attr = { .max_wr = 100, .max_sge = 3 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_BASIC,
		.pd = pd,
	};
	srq = ibv_create_srq_ex(ctx, &sx);
	if (!srq || sx.attr.max_wr < 100 || sx.attr.max_sge < 3)
		FAIL("ibv_create_srq_ex (basic): %s, max_wr %u max_sge %u", srq ? "made" : strerror(errno),
		     sx.attr.max_wr, sx.attr.max_sge);
	else
		printf("ok ibv_create_srq_ex of type IBV_SRQT_BASIC: max_wr %u, max_sge %u\n", sx.attr.max_wr,
		       sx.attr.max_sge);
	if (srq && ibv_destroy_srq(srq))
		die("ibv_destroy_srq");
	sx.comp_mask |= IBV_SRQ_INIT_ATTR_CQ;
	sx.cq = cq;
	sx.srq_type = IBV_SRQT_TM;
	sx.tm_cap.max_num_tags = 1;
	errno = 0;
	srq = ibv_create_srq_ex(ctx, &sx);
	expect_errno("ibv_create_srq_ex of type IBV_SRQT_TM", srq ? 0 : errno, EOPNOTSUPP);
	if (srq)
		ibv_destroy_srq(srq);

	/* Posting: SGEs and the depth. */
	sa.attr = (struct ibv_srq_attr){ .max_wr = 3, .max_sge = 1 };
	srq = ibv_create_srq(pd, &sa);
	if (!srq)
		die("ibv_create_srq of 3");
	uint32_t max_wr = sa.attr.max_wr, max_sge = sa.attr.max_sge;
	struct ibv_sge sg[64] = { 0 };
	struct ibv_recv_wr w1 = { .wr_id = 1, .sg_list = sg, .num_sge = (int)max_sge + 1 }, *bw = NULL;
	struct ibv_recv_wr w0 = { .wr_id = 0, .sg_list = sg, .num_sge = 0, .next = &w1 };
	int rc = ibv_post_srq_recv(srq, &w0, &bw);
	expect_errno("ibv_post_srq_recv with max_sge + 1 SGEs", rc, EINVAL);
	if (bw != &w1)
		FAIL("bad_wr is not the WR with too many SGEs");
	struct ibv_recv_wr w = { .wr_id = 2, .sg_list = sg, .num_sge = 0 };
	for (uint32_t i = 1; i < max_wr; i++) /* the one above is posted */
		if (ibv_post_srq_recv(srq, &w, &bw))
			FAIL("posting WQE %u of %u", i + 1, max_wr);
	expect_errno("ibv_post_srq_recv beyond max_wr", ibv_post_srq_recv(srq, &w, &bw), ENOMEM);
	/* A QP on it: no ibv_post_recv; the SRQ cannot go while the QP uses it. */
	struct ibv_qp *qp = qp_on(pd, cq, srq);
	expect_errno("ibv_post_recv on a QP on an SRQ", ibv_post_recv(qp, &w, &bw), EINVAL);
	expect_errno("ibv_destroy_srq while a QP uses it", ibv_destroy_srq(srq), EBUSY);
	if (ibv_destroy_qp(qp) || ibv_destroy_srq(srq))
		die("destroy the QP, then the SRQ");

	/* max_srq of them, then ENOMEM. */
	struct ibv_srq **all = calloc((size_t)da.max_srq + 1, sizeof(*all));
	int n = 0;
	if (!all)
		die("calloc");
	sa.attr = (struct ibv_srq_attr){ .max_wr = 1, .max_sge = 1 };
	for (; n <= da.max_srq; n++) {
		all[n] = ibv_create_srq(pd, &sa);
		if (!all[n])
			break;
	}
	if (n != da.max_srq)
		FAIL("%d SRQs created, max_srq is %d", n, da.max_srq);
	else
		expect_errno("ibv_create_srq beyond max_srq", errno, ENOMEM);
	for (int i = 0; i < n; i++)
		if (ibv_destroy_srq(all[i]))
			die("ibv_destroy_srq");
	free(all);
	if (ibv_destroy_cq(cq) || ibv_dealloc_pd(pd))
		die("destroy");
	ibv_close_device(ctx);
	if (failures == bad)
		printf("ok SRQ errnos\n");
}

void check_srq_hold(void)
{
	struct senders t;
	struct srq_side r, r2;

	senders_open(&t, dev_a);
	srq_open(&r, dev_b, 8, 8);
	srq_open(&r2, dev_b, 8, 8);
	join(&t, &r);
	for (uint32_t b = 0; b < 5; b++) {
		srq_post(&r, b);
		srq_post(&r2, b);
	}
	one_message(&t, &r, 2, 9);
	printf("holding 2 SRQs with WQEs posted and %d QPs on each\n", NQP);
	fflush(stdout);
	for (;;)
		pause();
}
