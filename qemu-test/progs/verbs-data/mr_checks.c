// SPDX-License-Identifier: GPL-2.0
/*
 * ordma-verbs-data's checks of MRs under the data path (the rig is verbs_data.c):
 *   shared  two MRs over one buffer, as NCCL registers its buffers: deregistering the older,
 *           then a newer one, leaves the survivor moving bytes; the dead key is refused
 *   levels  an MR of 1 GiB + 4 MiB of 4 KiB pages (263168 entries: more than the two levels
 *           of 512-entry tables hold, so the NIC gets a three-level page list), made of a
 *           4 MiB memfd mapped over and over: each 2 MiB of the MR (what one level-0 table
 *           covers) maps 2 MiB of the memfd from its own page offset, (k * 7 mod 509) pages
 *           for the k-th, so no two tables within 512 of each other hold the same pages and
 *           a wrong index at any level lands on the wrong bytes. WRITEs and READs past 1 GiB,
 *           across the 1 GiB boundary, across a table and on the MR's last byte land in,
 *           and come from, the memfd where that mapping says; with ORDMA_VD_MR_CHECK set,
 *           that command runs with the MR's key while the MR exists, and must succeed
 *   rereg   ibv_rereg_mr: a new translation (the responder's MR moved to another buffer:
 *           WRITEs and READs land in and come from the new one, the old buffer untouched,
 *           a WRITE to the old range with the same key REM_ACCESS_ERR), new access (READs
 *           allowed, WRITEs REM_ACCESS_ERR), a new PD (the QP's PD no longer the MR's:
 *           REM_ACCESS_ERR), the keys the same after each (an access taken away and
 *           given back: REM_ACCESS_ERR, then bytes with the same key); flags 0 refused by the kernel (IBV_REREG_MR_ERR_CMD, errno
 *           EINVAL)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "verbs_data.h"

void check_shared(void)
{
	struct side a, b;

	pair(&a, &b, RW, 7);
	struct ibv_mr *first = b.mr, *second = reg(&b, RW);
	uint32_t dead = first->rkey;
	if (second->rkey == first->rkey || second->lkey == first->lkey)
		FAIL("shared: two MRs over one buffer got the same key %#x", first->rkey);
	if (ibv_dereg_mr(first))
		die("ibv_dereg_mr (the first of two MRs over one buffer)");
	b.mr = second;
	printf("shared: the first of two MRs over one buffer deregistered; through the second:\n");
	transfer(&a, &b, IBV_WR_RDMA_WRITE, 65536 + 7, 0);
	transfer(&a, &b, IBV_WR_RDMA_READ, 65536 + 7, 0);
	transfer(&a, &b, IBV_WR_SEND, 4096, 0);
	struct ibv_mr *third = reg(&b, RW);
	if (ibv_dereg_mr(third))
		die("ibv_dereg_mr (a third MR over the buffer)");
	printf("shared: a third MR over the buffer registered and deregistered; through the second:\n");
	transfer(&a, &b, IBV_WR_RDMA_WRITE, MAX_MSG, 0);
	transfer(&a, &b, IBV_WR_RDMA_READ, MAX_MSG, 0);

	/* The first MR's key is gone from the NIC: a WRITE with it is a remote access error. */
	struct ibv_sge sg = { .addr = (uintptr_t)a.buf.addr, .length = 64, .lkey = a.mr->lkey };
	if (!post_send(&a, 900, IBV_WR_RDMA_WRITE, &sg, 1, IBV_SEND_SIGNALED, (uintptr_t)b.buf.addr,
		       dead, 0) &&
	    !expect_wc(&a, "shared: WRITE with the deregistered MR's rkey", 900, IBV_WC_REM_ACCESS_ERR,
		       -1, -1))
		printf("ok shared: the deregistered MR's rkey %#x is refused (REM_ACCESS_ERR)\n", dead);
	side_close(&a);
	side_close(&b);
}

#define ALIAS (2u << 20) /* what one level-0 table of 512 entries covers */
#define FILE_SIZE (4u << 20)
#define SPAN ((1ull << 30) + (4ull << 20))

/* The memfd offset the MR's byte at `off` maps. */
static uint64_t file_off(uint64_t off)
{
	return (off / ALIAS * 7 % 509) * 4096 + off % ALIAS;
}

/* One WRITE or READ of len bytes between a's buffer and the MR at off, checked against the
 * memfd (`file`, mapped once on its own). */
