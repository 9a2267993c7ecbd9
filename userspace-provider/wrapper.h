/* What bindgen reads for the provider: libibverbs' public API, the kernel's uverbs ABI and
 * ordma's uapi. rdma-core's private provider ABI is not installed; src/abi.rs mirrors it. */
#include <infiniband/verbs.h>
#include <rdma/ib_user_verbs.h>
#include "../uapi/rdma/ordma-abi.h"
