#!/bin/bash
# What `make run` shows, inside the guest: ordma loaded, the RDMA tools, the kernel's log.
echo "== kernel $(uname -r); ordma.ko:"
grep '^ordma ' /proc/modules
modinfo -F description /ordma/src/drivers/infiniband/hw/ordma/ordma.ko
echo "== ordma PCI functions (lspci -nn -d 4f52:) and their driver:"
lspci -nn -d 4f52:
ls /sys/bus/pci/drivers/ordma | grep : || echo "(none bound)"
echo "== rdma link (the ib_device registration is issue 4: ordma0 appears then)"
rdma link
echo "== ibv_devinfo"
ibv_devinfo || true
echo "== dmesg (ordma, infiniband)"
dmesg | grep -iE 'ordma|infiniband|rdma' | grep -v 'command line' || echo "(nothing)"
