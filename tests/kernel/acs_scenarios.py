"""The NUMA machine's ``acs`` scenario: ACS, IOMMU groups and links, with ``lspci -vvv``
and ``setpci`` (pciutils) as the oracle.

The machine (``numa_vm.py``) boots with a vIOMMU (``-device intel-iommu``,
``intel_iommu=on``): the kernel makes real ``iommu_group``\\ s, of type ``DMA-FQ``
(translated), and enables ACS on qemu's root ports, which have the capability; qemu
7.2's switch (``x3130-upstream``/``xio3130-downstream``) has none.  Root port 40:01.0
has ``x-speed=5,x-width=2``.  Recorded, for ``test_acs_lab.py``:

* ``lspci``: ``lspci -vvv`` of every function (its ``ACSCtl``, ``LnkCap``, ``LnkSta``);
* ``ours``: for every PCI function, what sysverbs decodes from its ``config`` (the
  ACS capability's presence and its control register as lspci's text);
* ``groups``: ``/sys/kernel/iommu_groups/N/{type,devices}``;
* ``doctor_root``/``doctor_nobody``: ``sysverbs doctor --json`` as root (reads the ACS
  bits) and as uid 65534 (``config`` ends at 64 bytes: the groups decide);
* ``metrics``/``nfd``: the same findings as a series and a label;
* ``setpci``: root port 40:01.0's ACS Control set to SrcValid only with ``setpci``, then
  ``lspci -vvv -s`` and sysverbs' decode again, and the old value put back.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

#: numa_scenarios' ``cmd``, ``sv`` and ``warm``, as the runner (``python -m``: its ``__main__``)
#: has them: the module imported again would have its own, unset, output directory.
Run = Callable[..., dict[str, Any]]

PORT = "0000:40:01.0"
#: SrcValid only: what setpci writes into PORT's ACS Control
WRITTEN = "0001"
NOBODY = 65534


def _decode() -> dict[str, Any]:
    from sysverbs.placement._acs import PCI_EXT_CAP_ID_ACS, acs_control, acs_text, ext_capability

    out: dict[str, Any] = {}
    base = "/sys/bus/pci/devices"
    for name in sorted(os.listdir(base)):
        with open(os.path.join(base, name, "config"), "rb") as f:
            config = f.read(4096)
        control = acs_control(config)
        has = ext_capability(config, PCI_EXT_CAP_ID_ACS) is not None
        out[name] = {"size": len(config), "acs": has,
                     "acs_ctl": acs_text(control) if has and control is not None else None}
    return out


def _groups() -> dict[str, Any]:
    base = "/sys/kernel/iommu_groups"
    out: dict[str, Any] = {}
    for g in sorted(os.listdir(base)):
        with open(os.path.join(base, g, "type")) as f:
            kind = f.read().strip()
        out[g] = {"type": kind, "devices": sorted(os.listdir(os.path.join(base, g, "devices")))}
    return out


def as_nobody(args: list[str]) -> dict[str, Any]:
    """``sysverbs ARGS`` in a fork that became uid/gid 65534 (the interpreter, in a
    directory only root may enter, could not be started as that user), its output
    through a pipe."""
    import sysverbs.cli

    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        code = 70
        try:
            os.close(read)
            os.dup2(write, 1)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            code = int(sysverbs.cli.main(list(args)) or 0)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except BaseException:  # noqa: BLE001 - reported on its stdout
            import traceback

            traceback.print_exc(file=sys.stdout)
            code = 71
        finally:
            sys.stdout.flush()
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        out = f.read()
    rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return {"args": args, "rc": rc, "stdout": out.decode("latin-1")}


def acs(cmd: Run, sv: Run, warm: Run) -> dict[str, Any]:
    """The scenario, with the runner's ``cmd``, ``sv`` and ``warm`` (doctor's modules
    imported by root first: uid 65534 cannot read the interpreter's own library)."""
    r: dict[str, Any] = {
        "lspci": cmd(["lspci", "-vvv", "-D"]),
        "ours": _decode(),
        "groups": _groups(),
        "cmdline": cmd(["cat", "/proc/cmdline"]),
        "port_link": cmd(["cat", *(f"/sys/bus/pci/devices/{PORT}/max_link_{n}"
                                   for n in ("speed", "width"))]),
        "doctor_root": warm(["doctor", "--json"]),
        "doctor_nobody": as_nobody(["doctor", "--json"]),
        "metrics": sv(["metrics"]),
        "nfd": sv(["nfd"]),
    }
    before = cmd(["setpci", "-s", PORT, "ECAP_ACS+6.w"])
    r["setpci"] = {
        "before": before,
        "write": cmd(["setpci", "-s", PORT, f"ECAP_ACS+6.w={WRITTEN}"]),
        "lspci": cmd(["lspci", "-vvv", "-D", "-s", PORT]),
        "ours": _decode()[PORT],
        "restore": cmd(["setpci", "-s", PORT, f"ECAP_ACS+6.w={before['stdout'].strip()}"]),
    }
    return r
