// SPDX-License-Identifier: GPL-2.0
/* scale: the NIC's object limits, each reached and enforced (issue 20, item 5).
 *
 * Contexts first: ibv_open_device until it fails, at least 1024 at once (the rig's own
 * counted) and the failure ENOMEM (no doorbell page left). Then on one context, for PDs,
 * MRs, CQs and QPs in turn: objects are created until the verb fails, and the count must be
 * exactly the limit ibv_query_device reports (max_pd, max_mr, max_cq, max_qp), the failure
 * ENOMEM; one more after freeing one succeeds; then all are destroyed. The rate of creates
 * and destroys is printed ("rate: ..."): the figures performance.md's table takes. MRs are
 * 4 KiB each over one page (the pin counted once per MR), QPs RC with 1 WR and 1 SGE on one
 * CQ, CQs of 1 entry.
 *
 * scale=N (for a device whose limits are too large to reach here, soft-RoCE): N of each
 * object, no limit checked, the rates printed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "verbs_data.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

enum kind { PD, MR, CQ, QP, CTX };
static const char *const names[] = { "PD", "MR", "CQ", "QP", "context" };

struct rig {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	void *page;
};

/* ibv_open_device's context, or NULL with errno set (open_dev dies instead). */
static struct ibv_context *open_dev_quiet(const char *name)
{
	int n;
	struct ibv_device **l = ibv_get_device_list(&n);
	struct ibv_context *c = NULL;
	errno = ENODEV;
	for (int i = 0; l && i < n; i++)
		if (!strcmp(ibv_get_device_name(l[i]), name))
			c = ibv_open_device(l[i]);
	int e = errno;
	if (l)
		ibv_free_device_list(l);
	errno = e;
	return c;
}

static void *create(struct rig *r, enum kind k)
{
	switch (k) {
	case PD:
		return ibv_alloc_pd(r->ctx);
	case MR:
		return ibv_reg_mr(r->pd, r->page, 4096, IBV_ACCESS_LOCAL_WRITE);
	case CQ:
		return ibv_create_cq(r->ctx, 1, NULL, NULL, 0);
	case QP: {
		struct ibv_qp_init_attr a = {
			.send_cq = r->cq,
			.recv_cq = r->cq,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
		};
		return ibv_create_qp(r->pd, &a);
	}
	case CTX:
		return open_dev_quiet(dev_a);
	}
	return NULL;
}

static int destroy(enum kind k, void *o)
{
	switch (k) {
	case PD:
		return ibv_dealloc_pd(o);
	case MR:
		return ibv_dereg_mr(o);
	case CQ:
		return ibv_destroy_cq(o);
	case QP:
		return ibv_destroy_qp(o);
	case CTX:
		return ibv_close_device(o);
	}
	return EINVAL;
}

/* Creates objects of kind k until the verb fails: `limit - held` must succeed (`held` of
 * them the rig's own), the next fail with ENOMEM. With `at_least`, `limit` is a floor (for
 * contexts: no verb reports their limit); with `exact` 0, `limit` objects and no check. */
