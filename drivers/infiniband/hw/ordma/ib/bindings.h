/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What bindgen reads for ordma's ib/ layer: the ib_core headers, ordma's uapi
 * (uapi/rdma/ordma-abi.h) and our C helpers.
 * The generated Rust (bindings_generated.rs) is a build product.
 */
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/iter.h>
#include <rdma/uverbs_ioctl.h>
#include <rdma/ordma-abi.h>
#include "helpers.h"
