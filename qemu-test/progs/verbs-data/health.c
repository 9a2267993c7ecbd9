// SPDX-License-Identifier: GPL-2.0
/* Device health (issue 36): what one user can do to the others.
 *
 * arm-storm=S: one completion left unpolled on an armed CQ, then ibv_req_notify_cq in a loop
 * for S seconds (each call a CQ-arm doorbell). The NIC posts a completion event only for news
 * (a new completion, or the consumer's progress), so the storm must earn this process no
 * event at all: every event would be one more entry in the NIC's event queue and one more
 * allocation of the kernel's, for nobody. The completion is still there afterwards.
 *
 * cq-wakeups=N: N rounds of a WRITE on an armed CQ, each woken by ibv_get_cq_event within
 * 20 s, its bytes checked at the target; every tenth round an MR of 64 KiB registered and
 * deregistered, the slowest registration printed. Run beside arm storms, every wakeup must
 * arrive and every registration succeed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "verbs_data.h"

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Waits up to 20 s for one completion event of s's CQ; 0 or -1. */
static int cq_event(struct side *s)
{
	struct pollfd p = { .fd = s->ch->fd, .events = POLLIN };
	struct ibv_cq *cq;
	void *cq_ctx;

	if (poll(&p, 1, 20000) != 1 || ibv_get_cq_event(s->ch, &cq, &cq_ctx) || cq != s->cq)
		return -1;
	ibv_ack_cq_events(cq, 1);
	return 0;
}

void check_arm_storm(int seconds)
{
	struct side a, b;
	struct ibv_sge sg;
	long arms = 0, events = 0;

	pair(&a, &b, RW, 7);
	sg = (struct ibv_sge){ .addr = (uintptr_t)a.buf.addr, .length = 64, .lkey = a.mr->lkey };
	if (ibv_req_notify_cq(a.cq, 0))
		die("ibv_req_notify_cq");
	post_send(&a, 1, IBV_WR_RDMA_WRITE, &sg, 1, IBV_SEND_SIGNALED, (uintptr_t)b.buf.addr, b.mr->rkey, 0);
	if (cq_event(&a)) {
		FAIL("arm-storm: no completion event for the first WRITE within 20 s");
		return;
	}
	/* The completion stays unpolled: every arm below finds it. */
	printf("arm-storm: holding one unpolled completion, arming for %d s\n", seconds);
	fflush(stdout);
	double end = now() + seconds;
	do {
		for (int i = 0; i < 256; i++, arms++)
			if (ibv_req_notify_cq(a.cq, 0))
				die("ibv_req_notify_cq");
	} while (now() < end);
	/* Let any event still on its way arrive, then count what came. */
	usleep(500000);
	if (fcntl(a.ch->fd, F_SETFL, fcntl(a.ch->fd, F_GETFL) | O_NONBLOCK))
		die("fcntl");
	struct ibv_cq *cq;
	void *cq_ctx;
	while (!ibv_get_cq_event(a.ch, &cq, &cq_ctx)) {
		ibv_ack_cq_events(cq, 1);
		events++;
	}
	printf("arm-storm: %ld arms in %d s, %ld completion events from them\n", arms, seconds, events);
	if (events)
		FAIL("arm-storm: %ld arms with nothing new raised %ld completion events (none expected)", arms,
		     events);
	if (!expect_wc(&a, "arm-storm: the held completion", 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1))
		printf("ok the held completion polled after the storm\n");
	side_close(&a);
	side_close(&b);
}

void check_cq_wakeups(int rounds)
{
	struct side a, b;
	int woken = 0, regs = 0;
	double slowest = 0;

	pair(&a, &b, RW, 7);
	uint8_t *extra = calloc(1, 64 << 10);
	if (!extra)
		die("calloc");
	for (int i = 0; i < rounds && !failures; i++) {
		fill(a.buf.addr, 64);
		if (ibv_req_notify_cq(a.cq, 0))
			die("ibv_req_notify_cq");
		if (write_wakes_cq_event(&a, &b, (uint64_t)i, "cq-wakeups"))
			break;
		if (memcmp(a.buf.addr, b.buf.addr, 64)) {
			FAIL("cq-wakeups: round %d: the WRITE's bytes differ at the target", i);
			break;
		}
		woken++;
		if (i % 10 == 0) {
			double t0 = now();
			struct ibv_mr *mr = ibv_reg_mr(a.pd, extra, 64 << 10, RW);
			if (!mr) {
				FAIL("cq-wakeups: round %d: ibv_reg_mr of 64 KiB: %s", i, strerror(errno));
				break;
			}
			if (ibv_dereg_mr(mr)) {
				FAIL("cq-wakeups: round %d: ibv_dereg_mr: %s", i, strerror(errno));
				break;
			}
			double t = now() - t0;
			slowest = t > slowest ? t : slowest;
			regs++;
		}
	}
	printf("cq-wakeups: %d of %d wakeups arrived, bytes checked; %d MR registrations, the slowest %.0f ms\n",
	       woken, rounds, regs, slowest * 1e3);
	if (woken != rounds)
		FAIL("cq-wakeups: %d of %d wakeups", woken, rounds);
	free(extra);
	side_close(&a);
	side_close(&b);
}
