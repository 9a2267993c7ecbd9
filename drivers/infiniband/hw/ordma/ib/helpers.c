// SPDX-License-Identifier: GPL-2.0
/* C helpers for ordma's Rust ib/ layer; see helpers.h. */
#include <rdma/ib_verbs.h>

#include "helpers.h"

const size_t ordma_helper_sizeof_ib_device = sizeof(struct ib_device);
const size_t ordma_helper_sizeof_ib_device_ops = sizeof(struct ib_device_ops);

bool ordma_helper_ib_is_udata_cleared(struct ib_udata *udata, size_t offset, size_t len)
{
	return ib_is_udata_cleared(udata, offset, len);
}
