// SPDX-License-Identifier: GPL-2.0
/*
 * stress: many verified transfers over many QPs, meant for a wire that loses, duplicates,
 * reorders and corrupts frames. SPAIRS RC QP pairs from A to B, each with its own 2 MiB
 * source on A and destination on B and its receive buffers on B; per round, on every pair
 * at once: a fresh pseudo-random 2 MiB RDMA WRITE and SMALL SENDs of 1 B to 4 KiB, then
 * every completion (status, QP, opcode, length) and every byte B holds. The bytes of round
 * r, pair i are a stream seeded by (r, i, k), so B checks them without a copy of A's.
 *
 * Two ends in one process (--dev A, --dev2 B), or on two machines with a TCP side channel:
 * B runs with --listen PORT, A with --peer HOST:PORT. Over the channel: each end's hello
 * (address, rkey, QP numbers, port address), then per round B's "go r" once its receives
 * for round r are posted and round r-1 is checked (or a failure), and A's round.
 * stress-until-killed runs rounds until one end dies (the test kills it); the other end
 * reports how its transfers ended: A with retry-exceeded and flushed completions (or the
 * side channel closing between rounds, or silent for 30 s: a peer that lost power), B with
 * the side channel closing; anything else is a failure. Progress every 50 rounds; one summary line with the counts and the time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "verbs_data.h"

#define SPAIRS 16
#define CHUNK (2u << 20)
#define SMALL 4
#define SMAX 4096u
#define WRITE_K 0xff /* the wr_id's low byte (and the seed's k) of a pair's WRITE */
#define HELLO_MAGIC 0x6f72646d61737472ull

struct end {
	struct side s;
	uint8_t *mem;
	size_t len;
	struct ibv_mr *mr;
	struct ibv_qp *qp[SPAIRS];
	/* The other end: its buffer's address and rkey, its QPs' numbers. */
	uint64_t raddr;
	uint32_t rkey;
	uint32_t rqpn[SPAIRS];
	int sock; /* the side channel, or -1 */
	/* How completions ended when one failed: counted by reap. */
	int retry_exc, flushed, other, gone;
};

/* What each end tells the other over the side channel (both ends one architecture). */
struct hello {
	uint64_t magic;
	int64_t rounds;
	uint64_t addr;
	uint32_t rkey, lid, eth, qpn[SPAIRS];
	uint8_t gid[16];
};

static void end_open(struct end *e, const char *dev)
{
	memset(e, 0, sizeof(*e));
	e->sock = -1;
	e->s.ctx = open_dev(dev);
	side_port(&e->s);
	e->s.pd = ibv_alloc_pd(e->s.ctx);
	e->s.cq = e->s.pd ? ibv_create_cq(e->s.ctx, 8 * SPAIRS * (SMALL + 1), NULL, NULL, 0) : NULL;
	if (!e->s.cq)
		die("ibv_alloc_pd/ibv_create_cq");
	/* Per pair: the 2 MiB WRITE's buffer, then SMALL buffers of SMAX for the SENDs. */
	e->len = SPAIRS * ((size_t)CHUNK + SMALL * SMAX);
	e->mem = mmap(NULL, e->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (e->mem == MAP_FAILED)
		die("mmap");
	e->mr = ibv_reg_mr(e->s.pd, e->mem, e->len, RW);
	if (!e->mr)
		die("ibv_reg_mr");
	for (int i = 0; i < SPAIRS; i++) {
		struct ibv_qp_init_attr ia = { .send_cq = e->s.cq, .recv_cq = e->s.cq, .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = SMALL + 2, .max_recv_wr = SMALL + 2,
							.max_send_sge = 1, .max_recv_sge = 1 } };
		e->qp[i] = ibv_create_qp(e->s.pd, &ia);
		if (!e->qp[i])
			die("ibv_create_qp");
	}
}