static void alias_transfer(struct side *a, struct ibv_mr *mr, uint8_t *file, int read, uint64_t off,
			   size_t len)
{
	static uint64_t id = 1000;
	uint8_t *mine = a->buf.addr + 3;
	char what[96];

	snprintf(what, sizeof(what), "levels: %s %zu B at %#llx", read ? "READ" : "WRITE", len,
		 (unsigned long long)off);
	memset(file, 0, FILE_SIZE);
	if (read) {
		for (size_t i = 0; i < len; i++)
			file[file_off(off + i)] = (uint8_t)(i * 7 + 1);
		memset(mine, 0, len);
	} else {
		fill(mine, len);
	}
	struct ibv_sge sg = { .addr = (uintptr_t)mine, .length = (uint32_t)len, .lkey = a->mr->lkey };
	if (post_send(a, id, read ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE, &sg, 1, IBV_SEND_SIGNALED,
		      (uintptr_t)mr->addr + off, mr->rkey, 0) ||
	    expect_wc(a, what, id, IBV_WC_SUCCESS, read ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE,
		      read ? (int64_t)len : -1)) {
		id++;
		return;
	}
	id++;
	for (size_t i = 0; i < len; i++) {
		uint8_t there = file[file_off(off + i)], here = mine[i];
		if (there != here) {
			FAIL("%s: byte %zu is %#x in the memfd and %#x here", what, i, there, here);
			return;
		}
	}
	if (!read) { /* and nowhere else: the memfd's non-zero bytes are the message's */
		size_t elsewhere = 0;
		for (size_t i = 0; i < FILE_SIZE; i++)
			elsewhere += file[i] != 0;
		size_t nonzero = 0;
		for (size_t i = 0; i < len; i++)
			nonzero += mine[i] != 0;
		if (elsewhere != nonzero) {
			FAIL("%s: %zu non-zero bytes in the memfd, %zu sent", what, elsewhere, nonzero);
			return;
		}
	}
	printf("ok %s: every byte where the mapping puts it\n", what);
}

