// SPDX-License-Identifier: GPL-2.0
/* C helpers for the Rust ib/ layer; see helpers.h. */
#include <linux/etherdevice.h>
#include <linux/mm.h>
#include <linux/netdevice.h>
#include <rdma/ib_umem.h>
#include <rdma/ib_verbs.h>
#include <rdma/iter.h>
#include <rdma/uverbs_ioctl.h>

#include "helpers.h"

#define SZ(t) sizeof(struct t)
#define OFF(t, f) offsetof(struct t, f)

/* Keep in the order of ib/mod.rs's LAYOUT table. */
const size_t rust_ib_helper_layout[] = {
	SZ(ib_device),
	OFF(ib_device, dev), OFF(ib_device, dev.parent),
	OFF(ib_device, name),
	OFF(ib_device, node_guid),
	OFF(ib_device, node_type),
	OFF(ib_device, phys_port_cnt),
	OFF(ib_device, num_comp_vectors),
	SZ(ib_device_ops),
	SZ(ib_device_attr),
	OFF(ib_device_attr, fw_ver),
	OFF(ib_device_attr, sys_image_guid),
	OFF(ib_device_attr, max_mr_size),
	OFF(ib_device_attr, page_size_cap),
	OFF(ib_device_attr, vendor_id),
	OFF(ib_device_attr, vendor_part_id),
	OFF(ib_device_attr, hw_ver),
	OFF(ib_device_attr, max_qp),
	OFF(ib_device_attr, max_qp_wr),
	OFF(ib_device_attr, max_send_sge),
	OFF(ib_device_attr, max_recv_sge),
	OFF(ib_device_attr, max_sge_rd),
	OFF(ib_device_attr, max_cq),
	OFF(ib_device_attr, max_cqe),
	OFF(ib_device_attr, max_mr),
	OFF(ib_device_attr, max_pd),
	OFF(ib_device_attr, max_pkeys),
	OFF(ib_device_attr, max_srq),
	OFF(ib_device_attr, max_srq_wr),
	OFF(ib_device_attr, max_srq_sge),
	OFF(ib_device_attr, max_mw),
	SZ(ib_port_attr),
	OFF(ib_port_attr, state),
	OFF(ib_port_attr, max_mtu),
	OFF(ib_port_attr, active_mtu),
	OFF(ib_port_attr, gid_tbl_len),
	OFF(ib_port_attr, max_msg_sz),
	OFF(ib_port_attr, pkey_tbl_len),
	OFF(ib_port_attr, lid),
	OFF(ib_port_attr, sm_lid),
	OFF(ib_port_attr, active_width),
	OFF(ib_port_attr, active_speed),
	OFF(ib_port_attr, phys_state),
	SZ(ib_port_immutable),
	OFF(ib_port_immutable, pkey_tbl_len),
	OFF(ib_port_immutable, gid_tbl_len),
	OFF(ib_port_immutable, core_cap_flags),
	OFF(ib_port_immutable, max_mad_size),
	sizeof(union ib_gid),
	SZ(ib_ucontext),
	OFF(ib_ucontext, device),
	SZ(ib_pd),
	OFF(ib_pd, device),
	SZ(ib_udata),
	SZ(rdma_user_mmap_entry),
	OFF(rdma_user_mmap_entry, start_pgoff),
	SZ(ib_event),
	OFF(ib_event, device),
	OFF(ib_event, element),
	OFF(ib_event, event),
	SZ(ib_mr),
	OFF(ib_mr, lkey),
	OFF(ib_mr, rkey),
	SZ(ib_block_iter),
	SZ(ib_cq), OFF(ib_cq, device), OFF(ib_cq, comp_handler), OFF(ib_cq, event_handler),
	OFF(ib_cq, cq_context), OFF(ib_cq, cqe),
	SZ(ib_cq_init_attr), OFF(ib_cq_init_attr, cqe), OFF(ib_cq_init_attr, comp_vector),
	OFF(ib_cq_init_attr, flags),
	SZ(ib_qp), OFF(ib_qp, device), OFF(ib_qp, pd), OFF(ib_qp, send_cq), OFF(ib_qp, recv_cq),
	OFF(ib_qp, event_handler), OFF(ib_qp, qp_context), OFF(ib_qp, qp_num), OFF(ib_qp, qp_type),
	OFF(ib_qp, counter),
	SZ(ib_qp_init_attr), OFF(ib_qp_init_attr, send_cq), OFF(ib_qp_init_attr, recv_cq),
	OFF(ib_qp_init_attr, srq), OFF(ib_qp_init_attr, xrcd), OFF(ib_qp_init_attr, cap),
	OFF(ib_qp_init_attr, sq_sig_type), OFF(ib_qp_init_attr, qp_type),
	OFF(ib_qp_init_attr, create_flags), OFF(ib_qp_init_attr, rwq_ind_tbl),
	SZ(ib_qp_cap),
	SZ(ib_srq), OFF(ib_srq, device), OFF(ib_srq, pd), OFF(ib_srq, event_handler),
	OFF(ib_srq, srq_context),
	SZ(ib_srq_init_attr), OFF(ib_srq_init_attr, attr), OFF(ib_srq_init_attr, srq_type),
	SZ(ib_srq_attr), OFF(ib_srq_attr, max_wr), OFF(ib_srq_attr, max_sge),
	OFF(ib_srq_attr, srq_limit),
	SZ(ib_ah), OFF(ib_ah, device), OFF(ib_ah, pd),
	SZ(rdma_ah_init_attr), OFF(rdma_ah_init_attr, ah_attr), OFF(rdma_ah_init_attr, flags),
	SZ(ib_qp_attr), OFF(ib_qp_attr, qp_state), OFF(ib_qp_attr, path_mtu), OFF(ib_qp_attr, qkey),
	OFF(ib_qp_attr, dest_qp_num), OFF(ib_qp_attr, qp_access_flags), OFF(ib_qp_attr, cap),
	OFF(ib_qp_attr, ah_attr), OFF(ib_qp_attr, pkey_index), OFF(ib_qp_attr, en_sqd_async_notify),
	OFF(ib_qp_attr, min_rnr_timer), OFF(ib_qp_attr, port_num), OFF(ib_qp_attr, timeout),
	OFF(ib_qp_attr, rnr_retry), OFF(ib_qp_attr, rate_limit),
	SZ(rdma_ah_attr), OFF(rdma_ah_attr, grh), OFF(rdma_ah_attr, sl), OFF(rdma_ah_attr, port_num),
	OFF(rdma_ah_attr, ah_flags), OFF(rdma_ah_attr, type),
	OFF(ib_global_route, dgid), OFF(ib_global_route, flow_label),
	OFF(ib_global_route, traffic_class),
	OFF(rdma_ah_attr, roce.dmac),
	SZ(ib_gid_attr), OFF(ib_gid_attr, device), OFF(ib_gid_attr, gid),
	OFF(ib_gid_attr, gid_type), OFF(ib_gid_attr, index), OFF(ib_gid_attr, port_num),
	SZ(notifier_block), OFF(notifier_block, notifier_call),
	SZ(ib_mw), OFF(ib_mw, device), OFF(ib_mw, pd), OFF(ib_mw, rkey), OFF(ib_mw, type),
	SZ(rdma_counter), OFF(rdma_counter, device), OFF(rdma_counter, port),
	OFF(rdma_counter, stats),
};
const size_t rust_ib_helper_layout_len = ARRAY_SIZE(rust_ib_helper_layout);