static void end_close(struct end *e)
{
	for (int i = 0; i < SPAIRS; i++)
		if (ibv_destroy_qp(e->qp[i]))
			die("ibv_destroy_qp");
	if (ibv_dereg_mr(e->mr) || ibv_destroy_cq(e->s.cq) || ibv_dealloc_pd(e->s.pd))
		die("destroy");
	munmap(e->mem, e->len);
	ibv_close_device(e->s.ctx);
	if (e->sock >= 0)
		close(e->sock);
}

/* Connects e's QPs to the other end's, described by `h`. */
static void end_connect(struct end *e, const struct hello *h)
{
	struct side to = { .lid = (uint16_t)h->lid, .eth = (int)h->eth };

	memcpy(to.gid.raw, h->gid, sizeof(h->gid));
	e->raddr = h->addr;
	e->rkey = h->rkey;
	for (int i = 0; i < SPAIRS; i++) {
		e->s.qp = e->qp[i];
		e->rqpn[i] = h->qpn[i];
		connect_qpn(&e->s, &to, h->qpn[i], 7);
	}
}

static struct hello hello_of(struct end *e, long rounds)
{
	struct hello h = { .magic = HELLO_MAGIC, .rounds = rounds, .addr = (uintptr_t)e->mem,
			   .rkey = e->mr->rkey, .lid = e->s.lid, .eth = (uint32_t)e->s.eth };

	memcpy(h.gid, e->s.gid.raw, sizeof(h.gid));
	for (int i = 0; i < SPAIRS; i++)
		h.qpn[i] = e->qp[i]->qp_num;
	return h;
}

/* The stream of bytes of round r, pair i, buffer k (WRITE_K: the WRITE). */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t seed(long r, int i, int k)
{
	return mix(((uint64_t)r << 16) ^ ((uint64_t)i << 8) ^ (uint64_t)k) | 1;
}

static unsigned small_len(long r, int i, int k)
{
	return 1 + (unsigned)(mix(seed(r, i, k) ^ 0x5a5a) % SMAX);
}

static inline uint64_t next(uint64_t x)
{
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return x;
}

/* Writes the stream `x` (8 bytes at a time: fast enough for tens of GB). */
static void gen(uint8_t *p, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i += 8) {
		x = next(x);
		memcpy(p + i, &x, n - i < 8 ? n - i : 8);
	}
}

/* Whether p holds the stream `x`'s first n bytes. */
static int same(const uint8_t *p, size_t n, uint64_t x)
{
	for (size_t i = 0; i < n; i += 8) {
		x = next(x);
		if (memcmp(p + i, &x, n - i < 8 ? n - i : 8))
			return 0;
	}
	return 1;
}

static size_t chunk_off(int i)
{
	return (size_t)i * ((size_t)CHUNK + SMALL * SMAX);
}

static uint8_t *chunk(struct end *e, int i)
{
	return e->mem + chunk_off(i);
}

static uint8_t *small(struct end *e, int i, int k)
{
	return chunk(e, i) + CHUNK + (size_t)k * SMAX;
}

