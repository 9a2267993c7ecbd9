/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * ordma's kernel <-> provider contract: the driver-private parts of the uverbs commands
 * and responses. Documentation/uapi.md describes every field and the rules; the kernel
 * (drivers/infiniband/hw/ordma/uapi.rs) and the provider (userspace-provider/) both generate
 * their Rust view of this file with bindgen.
 *
 * Rules (efa's): every struct is a multiple of 8 bytes, comp_mask comes first, padding is
 * named reserved_<hex offset> and must be zero, and ORDMA_UVERBS_ABI_VERSION is bumped on
 * any change that breaks an existing provider or kernel.
 */
#ifndef ORDMA_ABI_USER_H
#define ORDMA_ABI_USER_H

#include <linux/types.h>

/* The uverbs ABI version (the kernel's ib_device_ops.uverbs_abi_ver). */
#define ORDMA_UVERBS_ABI_VERSION 1

/* Size of the doorbell page each user context maps. */
#define ORDMA_DB_PAGE_SIZE 4096

/* Driver data of IB_USER_VERBS_CMD_GET_CONTEXT (alloc_ucontext). */
struct ordma_ibv_alloc_ucontext_cmd {
	__u32 comp_mask;	/* no bits defined yet: must be 0 */
	__u32 reserved_04;	/* must be 0 */
};

struct ordma_ibv_alloc_ucontext_resp {
	__u32 comp_mask;	/* no bits defined yet: 0 */
	__u32 db_page_index;	/* the context's doorbell page in BAR2 (1..63) */
	__aligned_u64 db_mmap_key; /* mmap() offset of that page, ORDMA_DB_PAGE_SIZE long */
	__u32 db_page_size;	/* ORDMA_DB_PAGE_SIZE */
	__u32 reserved_14;	/* 0 */
};

/* Driver data of IB_USER_VERBS_CMD_ALLOC_PD: no request (must be empty or zero). */
struct ordma_ibv_alloc_pd_resp {
	__u32 comp_mask;	/* no bits defined yet: 0 */
	__u32 pdn;		/* the NIC's PD number */
};

/*
 * Driver data of IB_USER_VERBS_CMD_CREATE_CQ (and UVERBS_METHOD_CQ_CREATE). The provider
 * allocates the ring and the doorbell record in its own memory; the kernel pins both.
 */
struct ordma_ibv_create_cq_cmd {
	__u32 comp_mask;	/* no bits defined yet: must be 0 */
	__u8 log_depth;		/* the ring holds 2^log_depth CQEs (1..15), >= the cqe asked */
	__u8 log_cqe_size;	/* CQE size: 5 (32 bytes) or 6 (64 bytes) */
	__u16 reserved_06;	/* must be 0 */
	__aligned_u64 buf_addr;	/* the ring: page aligned, 2^(log_depth + log_cqe_size) bytes */
	__aligned_u64 db_addr;	/* the CQ's doorbell record: 8 bytes, 8-byte aligned */
};

struct ordma_ibv_create_cq_resp {
	__u32 comp_mask;	/* no bits defined yet: 0 */
	__u32 cqn;		/* the NIC's CQ number, for the CQ's doorbells */
};

/*
 * Driver data of IB_USER_VERBS_CMD_CREATE_QP (RC). The provider sizes and allocates the
 * send and receive rings; the kernel checks them against the capabilities asked for and
 * the device's limits, pins them and answers the capabilities they hold in the core
 * response. A QP without a receive queue (max_recv_wr 0), or one on an SRQ (whose receive
 * capabilities are ignored and answered 0), has every rq_* field 0.
 */
struct ordma_ibv_create_qp_cmd {
	__u32 comp_mask;	/* no bits defined yet: must be 0 */
	__u8 sq_log_depth;	/* the SQ holds 2^sq_log_depth WQEs (0..15) */
	__u8 sq_log_wqe_size;	/* send WQE size: 6 (64 bytes) .. 10 (1 KiB) */
	__u8 rq_log_depth;	/* the RQ holds 2^rq_log_depth WQEs (0..15) */
	__u8 rq_log_wqe_size;	/* receive WQE size: 6..10 */
	__aligned_u64 sq_buf_addr; /* the SQ ring: page aligned, 2^(log_depth + log_wqe_size) bytes */
	__aligned_u64 rq_buf_addr; /* the RQ ring, likewise; 0 without an RQ */
};

struct ordma_ibv_create_qp_resp {
	__u32 comp_mask;	/* no bits defined yet: 0 */
	__u32 qpn;		/* the NIC's QP number (also the core response's), for doorbells */
};

/*
 * Driver data of IB_USER_VERBS_CMD_CREATE_SRQ (and UVERBS_METHOD_SRQ_CREATE, basic SRQs).
 * The provider sizes and allocates the ring (2^log_depth slots, one always free: max_wr is
 * 2^log_depth - 1) and links its slots (Documentation/hardware.md, "Shared receive
 * queues"); the kernel checks it against max_wr and max_sge asked and the device's limits,
 * pins it, and answers what the SRQ holds in the core response.
 */
struct ordma_ibv_create_srq_cmd {
	__u32 comp_mask;	/* no bits defined yet: must be 0 */
	__u8 log_depth;		/* the ring has 2^log_depth slots (1..15), > the max_wr asked */
	__u8 log_wqe_size;	/* WQE size: 6 (64 bytes) .. 10 (1 KiB), 16 + 16 x max_sge at least */
	__u16 reserved_06;	/* must be 0 */
	__aligned_u64 buf_addr;	/* the ring: page aligned, 2^(log_depth + log_wqe_size) bytes */
};

struct ordma_ibv_create_srq_resp {
	__u32 comp_mask;	/* no bits defined yet: 0 */
	__u32 srqn;		/* the NIC's SRQ number, for the SRQ's doorbells */
};

/*
 * Driver data of IB_USER_VERBS_CMD_RESIZE_CQ (ibv_resize_cq; NIC interface 1.7). Under its CQ
 * lock (no poll meanwhile) the provider allocates the new ring (2^log_depth CQEs of the
 * CQ's CQE size, zeroed, at least the cqe asked) and sends this; the kernel pins it and moves
 * the NIC to it, which answers how many CQEs it had written (pi). From then on CQE i goes
 * to slot i mod 2^log_depth of the new ring, with the new ring's phase; the provider copies
 * the CQEs it has not polled, from its consumer index up to pi, from the old ring into the
 * new one likewise, then frees the old ring. The CQ keeps its doorbell record, its
 * consumer index and its arming. More unpolled CQEs than the new ring holds: EINVAL, and
 * the CQ is as it was.
 */
struct ordma_ibv_resize_cq_cmd {
	__u32 comp_mask;	/* no bits defined yet: must be 0 */
	__u8 log_depth;		/* the new ring has 2^log_depth CQEs (1..15) */
	__u8 reserved_05;	/* must be 0 */
	__u16 reserved_06;	/* must be 0 */
	__aligned_u64 buf_addr;	/* the new ring: page aligned, 2^(log_depth + log_cqe_size) bytes */
};

struct ordma_ibv_resize_cq_resp {
	__u32 comp_mask;	/* no bits defined yet: 0 */
	__u32 pi;		/* CQEs the NIC had written at the move, mod 2^16 */
};

/*
 * Driver data of IB_USER_VERBS_CMD_MODIFY_SRQ with IBV_SRQ_MAX_WR beyond what the SRQ holds:
 * a resize (the device says IBV_DEVICE_SRQ_RESIZE; NIC interface 1.7). Under its SRQ lock the
 * provider allocates a larger ring (2^log_depth slots of the SRQ's WQE size), copies every
 * slot of the old ring into the same slot of the new one, links the new slots after its
 * last free slot (Documentation/hardware.md, "Shared receive queues"), and sends this; the
 * kernel pins the ring, moves the NIC to it, and releases the old ring once the NIC has
 * let go of it. Posted WQEs, the slots QPs hold and the free list keep their slot numbers.
 * A max_wr the SRQ already holds needs no ring (sent with one: EINVAL): nothing is resized;
 * a smaller SRQ is never made.
 */
struct ordma_ibv_modify_srq_cmd {
	__u32 comp_mask;	/* no bits defined yet: must be 0 */
	__u8 log_depth;		/* the new ring has 2^log_depth slots (up to 15), > the SRQ's */
	__u8 reserved_05;	/* must be 0 */
	__u16 reserved_06;	/* must be 0 */
	__aligned_u64 buf_addr;	/* the new ring: page aligned, 2^(log_depth + log_wqe_size) bytes */
};

/*
 * ibv_create_ah: no driver command. The kernel checks the address (port, LID, GRH) and
 * answers the NIC's address vector for it (48 bytes, Documentation/hardware.md, "QP
 * attributes", QpAh), which the provider copies into every UD send WQE to that address.
 */
struct ordma_ibv_create_ah_resp {
	__u32 comp_mask;	/* no bits defined yet: 0 */
	__u32 reserved_04;	/* 0 */
	__u8 av[48];		/* the address vector, as the NIC reads it */
};

#endif /* ORDMA_ABI_USER_H */
