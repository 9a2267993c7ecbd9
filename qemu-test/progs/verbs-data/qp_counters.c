// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data's per-QP counters helper (NIC interface 1.10), from --dev (A) to --dev2
 * (B; the same device for loopback):
 *
 *   sends-hold=N  an RC pair; N SENDs of 4 KiB from A's QP to B's, each received and its
 *                 bytes checked; then prints "holding qpn A B" and holds both QPs until
 *                 its standard input closes (or it is killed), for `rdma statistic qp`
 *                 to read their counters while they live; then destroys them.
 */
#include <stdio.h>

#include "verbs_data.h"

void check_sends_hold(int n)
{
	struct side a, b;

	pair(&a, &b, RW, 7);
	for (int i = 0; i < n; i++)
		transfer(&a, &b, IBV_WR_SEND, 4096, 0);
	printf("holding qpn %u %u\n", a.qp->qp_num, b.qp->qp_num);
	fflush(stdout);
	while (getchar() != EOF)
		;
	side_close(&a);
	side_close(&b);
	printf("released\n");
}
