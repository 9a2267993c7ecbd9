#!/bin/bash
# Print where the cached test kernel for this checkout lives (built or not).
source "$(dirname "$0")/lib.sh"
kernel_dir
