// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data's CQ resize check (ibv_resize_cq), an RC pair from --dev (a) to --dev2 (b):
 *
 *   cq-resize  a's CQ (256) holds 6 receive completions not yet polled: resized to 2 it is
 *              EINVAL (they do not fit) and unchanged; to 1000 (cqe 1024) and back to 3
 *              (cqe 4) around polling 3 of them, each resize keeping the 6 in order; then
 *              240 SENDs of 1 B to 64 KiB from a to b, 2 in flight, a's CQ resized every
 *              40 of them through 2, 64, 4, 1024, 8 and 16 with completions not yet polled,
 *              every completion in order, every byte checked on b; an armed CQ resized
 *              still wakes ibv_get_cq_event; cqe 0 and max_cqe + 1 are EINVAL.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "verbs_data.h"

#define MSGS 240
#define WINDOW 2

static int resize(struct side *s, int cqe, int want_rc, const char *what)
{
	int before = s->cq->cqe, rc = ibv_resize_cq(s->cq, cqe);

	if (rc != want_rc) {
		FAIL("ibv_resize_cq to %d (%s): %s (%d), wanted %s", cqe, what, strerror(rc), rc,
		     strerror(want_rc));
		return -1;
	}
	if (rc == 0 && s->cq->cqe < cqe) {
		FAIL("ibv_resize_cq to %d (%s): cqe %d", cqe, what, s->cq->cqe);
		return -1;
	}
	if (rc != 0 && s->cq->cqe != before) {
		FAIL("ibv_resize_cq to %d refused (%s), but cqe went from %d to %d", cqe, what, before,
		     s->cq->cqe);
		return -1;
	}
	return 0;
}

/* Message m: its length and where it sits in a's buffer. */
static size_t msg_len(uint32_t m)
{
	static const size_t lens[] = { 1, 4096, 65536, 63, 4097, 300 };
	return lens[m % (sizeof(lens) / sizeof(lens[0]))];
}

void check_cq_resize(void)
{
	struct side a, b;
	struct ibv_device_attr da;
	struct ibv_sge sg;
	int bad = failures;

	pair(&a, &b, RW, 7);
	if (ibv_query_device(a.ctx, &da))
		die("ibv_query_device");
	resize(&a, 0, EINVAL, "no CQE");
	resize(&a, da.max_cqe + 1, EINVAL, "max_cqe + 1");

	/* 6 receive completions on a's CQ, not polled: b's SENDs completed, so a's NIC wrote
	 * them (the responder completes a message before it acknowledges it). */
	for (uint64_t i = 0; i < 6; i++) {
		sg = (struct ibv_sge){ .addr = (uintptr_t)a.buf.addr + i * 64, .length = 64, .lkey = a.mr->lkey };
		post_recv(&a, 100 + i, &sg, 1);
	}
	for (uint64_t i = 0; i < 6; i++) {
		sg = (struct ibv_sge){ .addr = (uintptr_t)b.buf.addr, .length = 8, .lkey = b.mr->lkey };
		post_send(&b, i, IBV_WR_SEND, &sg, 1, IBV_SEND_SIGNALED, 0, 0, 0);
		expect_wc(&b, "b's SEND", i, IBV_WC_SUCCESS, IBV_WC_SEND, -1);
	}
	resize(&a, 2, EINVAL, "6 unpolled into 2");
	resize(&a, 1000, 0, "6 unpolled, larger");
	int grown = a.cq->cqe;
	for (uint64_t i = 0; i < 3; i++)
		expect_wc(&a, "a receive before the resizes", 100 + i, IBV_WC_SUCCESS, IBV_WC_RECV, 8);
	resize(&a, 3, 0, "3 unpolled, smaller");
	for (uint64_t i = 3; i < 6; i++)
		expect_wc(&a, "a receive across the resizes", 100 + i, IBV_WC_SUCCESS, IBV_WC_RECV, 8);
	if (failures == bad)
		printf("ok ibv_resize_cq with 6 completions not polled: to 2 EINVAL, to 1000 (cqe %d), to 3 "
		       "(cqe %d) with 3 left; all 6 in order\n",
		       grown, a.cq->cqe);

	/* Traffic, a's CQ resized under it with completions not yet polled. */
	static const int sizes[] = { 2, 64, 4, 1024, 8, 16 };
	uint32_t sent = 0, done = 0;
	while (done < MSGS && failures == bad) {
		while (sent < MSGS && sent - done < WINDOW) {
			size_t len = msg_len(sent);
			uint8_t *src = a.buf.addr + (sent % WINDOW) * 65536;
			uint8_t *dst = b.buf.addr + (sent % WINDOW) * 65536;
			fill(src, len);
			sg = (struct ibv_sge){ .addr = (uintptr_t)dst, .length = 65536, .lkey = b.mr->lkey };
			post_recv(&b, sent, &sg, 1);
			sg = (struct ibv_sge){ .addr = (uintptr_t)src, .length = (uint32_t)len, .lkey = a.mr->lkey };
			post_send(&a, sent, IBV_WR_SEND, &sg, 1, IBV_SEND_SIGNALED, 0, 0, 0);
			sent++;
		}
		if (done % 40 == 20 && sent - done == WINDOW)
			resize(&a, sizes[(done / 40) % 6], 0, "with SENDs in flight");
		size_t len = msg_len(done);
		if (expect_wc(&b, "b's receive", done, IBV_WC_SUCCESS, IBV_WC_RECV, (int64_t)len))
			break;
		if (memcmp(b.buf.addr + (done % WINDOW) * 65536, a.buf.addr + (done % WINDOW) * 65536, len))
			FAIL("message %u: the bytes differ", done);
		if (expect_wc(&a, "a's SEND", done, IBV_WC_SUCCESS, IBV_WC_SEND, -1))
			break;
		done++;
	}
	if (failures == bad)
		printf("ok %u SENDs of 1 B to 64 KiB, a's CQ resized every 40 through 2, 64, 4, 1024, 8, 16 with "
		       "completions in flight: every completion in order, every byte\n",
		       done);

	/* An armed CQ, resized, still raises its event. */
	if (ibv_req_notify_cq(a.cq, 0))
		die("ibv_req_notify_cq");
	resize(&a, 32, 0, "armed");
	if (!write_wakes_cq_event(&a, &b, 7777, "after an armed CQ was resized"))
		printf("ok an armed CQ, resized, woke ibv_get_cq_event\n");
	side_close(&a);
	side_close(&b);
	if (failures == bad)
		printf("ok CQ resize\n");
}