void check_levels(void)
{
	struct side a, b;
	struct timespec t0, t1;

	pair(&a, &b, RW, 7);
	int memfd = memfd_create("verbs-data-levels", 0);
	if (memfd < 0 || ftruncate(memfd, FILE_SIZE))
		die("memfd");
	uint8_t *file = mmap(NULL, FILE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	uint8_t *base = mmap(NULL, SPAN, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (file == MAP_FAILED || base == MAP_FAILED)
		die("mmap (the memfd, the span)");
	for (uint64_t off = 0; off < SPAN; off += ALIAS)
		if (mmap(base + off, ALIAS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, memfd,
			 (off_t)file_off(off)) == MAP_FAILED)
			die("mmap (an alias)");
	memset(file, 0, FILE_SIZE);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct ibv_mr *mr = ibv_reg_mr(b.pd, base, SPAN, RW);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (!mr)
		die("ibv_reg_mr (1 GiB + 4 MiB over one 4 MiB memfd)");
	printf("ok levels: an MR of %llu pages of 4 KiB over a 4 MiB memfd mapped %llu times: key %#x, "
	       "registered in %.1f s\n",
	       (unsigned long long)(SPAN >> 12), (unsigned long long)(SPAN / ALIAS), mr->rkey,
	       (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	/* The caller's check of the NIC's view of the MR while it exists (data-loopback.sh
	 * asks the model for its page list): ORDMA_VD_MR_CHECK, run with the key. */
	const char *check = getenv("ORDMA_VD_MR_CHECK");
	if (check) {
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "%s %#x", check, mr->rkey);
		fflush(stdout);
		if (system(cmd) != 0)
			FAIL("levels: %s failed", cmd);
	}
	static const struct {
		uint64_t off;
		size_t len;
	} cases[] = {
		{ (1ull << 30) + (1u << 20) + 7, 65536 }, /* under the root's second entry */
		{ (1ull << 30) - 4096 + 3, 8192 }, /* across 1 GiB: from one level-2 subtree to the next */
		{ 3ull * ALIAS - 100, 200 }, /* across a level-0 table and an alias */
		{ SPAN - 4096 - 5, 4096 + 5 }, /* to the MR's last byte */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (int read = 0; read < 2; read++)
			alias_transfer(&a, mr, file, read, cases[i].off, cases[i].len);
	/* One byte past the MR is a remote access error. */
	struct ibv_sge sg = { .addr = (uintptr_t)a.buf.addr, .length = 2, .lkey = a.mr->lkey };
	if (!post_send(&a, 999, IBV_WR_RDMA_WRITE, &sg, 1, IBV_SEND_SIGNALED,
		       (uintptr_t)mr->addr + SPAN - 1, mr->rkey, 0) &&
	    !expect_wc(&a, "levels: a WRITE over the MR's end", 999, IBV_WC_REM_ACCESS_ERR, -1, -1))
		printf("ok levels: a WRITE over the MR's end is refused (REM_ACCESS_ERR)\n");
	if (ibv_dereg_mr(mr))
		die("ibv_dereg_mr (the aliased MR)");
	munmap(base, SPAN);
	munmap(file, FILE_SIZE);
	close(memfd);
	side_close(&a);
	side_close(&b);
}

/* A WRITE of 64 B from a with rkey `rkey` at `raddr`: its completion status is `want`. */
static int rereg_write(struct side *a, uint64_t id, uint64_t raddr, uint32_t rkey,
		       enum ibv_wc_status want, const char *what)
{
	struct ibv_sge sg = { .addr = (uintptr_t)a->buf.addr, .length = 64, .lkey = a->mr->lkey };

	if (post_send(a, id, IBV_WR_RDMA_WRITE, &sg, 1, IBV_SEND_SIGNALED, raddr, rkey, 0))
		return -1;
	return expect_wc(a, what, id, want, -1, -1);
}

/* ibv_rereg_mr of b's MR: 0, or FAIL naming `what`. */
static int rereg(struct side *b, int flags, struct ibv_pd *pd, void *addr, size_t len, int access,
		 const char *what)
{
	int rc = ibv_rereg_mr(b->mr, flags, pd, addr, len, access);
	if (rc)
		FAIL("rereg: %s: ibv_rereg_mr returned %d (errno %s)", what, rc, strerror(errno));
	return rc;
}

/* Both QPs of a pair through RESET and connected again, after an error completion. */
static void side_reconnect(struct side *a, struct side *b)
{
	struct ibv_qp_attr r = { .qp_state = IBV_QPS_RESET };
	if (ibv_modify_qp(a->qp, &r, IBV_QP_STATE) || ibv_modify_qp(b->qp, &r, IBV_QP_STATE))
		die("ibv_modify_qp to RESET");
	connect_qp(a, b, 7);
	connect_qp(b, a, 7);
}

void check_rereg(void)
{
	struct side a, b;
	const size_t len = 1u << 20;

	/* A new translation: the MR moves to `moved`; the old buffer stays as it is. */
	pair(&a, &b, RW, 7);
	uint8_t *moved = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (moved == MAP_FAILED)
		die("mmap");
	transfer(&a, &b, IBV_WR_RDMA_WRITE, 65536, 0);
	uint32_t old_rkey = b.mr->rkey;
	if (!rereg(&b, IBV_REREG_MR_CHANGE_TRANSLATION, NULL, moved, len, 0, "a new translation")) {
		memset(b.buf.addr, 0x77, len);
		fill(a.buf.addr, 65536);
		memset(moved, 0, len);
		struct ibv_sge sg = { (uintptr_t)a.buf.addr, 65536, a.mr->lkey };
		int bad = post_send(&a, 910, IBV_WR_RDMA_WRITE, &sg, 1, IBV_SEND_SIGNALED,
				    (uintptr_t)moved + 4096, b.mr->rkey, 0) ||
			  expect_wc(&a, "rereg: WRITE into the new translation", 910, IBV_WC_SUCCESS, -1, -1);
		fill(moved + len - 8192, 8192);
		struct ibv_sge rs = { (uintptr_t)a.buf.addr + 65536, 8192, a.mr->lkey };
		bad |= post_send(&a, 911, IBV_WR_RDMA_READ, &rs, 1, IBV_SEND_SIGNALED,
				 (uintptr_t)moved + len - 8192, b.mr->rkey, 0) ||
		       expect_wc(&a, "rereg: READ from the new translation", 911, IBV_WC_SUCCESS, -1, 8192);
		int old_kept = 1;
		for (size_t i = 0; i < len; i++)
			old_kept &= b.buf.addr[i] == 0x77;
		if (bad || memcmp(moved + 4096, a.buf.addr, 65536) ||
		    memcmp(a.buf.addr + 65536, moved + len - 8192, 8192) || !old_kept ||
		    b.mr->rkey != old_rkey || b.mr->lkey != old_rkey)
			FAIL("rereg: through the new translation: %s, WRITE bytes %s, READ bytes %s, the "
			     "old buffer %s, keys %#x/%#x (were %#x)",
			     bad ? "a completion failed" : "completions ok",
			     memcmp(moved + 4096, a.buf.addr, 65536) ? "differ" : "ok",
			     memcmp(a.buf.addr + 65536, moved + len - 8192, 8192) ? "differ" : "ok",
			     old_kept ? "untouched" : "written", b.mr->lkey, b.mr->rkey, old_rkey);
		else
			printf("ok rereg: a new translation under the same key %#x: a WRITE and a READ "
			       "use the new buffer, the old one untouched\n", b.mr->rkey);
		if (!rereg_write(&a, 912, (uintptr_t)b.buf.addr, b.mr->rkey, IBV_WC_REM_ACCESS_ERR,
				 "rereg: a WRITE to the old range with the key"))
			printf("ok rereg: the old range through the key is REM_ACCESS_ERR\n");
	}
	side_close(&a);
	side_close(&b);
	munmap(moved, len);

	/* New access: remote READ only. */
	pair(&a, &b, RW, 7);
	if (!rereg(&b, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0,
		   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, "READ-only access")) {
		transfer(&a, &b, IBV_WR_RDMA_READ, 65536, 0);
		if (!rereg_write(&a, 920, (uintptr_t)b.buf.addr, b.mr->rkey, IBV_WC_REM_ACCESS_ERR,
				 "rereg: a WRITE after access became READ-only"))
			printf("ok rereg: new access: READs pass, a WRITE is REM_ACCESS_ERR\n");
	}
	side_close(&a);
	side_close(&b);

	/* The keys stay (the peer keeps using the key it has, as rdma-core's tests do); an access
	 * taken away and given back: REM_ACCESS_ERR between, bytes after. */
	pair(&a, &b, RW, 7);
	old_rkey = b.mr->rkey;
	if (!rereg(&b, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, IBV_ACCESS_LOCAL_WRITE,
		   "no remote access") &&
	    !rereg_write(&a, 930, (uintptr_t)b.buf.addr, old_rkey, IBV_WC_REM_ACCESS_ERR,
			 "rereg: a WRITE without remote access") &&
	    !rereg(&b, IBV_REREG_MR_CHANGE_ACCESS, NULL, NULL, 0, RW, "remote access again")) {
		side_reconnect(&a, &b);
		transfer(&a, &b, IBV_WR_RDMA_WRITE, 4096, 0);
		if (b.mr->rkey != old_rkey || b.mr->lkey != old_rkey)
			FAIL("rereg: the keys changed (%#x/%#x, were %#x)", b.mr->lkey, b.mr->rkey,
			     old_rkey);
		else
			printf("ok rereg: the key %#x stays: REM_ACCESS_ERR without remote access, "
			       "bytes with it again\n", old_rkey);
	}
	errno = 0;
	int rc = ibv_rereg_mr(b.mr, 0, NULL, NULL, 0, 0);
	if (rc != IBV_REREG_MR_ERR_CMD || errno != EINVAL)
		FAIL("rereg: flags 0 returned %d, errno %s; wanted IBV_REREG_MR_ERR_CMD, EINVAL", rc,
		     strerror(errno));
	else
		printf("ok rereg: flags 0 is refused by the kernel (IBV_REREG_MR_ERR_CMD, EINVAL)\n");
	side_close(&a);
	side_close(&b);

	/* A new PD: the QP's PD is no longer the MR's. Then back to the QP's own. */
	pair(&a, &b, RW, 7);
	struct ibv_pd *pd2 = ibv_alloc_pd(b.ctx);
	if (!pd2)
		die("ibv_alloc_pd");
	if (!rereg(&b, IBV_REREG_MR_CHANGE_PD, pd2, NULL, 0, 0, "another PD") &&
	    !rereg_write(&a, 940, (uintptr_t)b.buf.addr, b.mr->rkey, IBV_WC_REM_ACCESS_ERR,
			 "rereg: a WRITE to an MR on another PD than the QP's"))
		printf("ok rereg: on another PD than the QP's, a WRITE is REM_ACCESS_ERR\n");
	if (!rereg(&b, IBV_REREG_MR_CHANGE_PD, b.pd, NULL, 0, 0, "back to the QP's PD"))
		printf("ok rereg: back on the QP's PD\n");
	if (ibv_dealloc_pd(pd2))
		FAIL("rereg: the other PD could not be freed after its MR moved off it");
	side_close(&a);
	side_close(&b);
}
