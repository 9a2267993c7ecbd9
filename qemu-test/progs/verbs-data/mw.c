// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data's memory window check (NIC interface 1.9), from --dev (A) to the windows
 * on --dev2 (B; the same device for loopback):
 *
 *   mw  the device claims IBV_DEVICE_MEM_WINDOW and IBV_DEVICE_MEM_WINDOW_TYPE_2B and a
 *       max_mw; B's windows over an MR with IBV_ACCESS_MW_BIND and no remote access of its
 *       own (a window gives it):
 *       - type 1, bound by ibv_bind_mw (IBV_WC_BIND_MW, mw->rkey moved on): A WRITEs and
 *         READs through it, bytes checked; rebound elsewhere, the old rkey refused; unbound
 *         by a bind of length 0, the rkey refused (IBV_WC_REM_ACCESS_ERR);
 *       - type 2, bound by IBV_WR_BIND_MW on B's QP: A WRITEs through it, a byte past its
 *         end refused; invalidated by B's IBV_WR_LOCAL_INV (IBV_WC_LOCAL_INV), the rkey then
 *         refused; bound again, invalidated by A's IBV_WR_SEND_WITH_INV (B's receive:
 *         IBV_WC_WITH_INV and invalidated_rkey), the rkey then refused; bound again and
 *         freed by ibv_dealloc_mw, the rkey then refused;
 *       - errors: ibv_alloc_mw of type 3 EINVAL, ibv_bind_mw of a type 2 window EINVAL, a bind
 *         to an MR without IBV_ACCESS_MW_BIND IBV_WC_MW_BIND_ERR, IBV_WR_LOCAL_INV of a type 1
 *         window IBV_WC_LOC_QP_OP_ERR, ibv_dealloc_pd of a PD with a window EBUSY.
 *       Each refusal ends its QPs (IBV_QPS_ERR): a new pair for the next.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "verbs_data.h"

#define WIN_OFF (5u << 20) /* the windows' MR, in B's buffer */
#define WIN_LEN (64u << 10)
#define WIN_RW (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)
#define MW_MR_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)

/* A pair and B's windows' MR. */
struct rig {
	struct side a, b;
	struct ibv_mr *mr;
};

static void rig_open(struct rig *r, int mr_access)
{
	pair(&r->a, &r->b, RW, 7);
	r->mr = ibv_reg_mr(r->b.pd, r->b.buf.addr + WIN_OFF, WIN_LEN, mr_access);
	if (!r->mr)
		die("ibv_reg_mr of the windows' MR");
}

static void rig_close(struct rig *r)
{
	if (ibv_dereg_mr(r->mr))
		die("ibv_dereg_mr of the windows' MR");
	side_close(&r->a);
	side_close(&r->b);
}

static struct ibv_mw *alloc_mw(struct rig *r, enum ibv_mw_type t)
{
	struct ibv_mw *mw = ibv_alloc_mw(r->b.pd, t);

	if (!mw)
		die("ibv_alloc_mw");
	return mw;
}

/* The bind of `len` bytes at `off` into the windows' MR, remote `access`. */
static struct ibv_mw_bind_info info(struct rig *r, size_t off, size_t len, int access)
{
	struct ibv_mw_bind_info bi = {
		.mr = len ? r->mr : NULL, /* an unbind: no MR, no address (libibverbs' rule) */
		.addr = len ? (uintptr_t)(r->b.buf.addr + WIN_OFF + off) : 0,
		.length = len,
		.mw_access_flags = (unsigned int)access,
	};
	return bi;
}

/* A type 1 bind by ibv_bind_mw on B's QP, its completion `st`; 0 if as wanted. */
static int bind1(struct rig *r, struct ibv_mw *mw, struct ibv_mw_bind_info bi, enum ibv_wc_status st,
		 const char *what)
{
	struct ibv_mw_bind b = { .wr_id = 71, .send_flags = IBV_SEND_SIGNALED, .bind_info = bi };
	uint32_t before = mw->rkey;
	int rc = ibv_bind_mw(r->b.qp, mw, &b);

	if (rc) {
		FAIL("%s: ibv_bind_mw: %s", what, strerror(rc));
		return -1;
	}
	if (expect_wc(&r->b, what, 71, st, st == IBV_WC_SUCCESS ? IBV_WC_BIND_MW : -1, -1))
		return -1;
	if (st == IBV_WC_SUCCESS && mw->rkey == before) {
		FAIL("%s: the window's rkey did not move on (0x%x)", what, mw->rkey);
		return -1;
	}
	return 0;
}

