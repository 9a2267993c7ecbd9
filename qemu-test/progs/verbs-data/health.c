// SPDX-License-Identifier: GPL-2.0
/* Device health (issue 36): what one user can do to the others.
 *
 * Both set up their objects first, print "ready", and start once the file --go names exists;
 * they close their objects once the file --end names exists (if given). The admin commands
 * of setup and teardown stay out of the storm: doorbells still delay commands (issue 36,
 * item 1, not done), and this is item 2's check.
 *
 * arm-storm=S[,P]: one completion left unpolled on an armed CQ, then ibv_req_notify_cq in a
 * loop for S seconds (each call a CQ-arm doorbell), a pause of P ms after every 256 arms
 * (default 0: none). The NIC posts a completion event only for news
 * (a new completion, or the consumer's progress), so the storm must earn this process no
 * event at all: every event would be one more entry in the NIC's event queue and one more
 * allocation of the kernel's, for nobody. The completion is still there afterwards.
 *
 * cq-wakeups=N: N rounds of a WRITE on an armed CQ, each woken by ibv_get_cq_event within
 * 20 s, its bytes checked at the target, the slowest wakeup printed. Run beside arm storms,
 * every wakeup must arrive. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
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

/* Waits (up to 10 minutes) until the file `path` exists; nothing without a path. */
static void wait_for(const char *path)
{
	for (int i = 0; path && i < 6000 && access(path, F_OK); i++)
		usleep(100000);
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

void check_arm_storm(int seconds, int pause_ms)
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
	printf("ready\n");
	wait_for(go_file);
	printf("arm-storm: holding one unpolled completion, arming for %d s\n", seconds);
	double end = now() + seconds;
	do {
		for (int i = 0; i < 256; i++, arms++)
			if (ibv_req_notify_cq(a.cq, 0))
				die("ibv_req_notify_cq");
		if (pause_ms)
			usleep((useconds_t)pause_ms * 1000);
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
	printf("arm-storm: %ld arms in %d s (pause %d ms per 256), %ld completion events from them\n", arms,
	       seconds, pause_ms, events);
	if (events)
		FAIL("arm-storm: %ld arms with nothing new raised %ld completion events (none expected)", arms,
		     events);
	if (!expect_wc(&a, "arm-storm: the held completion", 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, -1))
		printf("ok the held completion polled after the storm\n");
	wait_for(end_file);
	side_close(&a);
	side_close(&b);
}

void check_cq_wakeups(int rounds)
{
	struct side a, b;
	int woken = 0;
	double slowest = 0;

	pair(&a, &b, RW, 7);
	printf("ready\n");
	wait_for(go_file);
	for (int i = 0; i < rounds && !failures; i++) {
		fill(a.buf.addr, 64);
		if (ibv_req_notify_cq(a.cq, 0))
			die("ibv_req_notify_cq");
		double t0 = now();
		if (write_wakes_cq_event(&a, &b, (uint64_t)i, "cq-wakeups"))
			break;
		double t = now() - t0;
		slowest = t > slowest ? t : slowest;
		if (memcmp(a.buf.addr, b.buf.addr, 64)) {
			FAIL("cq-wakeups: round %d: the WRITE's bytes differ at the target", i);
			break;
		}
		woken++;
	}
	printf("cq-wakeups: %d of %d wakeups arrived, bytes checked; the slowest %.0f ms\n", woken, rounds,
	       slowest * 1e3);
	if (woken != rounds)
		FAIL("cq-wakeups: %d of %d wakeups", woken, rounds);
	wait_for(end_file);
	side_close(&a);
	side_close(&b);
}
