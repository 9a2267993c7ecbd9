/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C helpers linked into the driver's module with the ib/ layer: the parts of ib_core Rust
 * cannot call directly (macros, static inlines) and the facts only the C compiler knows
 * (struct sizes and offsets), so ib/ can check its generated bindings against them at load
 * time.
 */
#ifndef RUST_IB_HELPERS_H
#define RUST_IB_HELPERS_H

#include <linux/types.h>

struct ib_ucontext;
struct rdma_user_mmap_entry;
struct vm_area_struct;
struct ib_device;
struct ib_umem;
struct ib_block_iter;

/*
 * The sizes and offsets ib/ relies on, as this tree's C compiler sees them, in the order
 * ib/mod.rs lists them (AbiChecked); rust_ib_helper_layout_len entries.
 */
extern const size_t rust_ib_helper_layout[];
extern const size_t rust_ib_helper_layout_len;

/* vma->vm_flags tests (the flags are macros). */
bool rust_ib_helper_vma_exec(const struct vm_area_struct *vma);
bool rust_ib_helper_vma_shared(const struct vm_area_struct *vma);

/* rdma_user_mmap_io() of `pages` uncached I/O pages (pgprot_noncached() is a macro). */
int rust_ib_helper_mmap_io_noncached(struct ib_ucontext *ucontext, struct vm_area_struct *vma,
				   unsigned long pfn, size_t pages,
				   struct rdma_user_mmap_entry *entry);

/*
 * ib_umem_get_va() (a static inline) for user memory at [addr, addr + len), and a
 * reference on the ib_device, so the umem can be released after the device is
 * unregistered (a NIC that never acknowledged a destroy): rust_ib_helper_umem_release()
 * releases both.
 */
struct ib_umem *rust_ib_helper_umem_get(struct ib_device *dev, unsigned long addr, size_t len,
				      int access);
void rust_ib_helper_umem_release(struct ib_umem *umem);

/*
 * ib_umem_dmabuf_get_pinned() of `len` bytes at `offset` of dma-buf `fd`, as a plain
 * umem (its first member), with a reference on the ib_device as above.
 */
struct ib_umem *rust_ib_helper_umem_dmabuf_get_pinned(struct ib_device *dev, unsigned long offset,
						    size_t len, int fd, int access);

/* The driver data of an ioctl verb (&attrs->driver_udata), NULL without attrs. */
struct uverbs_attr_bundle;
struct ib_udata *rust_ib_helper_attrs_driver_udata(struct uverbs_attr_bundle *attrs);

/* The user context of an ioctl verb (attrs->context), NULL without attrs. */
struct ib_ucontext *rust_ib_helper_attrs_ucontext(struct uverbs_attr_bundle *attrs);

/* The user context of a verb's driver udata (rdma_udata_to_drv_context()), NULL for none. */
struct ib_udata;
struct ib_ucontext *rust_ib_helper_udata_ucontext(struct ib_udata *udata);

/* ib_umem_num_dma_blocks() and rdma_umem_for_each_dma_block()'s steps (static inlines). */
size_t rust_ib_helper_umem_num_dma_blocks(struct ib_umem *umem, unsigned long pgsz);
void rust_ib_helper_umem_block_iter_start(struct ib_block_iter *biter, struct ib_umem *umem,
					unsigned long pgsz);
bool rust_ib_helper_umem_block_iter_next(struct ib_block_iter *biter);
u64 rust_ib_helper_block_iter_dma_address(struct ib_block_iter *biter);

/* The netdev of a netdevice notifier's event (netdev_notifier_info_to_dev()). */
struct net_device;
struct net_device *rust_ib_helper_netdev_notifier_info_to_dev(void *ptr);

/* Whether ndev is an Ethernet netdev whose permanent address is the 6 bytes at mac. */
bool rust_ib_helper_netdev_has_perm_addr(const struct net_device *ndev, const u8 *mac);

/* Whether ndev is running with its carrier on (ib_get_curr_port_state()'s ACTIVE). */
bool rust_ib_helper_netdev_up(const struct net_device *ndev);

/* dev_put() (a static inline; NULL is fine). */
void rust_ib_helper_dev_put(struct net_device *ndev);

#endif
