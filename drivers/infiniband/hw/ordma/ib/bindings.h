/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What bindgen reads for the ib/ layer: the ib_core headers and our C helpers.
 * The generated Rust (bindings_generated.rs) is a build product.
 */
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/iter.h>
#include <rdma/uverbs_ioctl.h>
#include "helpers.h"