static void data_on(struct ibv_context *ctx);
static void fill_to(struct rig *r, enum kind k, int limit, int held, int at_least, int exact)
{
	void **objs = calloc((size_t)limit + 1, sizeof(*objs));
	int n = 0, err = 0, floor = limit;
	if (!objs)
		die("calloc");
	double t0 = now();
	for (;;) {
		if (!exact && n == limit)
			break;
		if (exact && !at_least && n > limit)
			break;
		if (exact && at_least && n == limit) {
			void **more = realloc(objs, ((size_t)n * 2 + 1) * sizeof(*objs));
			if (!more)
				die("realloc");
			objs = more;
			limit = n * 2;
		}
		errno = 0;
		objs[n] = create(r, k);
		if (!objs[n]) {
			err = errno;
			break;
		}
		n++;
		if (n % 4096 == 0)
			printf("  %d %ss\n", n, names[k]);
	}
	double t1 = now();
	if (!exact)
		;
	else if (at_least) {
		if (n + held < floor || err != ENOMEM)
			FAIL("%ss: %d opened besides the rig's %d, then errno %d (%s); wanted at least "
			     "%d, then ENOMEM", names[k], n, held, err, strerror(err), floor);
		else
			printf("ok %ss: %d at once (%d here, %d the rig's), the next ENOMEM\n",
			       names[k], n + held, n, held);
	} else if (n != limit - held || err != ENOMEM)
		FAIL("%s: %d created besides the rig's %d, then errno %d (%s); wanted %d, then ENOMEM",
		     names[k], n, held, err, strerror(err), limit - held);
	else
		printf("ok %s: max %d reached (%d here, %d the rig's), the next ENOMEM\n", names[k],
		       limit, n, held);
	if (n > 0 && exact && k == CTX)
		data_on(objs[n - 1]);
	if (n > 0 && exact) {
		if (destroy(k, objs[n - 1]))
			FAIL("%s: destroy of the last failed", names[k]);
		objs[n - 1] = create(r, k);
		if (!objs[n - 1])
			FAIL("%s: no create after one was destroyed: errno %d", names[k], errno);
		else
			printf("ok %s: one destroyed, one created again\n", names[k]);
		if (!objs[n - 1])
			n--;
	}
	double t2 = now();
	int bad = 0;
	for (int i = n - 1; i >= 0; i--)
		bad += destroy(k, objs[i]) != 0;
	double t3 = now();
	if (bad)
		FAIL("%s: %d destroys failed", names[k], bad);
	if (n > 0)
		printf("rate: %s create %.0f/s, destroy %.0f/s (%d objects)\n", names[k],
		       n / (t1 - t0), n / (t3 - t2), n);
	free(objs);
}

/* The last context opened has the highest doorbell page (2047 of 2048): an SRQ and an RC QP
 * are created on it and the QP, connected to itself, moves a SEND and a WRITE of 64 KiB,
 * bytes checked (interface 1.5 gave QPs and SRQs a byte for their page: 256 and up had
 * none). */
static void data_on(struct ibv_context *ctx)
{
	struct side a;
	memset(&a, 0, sizeof(a));
	a.ctx = ctx;
	side_port(&a);
	a.pd = ibv_alloc_pd(ctx);
	a.cq = a.pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	if (!a.cq) {
		FAIL("the last context: PD or CQ: errno %d", errno);
		return;
	}
	a.buf = alloc_buf(0);
	a.mr = reg(&a, RW);
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_srq *srq = ibv_create_srq(a.pd, &sa);
	if (!srq)
		FAIL("the last context: ibv_create_srq: errno %d (%s)", errno, strerror(errno));
	/* b: the same QP seen as the receiver, its receive completions on their own CQ (what
	 * transfer() polls for each side). */
	struct side b = a;
	b.cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!b.cq)
		FAIL("the last context: a second CQ: errno %d", errno);
	struct ibv_qp_init_attr ia = {
		.send_cq = a.cq,
		.recv_cq = b.cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 4, .max_recv_sge = 4 },
	};
	a.qp = b.cq ? ibv_create_qp(a.pd, &ia) : NULL;
	b.qp = a.qp;
	if (!a.qp)
		FAIL("the last context: ibv_create_qp: errno %d (%s)", errno, strerror(errno));
	else {
		int before = failures;
		connect_qp(&a, &a, 7);
		transfer(&a, &b, IBV_WR_SEND, 65536, 0);
		transfer(&a, &b, IBV_WR_RDMA_WRITE, 65536, 0);
		if (failures == before)
			printf("ok the last context: an SRQ, and a QP's SEND and WRITE of 64 KiB\n");
		if (ibv_destroy_qp(a.qp))
			FAIL("the last context: ibv_destroy_qp");
	}
	if ((srq && ibv_destroy_srq(srq)) || ibv_dereg_mr(a.mr) || ibv_destroy_cq(a.cq) ||
	    (b.cq && ibv_destroy_cq(b.cq)) || ibv_dealloc_pd(a.pd))
		FAIL("the last context: destroy");
	munmap(a.buf.addr, a.buf.len);
}