bool rust_ib_helper_vma_exec(const struct vm_area_struct *vma)
{
	return vma->vm_flags & VM_EXEC;
}

bool rust_ib_helper_vma_shared(const struct vm_area_struct *vma)
{
	return vma->vm_flags & VM_SHARED;
}

int rust_ib_helper_mmap_io_noncached(struct ib_ucontext *ucontext, struct vm_area_struct *vma,
				   unsigned long pfn, size_t pages,
				   struct rdma_user_mmap_entry *entry)
{
	return rdma_user_mmap_io(ucontext, vma, pfn, pages << PAGE_SHIFT,
				 pgprot_noncached(vma->vm_page_prot), entry);
}

struct ib_umem *rust_ib_helper_umem_get(struct ib_device *dev, unsigned long addr, size_t len,
				      int access)
{
	struct ib_umem *umem = ib_umem_get_va(dev, addr, len, access);

	if (!IS_ERR(umem))
		get_device(&dev->dev);
	return umem;
}

struct ib_umem *rust_ib_helper_umem_dmabuf_get_pinned(struct ib_device *dev, unsigned long offset,
						    size_t len, int fd, int access)
{
	struct ib_umem_dmabuf *umem = ib_umem_dmabuf_get_pinned(dev, offset, len, fd, access);

	if (IS_ERR(umem))
		return ERR_CAST(umem);
	get_device(&dev->dev);
	return &umem->umem;
}

struct ib_udata *rust_ib_helper_attrs_driver_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}

struct ib_ucontext *rust_ib_helper_attrs_ucontext(struct uverbs_attr_bundle *attrs)
{
	return attrs ? attrs->context : NULL;
}

struct ib_ucontext *rust_ib_helper_udata_ucontext(struct ib_udata *udata)
{
	return udata ? rdma_udata_to_uverbs_attr_bundle(udata)->context : NULL;
}

void rust_ib_helper_umem_release(struct ib_umem *umem)
{
	struct ib_device *dev = umem->ibdev;

	ib_umem_release(umem);
	put_device(&dev->dev);
}

size_t rust_ib_helper_umem_num_dma_blocks(struct ib_umem *umem, unsigned long pgsz)
{
	return ib_umem_num_dma_blocks(umem, pgsz);
}

void rust_ib_helper_umem_block_iter_start(struct ib_block_iter *biter, struct ib_umem *umem,
					unsigned long pgsz)
{
	__rdma_umem_block_iter_start(biter, umem, pgsz);
}

bool rust_ib_helper_umem_block_iter_next(struct ib_block_iter *biter)
{
	return __rdma_umem_block_iter_next(biter);
}

u64 rust_ib_helper_block_iter_dma_address(struct ib_block_iter *biter)
{
	return rdma_block_iter_dma_address(biter);
}

struct net_device *rust_ib_helper_netdev_notifier_info_to_dev(void *ptr)
{
	return netdev_notifier_info_to_dev(ptr);
}

bool rust_ib_helper_netdev_has_perm_addr(const struct net_device *ndev, const u8 *mac)
{
	return ndev->type == ARPHRD_ETHER && ndev->addr_len == ETH_ALEN &&
	       ether_addr_equal_unaligned(ndev->perm_addr, mac);
}

bool rust_ib_helper_netdev_up(const struct net_device *ndev)
{
	return netif_running(ndev) && netif_carrier_ok(ndev);
}

void rust_ib_helper_dev_put(struct net_device *ndev)
{
	dev_put(ndev);
}
