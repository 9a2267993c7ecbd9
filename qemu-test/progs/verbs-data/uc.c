// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data's UC check: a UC QP pair (IBV_QPT_UC) through libibverbs.
 *
 *   uc  SEND, SEND with immediate, RDMA WRITE and WRITE with immediate from 0 B to 2 MiB,
 *       inline SENDs, every byte and completion field (transfer() in verbs_data.c); a READ
 *       and both atomics refused at post (EINVAL, nothing posted); a modify with RC's
 *       attributes (max_dest_rd_atomic at RTR, a timeout at RTS) refused (EINVAL) and UC's
 *       own accepted; ibv_query_qp says IBV_QPT_UC.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "verbs_data.h"

/* A READ, a compare and swap and a fetch and add on UC QP `a`: EINVAL each. */
static void check_refused(struct side *a, struct side *b)
{
	static const enum ibv_wr_opcode ops[] = { IBV_WR_RDMA_READ, IBV_WR_ATOMIC_CMP_AND_SWP,
						  IBV_WR_ATOMIC_FETCH_AND_ADD };
	static const char *names[] = { "a READ", "a compare and swap", "a fetch and add" };
	struct ibv_sge s = { .addr = (uintptr_t)a->buf.addr, .length = 8, .lkey = a->mr->lkey };

	for (int i = 0; i < 3; i++) {
		struct ibv_send_wr wr = { .wr_id = 90 + i, .sg_list = &s, .num_sge = 1, .opcode = ops[i],
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad = NULL;
		if (ops[i] == IBV_WR_RDMA_READ) {
			wr.wr.rdma.remote_addr = (uintptr_t)b->buf.addr;
			wr.wr.rdma.rkey = b->mr->rkey;
		} else {
			wr.wr.atomic.remote_addr = (uintptr_t)b->buf.addr;
			wr.wr.atomic.rkey = b->mr->rkey;
		}
		int rc = ibv_post_send(a->qp, &wr, &bad);
		if (rc != EINVAL || bad != &wr)
			FAIL("UC: %s posted: %s, bad_wr %s; wanted EINVAL at it", names[i],
			     rc ? strerror(rc) : "success", bad == &wr ? "at it" : "elsewhere");
		else
			printf("ok UC: %s refused at post (EINVAL)\n", names[i]);
	}
	struct ibv_wc wc;
	if (ibv_poll_cq(a->cq, 1, &wc) != 0)
		FAIL("UC: a completion after the refused posts (wr_id %llu)", (unsigned long long)wc.wr_id);
}

/* A fresh UC QP: RC's attributes refused by ib_core's UC table, UC's taken. */
static void check_attributes(void)
{
	struct side c;

	side_open(&c, dev_a, 2, RW);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = RW };
	if (ibv_modify_qp(c.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("UC modify to INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = c.qp->qp_num;
	a.rq_psn = 7;
	a.max_dest_rd_atomic = 1;
	a.ah_attr.dlid = c.lid;
	a.ah_attr.port_num = 1;
	int base = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
	int r1 = ibv_modify_qp(c.qp, &a, base | IBV_QP_MAX_DEST_RD_ATOMIC);
	int r2 = ibv_modify_qp(c.qp, &a, base);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 7;
	a.timeout = 14;
	int r3 = ibv_modify_qp(c.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT);
	int r4 = ibv_modify_qp(c.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
	struct ibv_qp_attr q;
	struct ibv_qp_init_attr qi;
	int r5 = ibv_query_qp(c.qp, &q, IBV_QP_STATE, &qi);
	if (r1 != EINVAL || r2 || r3 != EINVAL || r4 || r5 || q.qp_state != IBV_QPS_RTS ||
	    qi.qp_type != IBV_QPT_UC)
		FAIL("UC attributes: RTR with max_dest_rd_atomic %s, without %s; RTS with a timeout %s, "
		     "without %s; query %s, state %d, type %d",
		     strerror(r1), strerror(r2), strerror(r3), strerror(r4), strerror(r5), q.qp_state,
		     qi.qp_type);
	else
		printf("ok UC: RC's attributes refused (EINVAL), UC's taken; the QP is IBV_QPT_UC in RTS\n");
	side_close(&c);
}

void check_uc(void)
{
	static const size_t sizes[] = { 0, 1, 63, 4095, 4096, 4097, 65536, (1u << 20) + 3, MAX_MSG };
	static const enum ibv_wr_opcode ops[] = { IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_RDMA_WRITE,
						  IBV_WR_RDMA_WRITE_WITH_IMM };
	struct side a, b;

	qp_kind = IBV_QPT_UC;
	pair(&a, &b, RW, 7);
	for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
			transfer(&a, &b, ops[o], sizes[i], 0);
	for (size_t len = 1; len <= a.max_inline; len = len * 2 + 1) {
		transfer(&a, &b, IBV_WR_SEND, len, 1);
		transfer(&a, &b, IBV_WR_RDMA_WRITE_WITH_IMM, len, 1);
	}
	check_refused(&a, &b);
	side_close(&a);
	side_close(&b);
	check_attributes();
	qp_kind = IBV_QPT_RC;
}