/* A type 2 bind by IBV_WR_BIND_MW on B's QP; the window's rkey after it (0 on failure). */
static uint32_t bind2(struct rig *r, struct ibv_mw *mw, struct ibv_mw_bind_info bi, const char *what)
{
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	struct ibv_send_wr wr = { .wr_id = 72, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED },
			   *bad = NULL;

	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	wr.bind_mw.bind_info = bi;
	int rc = ibv_post_send(r->b.qp, &wr, &bad);
	if (rc) {
		FAIL("%s: ibv_post_send(IBV_WR_BIND_MW): %s", what, strerror(rc));
		return 0;
	}
	if (expect_wc(&r->b, what, 72, IBV_WC_SUCCESS, IBV_WC_BIND_MW, -1))
		return 0;
	mw->rkey = rkey; /* as the consumer does after a type 2 bind */
	return rkey;
}

/* A's WRITE (or READ) of `len` bytes at `off` into the windows' MR through `rkey`, its
 * completion `st`; on success the bytes checked. 0 if as wanted. */
static int through(struct rig *r, enum ibv_wr_opcode op, size_t off, size_t len, uint32_t rkey,
		   enum ibv_wc_status st, const char *what)
{
	uint8_t *local = r->a.buf.addr + 64, *remote = r->b.buf.addr + WIN_OFF + off;
	struct ibv_sge sg = { .addr = (uintptr_t)local, .length = (uint32_t)len, .lkey = r->a.mr->lkey };

	if (op == IBV_WR_RDMA_WRITE) {
		fill(local, len);
		memset(remote, 0x5a, len);
	} else {
		fill(remote, len);
		memset(local, 0x5a, len);
	}
	if (post_send(&r->a, 73, op, &sg, 1, IBV_SEND_SIGNALED, (uintptr_t)remote, rkey, 0))
		return -1;
	int opcode = op == IBV_WR_RDMA_WRITE ? IBV_WC_RDMA_WRITE : IBV_WC_RDMA_READ;
	if (expect_wc(&r->a, what, 73, st, st == IBV_WC_SUCCESS ? opcode : -1, -1))
		return -1;
	if (st == IBV_WC_SUCCESS && memcmp(local, remote, len)) {
		FAIL("%s: bytes differ", what);
		return -1;
	}
	return 0;
}

static void check_type1(void)
{
	struct rig r;
	struct ibv_device_attr da;

	rig_open(&r, MW_MR_ACCESS);
	if (ibv_query_device(r.b.ctx, &da))
		die("ibv_query_device");
	unsigned int want = IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
	if ((da.device_cap_flags & want) != want || da.max_mw <= 0)
		FAIL("device_cap_flags 0x%x max_mw %d: wanted MEM_WINDOW and MEM_WINDOW_TYPE_2B and windows",
		     da.device_cap_flags, da.max_mw);
	else
		printf("ok the device claims memory windows of type 1 and 2B, max_mw %d\n", da.max_mw);

	struct ibv_mw *mw = alloc_mw(&r, IBV_MW_TYPE_1);
	if (ibv_dealloc_pd(r.b.pd) != EBUSY)
		FAIL("ibv_dealloc_pd of a PD with a window: not EBUSY");
	if (!bind1(&r, mw, info(&r, 4096, 8192, WIN_RW), IBV_WC_SUCCESS, "type 1 bind") &&
	    !through(&r, IBV_WR_RDMA_WRITE, 4096, 8192, mw->rkey, IBV_WC_SUCCESS, "type 1 WRITE") &&
	    !through(&r, IBV_WR_RDMA_READ, 4096 + 100, 5000, mw->rkey, IBV_WC_SUCCESS, "type 1 READ"))
		printf("ok type 1: WRITE and READ through the window, bytes checked\n");
	if (!bind1(&r, mw, info(&r, 32768, 4096, WIN_RW), IBV_WC_SUCCESS, "type 1 rebind") &&
	    !through(&r, IBV_WR_RDMA_WRITE, 32768, 4096, mw->rkey, IBV_WC_SUCCESS, "type 1 WRITE, rebound"))
		printf("ok type 1 rebound elsewhere: WRITE through its new rkey\n");
	uint32_t old = mw->rkey;
	if (!bind1(&r, mw, info(&r, 0, 0, 0), IBV_WC_SUCCESS, "type 1 unbind") &&
	    !through(&r, IBV_WR_RDMA_WRITE, 32768, 64, old, IBV_WC_REM_ACCESS_ERR, "type 1 WRITE, unbound"))
		printf("ok type 1 unbound by a bind of length 0: WRITE IBV_WC_REM_ACCESS_ERR\n");
	if (ibv_dealloc_mw(mw))
		FAIL("ibv_dealloc_mw");
	rig_close(&r);
}