/* Whether the side channel's other end has gone (EOF or an error; data waiting is not). */
static int peer_gone(int sock)
{
	char c;
	ssize_t n = recv(sock, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* Polls `want` completions from e's CQ (60 s at most), checking each: success, one of e's
 * QPs, the opcode, and for receives (r >= 0) the length round r sent. Failed completions
 * are counted by kind in e. With `watch` and a side channel, stops early when the other end
 * goes away (e->gone). Returns the number that were wrong or missing. */
static int reap(struct end *e, int want, long r, int watch)
{
	int bad = 0;
	time_t end = time(NULL) + 60;

	for (int n = 0; n < want;) {
		struct ibv_wc wc[16];
		int got = ibv_poll_cq(e->s.cq, 16, wc);

		if (got < 0)
			die("ibv_poll_cq");
		if (!got) {
			if (watch && e->sock >= 0 && peer_gone(e->sock)) {
				e->gone = 1;
				return bad + want - n;
			}
			if (time(NULL) > end) {
				FAIL("stress: %d of %d completions in 60 s", n, want);
				return bad + want - n;
			}
			continue;
		}
		for (int j = 0; j < got; j++, n++) {
			int i = (int)(wc[j].wr_id >> 8), k = (int)(wc[j].wr_id & 0xff);
			int ok = wc[j].status == IBV_WC_SUCCESS && i < SPAIRS && wc[j].qp_num == e->qp[i]->qp_num;

			if (ok && r >= 0)
				ok = k < SMALL && wc[j].opcode == IBV_WC_RECV && wc[j].byte_len == small_len(r, i, k);
			else if (ok)
				ok = wc[j].opcode == (k == WRITE_K ? IBV_WC_RDMA_WRITE : IBV_WC_SEND);
			if (ok)
				continue;
			if (wc[j].status == IBV_WC_RETRY_EXC_ERR)
				e->retry_exc++;
			else if (wc[j].status == IBV_WC_WR_FLUSH_ERR)
				e->flushed++;
			else
				e->other++;
			if (bad++ < 5)
				printf("stress: completion wr_id %#llx status %s qp %u opcode %d len %u\n",
				       (unsigned long long)wc[j].wr_id, ibv_wc_status_str(wc[j].status), wc[j].qp_num,
				       wc[j].opcode, wc[j].byte_len);
		}
	}
	return bad;
}

/* B: the receives of round r, on zeroed buffers. */
static void post_recvs(struct end *b)
{
	for (int i = 0; i < SPAIRS; i++)
		for (int k = 0; k < SMALL; k++) {
			struct ibv_sge rg = { (uintptr_t)small(b, i, k), SMAX, b->mr->lkey };
			struct ibv_recv_wr rwr = { .wr_id = ((uint64_t)i << 8) | (uint64_t)k, .sg_list = &rg,
						   .num_sge = 1 }, *rbad;

			memset(small(b, i, k), 0, SMAX);
			if (ibv_post_recv(b->qp[i], &rwr, &rbad))
				die("ibv_post_recv");
		}
}

/* A: round r's fresh bytes, and on every pair its WRITE and SENDs. */
static void post_round(struct end *a, long r)
{
	for (int i = 0; i < SPAIRS; i++) {
		gen(chunk(a, i), CHUNK, seed(r, i, WRITE_K));
		struct ibv_sge sg = { (uintptr_t)chunk(a, i), CHUNK, a->mr->lkey };
		struct ibv_send_wr w = { .wr_id = ((uint64_t)i << 8) | WRITE_K, .sg_list = &sg, .num_sge = 1,
					 .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED },
				   *sbad;

		w.wr.rdma.remote_addr = a->raddr + chunk_off(i);
		w.wr.rdma.rkey = a->rkey;
		if (ibv_post_send(a->qp[i], &w, &sbad))
			die("ibv_post_send WRITE");
		for (int k = 0; k < SMALL; k++) {
			gen(small(a, i, k), small_len(r, i, k), seed(r, i, k));
			struct ibv_sge ss = { (uintptr_t)small(a, i, k), small_len(r, i, k), a->mr->lkey };
			struct ibv_send_wr sw = { .wr_id = ((uint64_t)i << 8) | (uint64_t)k, .sg_list = &ss,
						  .num_sge = 1, .opcode = IBV_WR_SEND,
						  .send_flags = IBV_SEND_SIGNALED };

			if (ibv_post_send(a->qp[i], &sw, &sbad))
				die("ibv_post_send SEND");
		}
	}
}

/* B: every byte of round r (its destination keeps round r-1's bytes where a WRITE went
 * missing, which are not round r's). Returns the number of buffers wrong. */
static int check_round(struct end *b, long r)
{
	int bad = 0;

	for (int i = 0; i < SPAIRS; i++) {
		if (!same(chunk(b, i), CHUNK, seed(r, i, WRITE_K))) {
			FAIL("stress: round %ld, pair %d: the 2 MiB WRITE's bytes differ", r, i);
			bad++;
		}
		for (int k = 0; k < SMALL; k++)
			if (!same(small(b, i, k), small_len(r, i, k), seed(r, i, k))) {
				FAIL("stress: round %ld, pair %d: SEND %d's bytes differ", r, i, k);
				bad++;
			}
	}
	return bad;
}

static uint64_t round_bytes(long r)
{
	uint64_t n = (uint64_t)SPAIRS * CHUNK;

	for (int i = 0; i < SPAIRS; i++)
		for (int k = 0; k < SMALL; k++)
			n += small_len(r, i, k);
	return n;
}

static double since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void progress(long done, long rounds)
{
	if (done % 50 == 0 || done == rounds) {
		printf("stress: %ld/%ld rounds, %ld WRITEs of 2 MiB and %ld SENDs checked\n", done,
		       rounds == LONG_MAX ? done : rounds, done * SPAIRS, done * SPAIRS * SMALL);
		fflush(stdout);
	}
}

static void summary(long rounds, uint64_t bytes, const struct timespec *t0)
{
	double s = since(t0);

	printf("ok stress: %ld WRITEs of 2 MiB and %ld SENDs of 1 B to 4 KiB over %d QP pairs, "
	       "%.0f MiB in %.1f s (%.1f MiB/s), every byte\n",
	       rounds * SPAIRS, rounds * SPAIRS * SMALL, SPAIRS, (double)bytes / (1 << 20), s,
	       (double)bytes / (1 << 20) / s);
}

/* Both ends in this process: --dev and --dev2. */
static void stress_local(long rounds)
{
	struct end a, b;
	struct hello ha, hb;
	uint64_t bytes = 0;
	struct timespec t0;
	long r;

	end_open(&a, dev_a);
	end_open(&b, dev_b);
	ha = hello_of(&a, rounds);
	hb = hello_of(&b, rounds);
	end_connect(&a, &hb);
	end_connect(&b, &ha);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (r = 0; r < rounds; r++) {
		post_recvs(&b);
		post_round(&a, r);
		if (reap(&a, SPAIRS * (SMALL + 1), -1, 0) + reap(&b, SPAIRS * SMALL, r, 0) + check_round(&b, r)) {
			FAIL("stress: round %ld of %ld failed; stopping", r + 1, rounds);
			break;
		}
		bytes += round_bytes(r);
		progress(r + 1, rounds);
	}
	if (r == rounds)
		summary(rounds, bytes, &t0);
	end_close(&a);
	end_close(&b);
}

static int send_all(int fd, const void *p, size_t n)
{
	for (const char *c = p; n;) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL);

		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int recv_all(int fd, void *p, size_t n)
{
	for (char *c = p; n;) {
		ssize_t got = recv(fd, c, n, 0);

		if (got <= 0)
			return -1;
		c += got;
		n -= (size_t)got;
	}
	return 0;
}

/* The side channel's socket: no Nagle; a read waits 30 s at most, so that an end whose
 * peer lost power (no FIN, no RST ever comes) takes the silence for the peer gone. */
static void channel_opts(int fd)
{
	int one = 1;
	struct timeval t = { .tv_sec = 30 };

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof(t));
}

/* B: listens on `port`, takes one connection. */
static int accept_one(const char *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port)) };
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0), fd;

	if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(l, (struct sockaddr *)&sa, sizeof(sa)) || listen(l, 1))
		die("listen");
	printf("stress: listening on port %s\n", port);
	fflush(stdout);
	fd = accept(l, NULL, NULL);
	if (fd < 0)
		die("accept");
	close(l);
	channel_opts(fd);
	return fd;
}

