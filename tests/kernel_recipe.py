"""The kernel-lab recipe script used by the VM tests outside tests/kernel/.

``$SV_KERNEL_LAB`` names the script; by default it is the copy of shared/ that lies
beside the checkout (``<repo>/../shared/kernel-lab/run-in-vm.sh``), as in CI.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
RUN_IN_VM = Path(
    os.environ.get("SV_KERNEL_LAB", str(REPO.parent / "shared/kernel-lab/run-in-vm.sh"))
)


def vm_reason() -> Optional[str]:
    """Why the recipe VM cannot start here (None when it can)."""
    if not RUN_IN_VM.is_file():
        return f"{RUN_IN_VM} is missing"
    if os.geteuid() != 0:
        return "the kernel lab needs root"
    if shutil.which("qemu-system-x86_64") is None:
        return "qemu-system-x86_64 is not installed (apt-get install qemu-system-x86)"
    if not any(Path("/boot").glob("vmlinuz-*")):
        return "no kernel image in /boot (apt-get install linux-image-amd64)"
    if shutil.which("busybox") is None and not Path("/bin/busybox").exists():
        return "busybox is not installed (apt-get install busybox-static)"
    return None