/* scale (count 0) or scale=N. */
void check_scale(int count)
{
	struct rig r = { 0 };
	struct ibv_device_attr da;
	int exact = count == 0;

	r.ctx = open_dev(dev_a);
	if (ibv_query_device(r.ctx, &da))
		die("ibv_query_device");
	printf("limits: max_pd %d, max_mr %d, max_cq %d, max_qp %d\n", da.max_pd, da.max_mr,
	       da.max_cq, da.max_qp);
	/* A file per context: more than the default 1024. */
	struct rlimit nofile = { 16384, 16384 };
	if (setrlimit(RLIMIT_NOFILE, &nofile))
		die("setrlimit RLIMIT_NOFILE");
	fill_to(&r, CTX, exact ? 1024 : count, 1, 1, exact);
	r.page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r.page == MAP_FAILED)
		die("mmap");
	memset(r.page, 0, 4096);
	fill_to(&r, PD, exact ? da.max_pd : count, 0, 0, exact);
	r.pd = ibv_alloc_pd(r.ctx);
	if (!r.pd)
		die("ibv_alloc_pd");
	fill_to(&r, MR, exact ? da.max_mr : count, 0, 0, exact);
	fill_to(&r, CQ, exact ? da.max_cq : count, 0, 0, exact);
	r.cq = ibv_create_cq(r.ctx, 4, NULL, NULL, 0);
	if (!r.cq)
		die("ibv_create_cq");
	fill_to(&r, QP, exact ? da.max_qp : count, 0, 0, exact);
	if (ibv_destroy_cq(r.cq) || ibv_dealloc_pd(r.pd))
		FAIL("the rig's CQ or PD");
	munmap(r.page, 4096);
	ibv_close_device(r.ctx);
}

/* scale-hold: contexts opened until the NIC has no doorbell page left (at least 1024), each
 * with a PD, a CQ, an MR of 4 KiB and a QP (an extended QP with the ibv_wr_* send ops on
 * every other context), then held until the process is killed: what the kernel must clean up
 * when a process dies holding thousands of contexts. */
void check_scale_hold(void)
{
	struct rlimit nofile = { 16384, 16384 };
	if (setrlimit(RLIMIT_NOFILE, &nofile))
		die("setrlimit RLIMIT_NOFILE");
	void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (page == MAP_FAILED)
		die("mmap");
	memset(page, 0, 4096);
	int n = 0, ex = 0;
	for (;; n++) {
		struct ibv_context *ctx = open_dev_quiet(dev_a);
		if (!ctx) {
			if (errno != ENOMEM)
				FAIL("context %d: errno %d (%s), wanted ENOMEM past the last", n, errno,
				     strerror(errno));
			break;
		}
		struct ibv_pd *pd = ibv_alloc_pd(ctx);
		struct ibv_cq *cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
		struct ibv_mr *mr = pd ? ibv_reg_mr(pd, page, 4096, IBV_ACCESS_LOCAL_WRITE) : NULL;
		struct ibv_qp_init_attr_ex a = {
			.send_cq = cq,
			.recv_cq = cq,
			.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1, .max_recv_sge = 1 },
			.qp_type = IBV_QPT_RC,
			.pd = pd,
			.comp_mask = IBV_QP_INIT_ATTR_PD,
		};
		if (n % 2) {
			a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			a.send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_WRITE;
		}
		struct ibv_qp *qp = pd && cq ? ibv_create_qp_ex(ctx, &a) : NULL;
		/* A memory window too, of type 1 and 2 by turns (the NIC's and the kernel's). */
		struct ibv_mw *mw = pd ? ibv_alloc_mw(pd, n % 2 ? IBV_MW_TYPE_2 : IBV_MW_TYPE_1) : NULL;
		if (!mr || !qp || !mw) {
			FAIL("context %d: PD, CQ, MR, QP or MW: errno %d (%s)", n, errno, strerror(errno));
			break;
		}
		ex += n % 2;
	}
	if (n < 1024)
		FAIL("%d contexts held, wanted at least 1024", n);
	printf("holding %d contexts, each with a PD, a CQ, an MR, a QP (%d extended) and a memory window\n", n,
	       ex);
	fflush(stdout);
	for (;;)
		pause();
}