/* A: connects to HOST:PORT, retrying for 300 s (the other machine may still be booting). */
static int connect_to(const char *peer)
{
	char host[256];
	const char *colon = strrchr(peer, ':');
	struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *ai;

	if (!colon || (size_t)(colon - peer) >= sizeof(host)) {
		fprintf(stderr, "--peer wants HOST:PORT, not %s\n", peer);
		exit(2);
	}
	memcpy(host, peer, (size_t)(colon - peer));
	host[colon - peer] = 0;
	if (getaddrinfo(host, colon + 1, &hints, &ai)) {
		fprintf(stderr, "cannot resolve %s\n", peer);
		exit(2);
	}
	for (int tries = 0; tries < 3000; tries++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd < 0)
			die("socket");
		if (!connect(fd, ai->ai_addr, ai->ai_addrlen)) {
			freeaddrinfo(ai);
			channel_opts(fd);
			return fd;
		}
		close(fd);
		usleep(100000);
	}
	die(peer);
	return -1;
}

/* One end of two machines'. rounds < 0: until the other end is killed. */
static void stress_net(long rounds)
{
	int until_killed = rounds < 0, is_b = net_listen != NULL;
	struct end e;
	struct hello mine, theirs;
	uint64_t bytes = 0;
	struct timespec t0;
	int64_t go = 0;
	long r;

	if (until_killed)
		rounds = LONG_MAX;
	end_open(&e, dev_a);
	e.sock = is_b ? accept_one(net_listen) : connect_to(net_peer);
	mine = hello_of(&e, rounds);
	if (send_all(e.sock, &mine, sizeof(mine)) || recv_all(e.sock, &theirs, sizeof(theirs)))
		die("stress: the hello");
	if (theirs.magic != HELLO_MAGIC || theirs.rounds != rounds) {
		FAIL("stress: the other end wants %lld rounds (magic %#llx), not %ld", (long long)theirs.rounds,
		     (unsigned long long)theirs.magic, rounds);
		end_close(&e);
		return;
	}
	end_connect(&e, &theirs);
	printf("stress: connected as %s, transferring\n", is_b ? "B (receiving, checking)" : "A (sending)");
	fflush(stdout);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (r = 0; r < rounds; r++) {
		int bad;

		if (is_b) {
			post_recvs(&e);
			go = r;
			if (send_all(e.sock, &go, sizeof(go))) {
				e.gone = 1;
				break;
			}
			bad = reap(&e, SPAIRS * SMALL, r, 1);
			if (!bad)
				bad = check_round(&e, r);
		} else {
			if (recv_all(e.sock, &go, sizeof(go))) {
				e.gone = 1;
				break;
			}
			if (go != r) {
				FAIL("stress: B found round %lld wrong", (long long)(-1 - go));
				break;
			}
			post_round(&e, r);
			bad = reap(&e, SPAIRS * (SMALL + 1), -1, 0);
		}
		if (bad || e.gone)
			break;
		bytes += round_bytes(r);
		progress(r + 1, rounds);
	}
	if (until_killed) {
		/* The other end died: A's transfers in flight end in retry-exceeded (the rest of
		 * each QP's flushed), or the side channel closes between rounds; B sees the side
		 * channel close. Anything else is a failure. */
		int ok = e.other == 0 && (e.gone || (!is_b && e.retry_exc > 0));

		if (ok)
			printf("ok peer gone in round %ld: %d completions RETRY_EXC_ERR, %d WR_FLUSH_ERR%s\n", r,
			       e.retry_exc, e.flushed, e.gone ? ", the side channel closed or silent" : "");
		else
			FAIL("stress: round %ld ended with %d other error completions (%d retry-exceeded, %d flushed, "
			     "side channel %s)",
			     r, e.other, e.retry_exc, e.flushed, e.gone ? "closed" : "open");
	} else if (r < rounds) {
		FAIL("stress: round %ld of %ld failed%s; stopping", r + 1, rounds,
		     e.gone ? " (the other end went away)" : "");
		if (is_b && !e.gone) {
			go = -1 - r;
			send_all(e.sock, &go, sizeof(go));
		}
	} else {
		/* B's last word: the last round checked. */
		go = rounds;
		if (is_b ? send_all(e.sock, &go, sizeof(go)) : (recv_all(e.sock, &go, sizeof(go)) || go != rounds))
			FAIL("stress: no word from B that the last round was right");
		else
			summary(rounds, bytes, &t0);
	}
	end_close(&e);
}

void check_stress(long rounds)
{
	if (net_listen || net_peer)
		stress_net(rounds);
	else if (rounds < 0)
		FAIL("stress-until-killed wants two machines (--listen or --peer)");
	else
		stress_local(rounds);
}
