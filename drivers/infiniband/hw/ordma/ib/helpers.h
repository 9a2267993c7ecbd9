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

/* sizeof(struct ib_device) and sizeof(struct ib_device_ops) as this tree's C compiler sees them. */
extern const size_t ordma_helper_sizeof_ib_device;
extern const size_t ordma_helper_sizeof_ib_device_ops;

/* ib_is_udata_cleared(), a static inline: true if udata->inbuf[offset, offset+len) is zero. */
bool ordma_helper_ib_is_udata_cleared(struct ib_udata *udata, size_t offset, size_t len);

#endif
