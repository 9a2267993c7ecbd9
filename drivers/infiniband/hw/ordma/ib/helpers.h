/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers linked into ordma.ko: the parts of ib_core Rust cannot call directly (macros,
 * static inlines) and the facts only the C compiler knows (struct sizes), so ib/ can check
 * its generated bindings against them at load time.
 */
#ifndef ORDMA_IB_HELPERS_H
#define ORDMA_IB_HELPERS_H

#include <linux/types.h>

struct ib_udata;
struct ib_ucontext;
struct rdma_user_mmap_entry;
struct vm_area_struct;

/* sizeof(struct ib_device) and sizeof(struct ib_device_ops) as this tree's C compiler sees them. */
extern const size_t ordma_helper_sizeof_ib_device;
extern const size_t ordma_helper_sizeof_ib_device_ops;

/*
 * Copies the driver's request from udata into req (size bytes, zeroed by the caller;
 * size 0 and a NULL req check that the input is all zero). -EINVAL if the input is shorter
 * than size or has non-zero bytes beyond it (input this driver does not understand),
 * -EFAULT if it cannot be read.
 */
int ordma_helper_udata_in(struct ib_udata *udata, void *req, size_t size);

/* vma->vm_flags tests (the flags are macros). */
bool ordma_helper_vma_exec(const struct vm_area_struct *vma);
bool ordma_helper_vma_shared(const struct vm_area_struct *vma);

/* rdma_user_mmap_io() of one uncached I/O page (pgprot_noncached() is a macro). */
int ordma_helper_mmap_io_noncached(struct ib_ucontext *ucontext, struct vm_area_struct *vma,
				   unsigned long pfn, struct rdma_user_mmap_entry *entry);

#endif
