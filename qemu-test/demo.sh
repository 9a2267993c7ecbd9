#!/bin/bash
# What `make run` shows, inside the guest: ordma loaded, the RDMA tools, the kernel's log.
echo "== kernel $(uname -r); ordma.ko:"
grep '^ordma ' /proc/modules
modinfo -F description /ordma/payload/ordma.ko
echo "== ordma PCI functions (lspci -nn -d 4f52:) and their driver:"
lspci -nn -d 4f52:
ls /sys/bus/pci/drivers/ordma | grep : || echo "(none bound)"
echo "== rdma link"
rdma link
echo "== ibv_devices, ibv_devinfo (through ordma's provider, libordma-rdmav34.so)"
ibv_devices
ibv_devinfo || true
echo "== a verbs process: open ordma0, allocate 2 PDs on the NIC, map its doorbell page"
echo free | python3 /ordma/src/qemu-test/progs/verbs_ctx.py hold ordma0 2
echo "== dmesg (ordma, infiniband)"
dmesg | grep -iE 'ordma|infiniband|rdma' | grep -v 'command line' || echo "(nothing)"
