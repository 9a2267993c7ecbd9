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
echo "== a process holding a PD, 2 MRs, 2 CQs and 2 RC QPs (one moved RESET -> INIT -> RTR -> RTS)"
python3 /ordma/src/qemu-test/progs/verbs_cq_qp.py hold >/tmp/hold.out 2>&1 &
holder=$!
for _ in $(seq 300); do grep -q holding /tmp/hold.out && break; sleep 0.1; done
cat /tmp/hold.out
rdma resource show
rdma resource show qp | grep ordma0 || true
kill $holder
wait $holder 2>/dev/null || true
echo "== the data path: ibv_rc_pingpong, unmodified, client and server on ordma0 (--chk: every byte checked)"
ibv_rc_pingpong -d ordma0 -s 4096 -n 200 -c >/tmp/pp-server.out 2>&1 &
pp=$!
source /ordma/src/qemu-test/progs/server-client.sh
wait_listen 18515 $pp || echo "(the ibv_rc_pingpong server did not start: $(cat /tmp/pp-server.out))"
ibv_rc_pingpong -d ordma0 -s 4096 -n 200 -c localhost || echo "(ibv_rc_pingpong failed)"
wait $pp || echo "(the server failed: $(cat /tmp/pp-server.out))"
echo "== dmesg (ordma, infiniband)"
dmesg | grep -iE 'ordma|infiniband|rdma' | grep -v 'command line' || echo "(nothing)"
