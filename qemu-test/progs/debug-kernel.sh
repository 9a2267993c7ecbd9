# Sourced by guest tests that do less on the debug test kernel (KASAN, lockdep, kmemleak;
# scripts/kernel-debug.config), where the kernel paths are what is being checked and
# user-space work (the provider's fast path, perftest) is only slower.
#
# debug_kernel: true on the debug kernel (the only one with kmemleak). Not from dmesg: a
# batch clears the kernel's log before each test.
debug_kernel() { [ -e /sys/kernel/debug/kmemleak ]; }