/* B's LOCAL_INV (or A's SEND_WITH_INV) of `rkey`; 0 if it completed as wanted. */
static int invalidate(struct rig *r, uint32_t rkey, int remote, enum ibv_wc_status st, const char *what)
{
	struct side *s = remote ? &r->a : &r->b;
	struct ibv_send_wr wr = { .wr_id = 74, .send_flags = IBV_SEND_SIGNALED, .invalidate_rkey = rkey },
			   *bad = NULL;
	uint8_t *rbuf = r->b.buf.addr + 128;
	struct ibv_sge rsg = { .addr = (uintptr_t)rbuf, .length = 256, .lkey = r->b.mr->lkey };
	struct ibv_sge ssg = { .addr = (uintptr_t)r->a.buf.addr, .length = 48, .lkey = r->a.mr->lkey };

	wr.opcode = remote ? IBV_WR_SEND_WITH_INV : IBV_WR_LOCAL_INV;
	if (remote) {
		wr.sg_list = &ssg;
		wr.num_sge = 1;
		if (post_recv(&r->b, 75, &rsg, 1))
			return -1;
	}
	int rc = ibv_post_send(s->qp, &wr, &bad);
	if (rc) {
		FAIL("%s: ibv_post_send: %s", what, strerror(rc));
		return -1;
	}
	int opcode = remote ? IBV_WC_SEND : IBV_WC_LOCAL_INV;
	if (expect_wc(s, what, 74, st, st == IBV_WC_SUCCESS ? opcode : -1, -1))
		return -1;
	if (!remote)
		return 0;
	struct ibv_wc wc = poll_one(&r->b);
	if (wc.wr_id != 75 || wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || wc.byte_len != 48 ||
	    !(wc.wc_flags & IBV_WC_WITH_INV) || (wc.wc_flags & IBV_WC_WITH_IMM) || wc.invalidated_rkey != rkey) {
		FAIL("%s: the receive: wr_id %llu status %s opcode %d byte_len %u flags 0x%x invalidated_rkey 0x%x, "
		     "wanted IBV_WC_WITH_INV of 0x%x",
		     what, (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode, wc.byte_len,
		     wc.wc_flags, wc.invalidated_rkey, rkey);
		return -1;
	}
	return 0;
}

static void check_type2(void)
{
	struct rig r;

	rig_open(&r, MW_MR_ACCESS);
	struct ibv_mw *mw = alloc_mw(&r, IBV_MW_TYPE_2);
	uint32_t k = bind2(&r, mw, info(&r, 8192, 16384, WIN_RW), "type 2 bind");
	if (k && !through(&r, IBV_WR_RDMA_WRITE, 8192, 16384, k, IBV_WC_SUCCESS, "type 2 WRITE") &&
	    !through(&r, IBV_WR_RDMA_READ, 8192, 100, k, IBV_WC_SUCCESS, "type 2 READ") &&
	    !invalidate(&r, k, 0, IBV_WC_SUCCESS, "LOCAL_INV") &&
	    !through(&r, IBV_WR_RDMA_WRITE, 8192, 64, k, IBV_WC_REM_ACCESS_ERR, "type 2 WRITE, invalidated"))
		printf("ok type 2 bound by IBV_WR_BIND_MW: WRITE and READ, bytes checked; after IBV_WR_LOCAL_INV "
		       "IBV_WC_REM_ACCESS_ERR\n");
	ibv_dealloc_mw(mw);
	rig_close(&r);

	rig_open(&r, MW_MR_ACCESS);
	mw = alloc_mw(&r, IBV_MW_TYPE_2);
	k = bind2(&r, mw, info(&r, 0, 4096, WIN_RW), "type 2 bind");
	if (k && !through(&r, IBV_WR_RDMA_WRITE, 4000, 97, k, IBV_WC_REM_ACCESS_ERR, "type 2 WRITE past its end"))
		printf("ok type 2: a WRITE a byte past the window IBV_WC_REM_ACCESS_ERR\n");
	ibv_dealloc_mw(mw);
	rig_close(&r);

	rig_open(&r, MW_MR_ACCESS);
	mw = alloc_mw(&r, IBV_MW_TYPE_2);
	k = bind2(&r, mw, info(&r, 0, 4096, WIN_RW), "type 2 bind");
	if (k && !through(&r, IBV_WR_RDMA_WRITE, 0, 4096, k, IBV_WC_SUCCESS, "type 2 WRITE") &&
	    !invalidate(&r, k, 1, IBV_WC_SUCCESS, "SEND_WITH_INV") &&
	    !through(&r, IBV_WR_RDMA_WRITE, 0, 64, k, IBV_WC_REM_ACCESS_ERR, "type 2 WRITE, invalidated remotely"))
		printf("ok type 2 invalidated by the peer's IBV_WR_SEND_WITH_INV (IBV_WC_WITH_INV, "
		       "invalidated_rkey 0x%x): then IBV_WC_REM_ACCESS_ERR\n", k);
	ibv_dealloc_mw(mw);
	rig_close(&r);

	rig_open(&r, MW_MR_ACCESS);
	mw = alloc_mw(&r, IBV_MW_TYPE_2);
	k = bind2(&r, mw, info(&r, 0, 4096, WIN_RW), "type 2 bind");
	if (ibv_dealloc_mw(mw))
		FAIL("ibv_dealloc_mw of a bound window");
	if (k && !through(&r, IBV_WR_RDMA_WRITE, 0, 64, k, IBV_WC_REM_ACCESS_ERR, "type 2 WRITE, freed"))
		printf("ok type 2 freed while bound: IBV_WC_REM_ACCESS_ERR\n");
	rig_close(&r);
}

static void check_errors(void)
{
	struct rig r;

	rig_open(&r, IBV_ACCESS_LOCAL_WRITE);
	errno = 0;
	struct ibv_mw *bad = ibv_alloc_mw(r.b.pd, (enum ibv_mw_type)3);
	if (bad || errno != EINVAL)
		FAIL("ibv_alloc_mw of type 3: %p, errno %d (wanted EINVAL)", (void *)bad, errno);
	struct ibv_mw *mw2 = alloc_mw(&r, IBV_MW_TYPE_2);
	struct ibv_mw_bind b = { .wr_id = 76, .send_flags = IBV_SEND_SIGNALED, .bind_info = info(&r, 0, 64, WIN_RW) };
	int rc = ibv_bind_mw(r.b.qp, mw2, &b);
	if (rc != EINVAL)
		FAIL("ibv_bind_mw of a type 2 window: %d (wanted EINVAL)", rc);
	struct ibv_mw *mw = alloc_mw(&r, IBV_MW_TYPE_1);
	if (!bind1(&r, mw, info(&r, 0, 64, WIN_RW), IBV_WC_MW_BIND_ERR, "a bind to an MR without MW_BIND"))
		printf("ok errors: type 3 EINVAL, ibv_bind_mw of type 2 EINVAL, a bind to an MR without "
		       "IBV_ACCESS_MW_BIND IBV_WC_MW_BIND_ERR\n");
	ibv_dealloc_mw(mw);
	ibv_dealloc_mw(mw2);
	rig_close(&r);

	rig_open(&r, MW_MR_ACCESS);
	mw = alloc_mw(&r, IBV_MW_TYPE_1);
	if (!bind1(&r, mw, info(&r, 0, 64, WIN_RW), IBV_WC_SUCCESS, "type 1 bind") &&
	    !invalidate(&r, mw->rkey, 0, IBV_WC_LOC_QP_OP_ERR, "LOCAL_INV of a type 1 window"))
		printf("ok errors: IBV_WR_LOCAL_INV of a type 1 window IBV_WC_LOC_QP_OP_ERR\n");
	ibv_dealloc_mw(mw);
	rig_close(&r);
}

void check_mw(void)
{
	check_type1();
	check_type2();
	check_errors();
}
