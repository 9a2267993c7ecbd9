# Sourced by guest tests that check pinned memory: pins prints the pages pinned now
# (FOLL_PIN, what ib_umem_get takes for MRs and rings: /proc/vmstat's acquired minus
# released). Other pins come and go (9p's zero-copy I/O pins user buffers for a moment),
# so checks allow SLACK pages.
pins() { awk '/^nr_foll_pin_acquired/ {a=$2} /^nr_foll_pin_released/ {r=$2} END {print a-r}' /proc/vmstat; }
SLACK=64
