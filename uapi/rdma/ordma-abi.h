/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * ordma's kernel <-> provider contract: the driver-private parts of the uverbs commands
 * and responses. Documentation/uapi.md describes every field and the rules; the kernel
 * (drivers/infiniband/hw/ordma/ib/) and the provider (userspace-provider/) both generate
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

#endif /* ORDMA_ABI_USER_H */
