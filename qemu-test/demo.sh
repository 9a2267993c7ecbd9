#!/bin/bash
# What `make run` shows, inside the guest: ordma loaded, the RDMA tools, the kernel's log.
echo "== kernel $(uname -r); ordma.ko:"
grep '^ordma ' /proc/modules
modinfo -F description /ordma/src/drivers/infiniband/hw/ordma/ordma.ko
echo "== PCI functions bound to ordma:"
ls /sys/bus/pci/drivers/ordma | grep : || echo "(none: no ordma NIC attached yet; the NIC model is issue 3)"
echo "== rdma link"
rdma link
echo "== ibv_devinfo"
ibv_devinfo || true
echo "== dmesg (ordma, infiniband)"
dmesg | grep -iE 'ordma|infiniband|rdma' || echo "(nothing yet)"
