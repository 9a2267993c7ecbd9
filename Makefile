# SPDX-License-Identifier: GPL-2.0
#
# ordma's entry points. See README.md and Documentation/testing.md.
#
#   make              build ordma.ko (against KDIR; default: the cached test kernel), the
#                     NIC model (rtl/ordma-model) and the libibverbs provider
#                     (userspace-provider, libordma.so, installed in the guest as
#                     libordma-rdmav34.so)
#   make run          boot a VM with ordma loaded and show it working
#   make test         every capability at least once: lint, unit, model and fuzz tests, the
#                     RTL checks, the module, every VM test, a debug-kernel core (20 min warm)
#   make test-full    all of that and the rest: every debug-kernel test, long forms, long
#                     fuzzing, the RTL's deeper proof and synthesis (Documentation/testing.md)
#   make bench        perftest over ordma and soft-RoCE in one VM: bench-results/latest/table.md
#   make test T=vm-verbs-provider   one step (or several: shell patterns, space-separated);
#                     make test-full T=... the same in the full tier
#   make fmt          format the kernel crate (kernel's rustfmt config) and the workspace
#   make clean        remove build products from the tree
#
# With KDIR=<a Rust-enabled kernel tree> the module is built directly against it, with the
# host's tools. Without KDIR, the pinned build root and the test kernel are built (or reused
# from the cache, $ORDMA_CACHE, default ~/.cache/ordma) and the module is built inside the
# root, against the test kernel.

ORDMA := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))

.PHONY: all modules model provider run test test-full bench clean fmt

ifneq ($(KDIR),)
# Direct build against a given tree (also what the wrapper below runs inside the root).
all: modules model provider

# The model links the RTL blocks (co-simulation, --rtl) where Verilator is installed (the
# build root has it).
model:
	cargo build --release -p ordma-model $(if $(shell command -v verilator),--features rtl)

provider:
	cargo build --release -p ordma-provider -p ordma-verbs-data

modules:
	$(MAKE) -C $(KDIR) M=$(ORDMA) LLVM=$(or $(LLVM),1) $(if $(CLIPPY),CLIPPY=$(CLIPPY)) modules

clean:
	$(MAKE) -C $(KDIR) M=$(ORDMA) LLVM=$(or $(LLVM),1) clean
else
all modules model provider:
	$(ORDMA)/scripts/build-kernel.sh >/dev/null
	$(ORDMA)/scripts/in-root -- make -C /ordma/src KDIR=/ordma/kernel $(if $(CLIPPY),CLIPPY=$(CLIPPY)) $@

clean:
	if [ -f "$$($(ORDMA)/scripts/kernel-path.sh)/.ordma-kernel-complete" ]; then \
		$(ORDMA)/scripts/in-root -- make -C /ordma/src KDIR=/ordma/kernel clean; fi
	rm -rf $(ORDMA)/target
endif

fmt:
	$(ORDMA)/scripts/in-root -- bash -c 'cd /ordma/src && cargo fmt --all && \
		rustfmt --edition 2021 --config-path /ordma/kernel/.rustfmt.toml \
		drivers/infiniband/hw/ordma/ordma_main.rs'

run:
	$(ORDMA)/scripts/build-root.sh >/dev/null
	$(ORDMA)/scripts/root-versions.sh --check
	$(ORDMA)/qemu-test/run --nics 1 -- bash /ordma/src/qemu-test/demo.sh

# B=<groups> on make's command line runs only those (rc transports pingpong vms; bench.sh).
bench:
	$(ORDMA)/scripts/build-root.sh >/dev/null
	$(ORDMA)/scripts/bench.sh $(if $(filter command line,$(origin B)),$(B))

# T=<step names or shell patterns> on make's command line runs only those steps (and the
# builds they need); a T in the environment is ignored, so CI's `make test` is everything.
test:
	ORDMA_TIER= ORDMA_TEST_FILTER='$(if $(filter command line,$(origin T)),$(T))' $(ORDMA)/scripts/test.sh

test-full:
	ORDMA_TIER=full ORDMA_TEST_FILTER='$(if $(filter command line,$(origin T)),$(T))' $(ORDMA)/scripts/test.sh
