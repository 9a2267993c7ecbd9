// SPDX-License-Identifier: GPL-2.0
/* C helpers for ordma's Rust ib/ layer; see helpers.h. */
#include <linux/mm.h>
#include <rdma/ib_verbs.h>

#include "helpers.h"

const size_t ordma_helper_sizeof_ib_device = sizeof(struct ib_device);
const size_t ordma_helper_sizeof_ib_device_ops = sizeof(struct ib_device_ops);


int ordma_helper_udata_in(struct ib_udata *udata, void *req, size_t size)
{
	if (udata->inlen < size)
		return -EINVAL;
	if (udata->inlen > size && !ib_is_udata_cleared(udata, size, udata->inlen - size))
		return -EINVAL;
	return ib_copy_from_udata(req, udata, size);
}

bool ordma_helper_vma_exec(const struct vm_area_struct *vma)
{
	return vma->vm_flags & VM_EXEC;
}

bool ordma_helper_vma_shared(const struct vm_area_struct *vma)
{
	return vma->vm_flags & VM_SHARED;
}

int ordma_helper_mmap_io_noncached(struct ib_ucontext *ucontext, struct vm_area_struct *vma,
				   unsigned long pfn, struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_io(ucontext, vma, pfn, PAGE_SIZE,
				 pgprot_noncached(vma->vm_page_prot), entry);
}
