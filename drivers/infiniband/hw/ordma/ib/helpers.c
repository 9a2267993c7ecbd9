// SPDX-License-Identifier: GPL-2.0
/* C helpers for ordma's Rust ib/ layer; see helpers.h. */
#include <linux/mm.h>
#include <rdma/ib_verbs.h>
#include <rdma/uverbs_ioctl.h>

#include "helpers.h"

#define SZ(t) sizeof(struct t)
#define OFF(t, f) offsetof(struct t, f)

/* Keep in the order of ib/mod.rs's LAYOUT table. */
const size_t ordma_helper_layout[] = {
	SZ(ib_device), SZ(ib_device_ops), SZ(ib_device_attr), SZ(ib_port_attr),
	SZ(ib_port_immutable), SZ(ib_ucontext), SZ(ib_pd), SZ(ib_udata),
	SZ(rdma_user_mmap_entry), SZ(ib_event),
	OFF(ib_device, dev), OFF(ib_device, name), OFF(ib_device, node_guid),
	OFF(ib_device, node_type), OFF(ib_device, phys_port_cnt),
	OFF(ib_device, num_comp_vectors),
	OFF(ib_ucontext, device), OFF(ib_pd, device),
	OFF(rdma_user_mmap_entry, start_pgoff),
	OFF(ib_event, device), OFF(ib_event, element), OFF(ib_event, event),
	OFF(ib_device_attr, fw_ver), OFF(ib_device_attr, max_pd),
	OFF(ib_port_attr, state), OFF(ib_port_attr, active_speed),
};
const size_t ordma_helper_layout_len = ARRAY_SIZE(ordma_helper_layout);

bool ordma_helper_vma_exec(const struct vm_area_struct *vma)
{
	return vma->vm_flags & VM_EXEC;
}

bool ordma_helper_vma_shared(const struct vm_area_struct *vma)
{
	return vma->vm_flags & VM_SHARED;
}

int ordma_helper_mmap_io_noncached(struct ib_ucontext *ucontext, struct vm_area_struct *vma,
				   unsigned long pfn, size_t pages,
				   struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_io(ucontext, vma, pfn, pages << PAGE_SHIFT,
				 pgprot_noncached(vma->vm_page_prot), entry);
}
