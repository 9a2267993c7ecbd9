# Sourced by VM tests that bind and unbind ordma NICs by hand.
#   bind_result BDF   writes BDF to ordma's sysfs bind file; prints "ok", or the errno
#                     name the write failed with (the probe's error: ENODEV, ETIMEDOUT, EIO,
#                     ...), so a test checks why a probe failed without reading the log
#   pci_reset BDF     resets PCI function BDF (sysfs `reset`: for ordma's NIC, the PM
#                     capability's D3hot -> D0, which the NIC takes as a function reset); prints
#                     "ok" or the errno name the write failed with
bind_result() {
	python3 -c '
import errno, os, sys
fd = os.open("/sys/bus/pci/drivers/ordma/bind", os.O_WRONLY)
try:
    os.write(fd, sys.argv[1].encode())
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
' "$1"
}

pci_reset() {
	python3 -c '
import errno, os, sys
fd = os.open(f"/sys/bus/pci/devices/{sys.argv[1]}/reset", os.O_WRONLY)
try:
    os.write(fd, b"1")
    print("ok")
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
' "$1"
}
