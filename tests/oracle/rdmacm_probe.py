"""Run a plan of rdma_get_devices/rdma_free_devices calls and tree changes with ONE
implementation: the real librdmacm (through ctypes) or sysverbs.devices.rdmacm.

    python rdmacm_probe.py librdmacm|sysverbs PLAN_JSON

Steps (one JSON object per step on stdout):

  {"op": "rdma_get"}                 rdma_get_devices: errno, or the contexts in order
  {"op": "rdma_free", "list": K}     rdma_free_devices of the K-th returned list
  {"op": "ibv_list"}                 ibv_get_device_list (names only), then freed
  any mutation step of tests/oracle/probe.py (write, remove, touch, mknod, ...)

Contexts and devices are reported as labels (c0, c1... / d0, d1...): the same label
means the same ``struct ibv_context *`` / ``struct ibv_device *`` (the same
``sysverbs.Context`` / ``sysverbs.Device`` object).
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tests.oracle.probe import IbvDevice, mutate  # noqa: E402


class Librdmacm:
    def __init__(self) -> None:
        ibv = ctypes.CDLL("libibverbs.so.1", use_errno=True)
        ibv.ibv_get_device_guid.restype = ctypes.c_uint64
        ibv.ibv_get_device_guid.argtypes = [ctypes.POINTER(IbvDevice)]
        ibv.ibv_get_device_list.restype = ctypes.POINTER(ctypes.POINTER(IbvDevice))
        ibv.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
        ibv.ibv_free_device_list.argtypes = [ctypes.POINTER(ctypes.POINTER(IbvDevice))]
        cm = ctypes.CDLL("librdmacm.so.1", use_errno=True)
        cm.rdma_get_devices.restype = ctypes.POINTER(ctypes.c_void_p)
        cm.rdma_get_devices.argtypes = [ctypes.POINTER(ctypes.c_int)]
        cm.rdma_free_devices.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        self.ibv = ibv
        self.cm = cm

    def get(self) -> tuple[Any, list[tuple[int, int, str, int]]] | int:
        num = ctypes.c_int(-1)
        ctypes.set_errno(0)
        arr = self.cm.rdma_get_devices(ctypes.byref(num))
        if not arr:
            if num.value != 0:
                raise SystemExit("rdma_get_devices: NULL but *num != 0")
            return ctypes.get_errno()
        out = []
        for i in range(num.value):
            ctx = int(arr[i] or 0)
            devp = ctypes.cast(ctx, ctypes.POINTER(ctypes.POINTER(IbvDevice)))[0]
            raw = self.ibv.ibv_get_device_guid(devp)
            guid = int.from_bytes(raw.to_bytes(8, sys.byteorder), "big")
            addr = ctypes.cast(devp, ctypes.c_void_p).value or 0
            out.append((ctx, addr, os.fsdecode(devp.contents.name), guid))
        if arr[num.value]:
            raise SystemExit("rdma_get_devices list not NULL-terminated at num")
        return arr, out

    def free(self, handle: Any) -> None:
        self.cm.rdma_free_devices(handle)

    def ibv_names(self) -> list[str] | int:
        num = ctypes.c_int(-1)
        arr = self.ibv.ibv_get_device_list(ctypes.byref(num))
        if not arr:
            return ctypes.get_errno()
        names = [os.fsdecode(arr[i].contents.name) for i in range(num.value)]
        self.ibv.ibv_free_device_list(arr)
        return names


class Sysverbs:
    def __init__(self, options: dict[str, Any]) -> None:
        import sysverbs
        from sysverbs.devices import rdmacm

        self.sv = sysverbs
        self.cm = rdmacm
        self.options = options

    def get(self) -> tuple[Any, list[tuple[int, int, str, int]]] | int:
        try:
            contexts = self.cm.rdma_get_devices(**self.options)
        except OSError as e:
            return int(e.errno or 0)
        out = []
        for ctx in contexts:
            dev = ctx.device
            out.append((id(ctx), id(dev), dev.name, self.sv.get_device_guid(dev)))
        return contexts, out

    def free(self, handle: Any) -> None:
        self.cm.rdma_free_devices(handle)

    def ibv_names(self) -> list[str] | int:
        try:
            devs = self.sv.get_device_list(**self.options)
        except OSError as e:
            return int(e.errno or 0)
        names = [d.name for d in devs]
        self.sv.free_device_list(devs)
        return names


def main() -> None:
    impl_name, plan_text = sys.argv[1], sys.argv[2]
    plan = json.loads(plan_text)
    root = plan.get("root", "")
    impl: Librdmacm | Sysverbs
    impl = Librdmacm() if impl_name == "librdmacm" else Sysverbs(plan.get("options", {}))
    ctx_labels: dict[int, str] = {}
    dev_labels: dict[int, str] = {}
    lists: list[Any] = []
    for step in plan["steps"]:
        op = step["op"]
        result: dict[str, Any] = {"op": op}
        if op == "rdma_get":
            got = impl.get()
            if isinstance(got, int):
                result["errno"] = got
            else:
                handle, items = got
                lists.append(handle)
                result["contexts"] = [
                    {
                        "ctx": ctx_labels.setdefault(ctx, f"c{len(ctx_labels)}"),
                        "dev": dev_labels.setdefault(addr, f"d{len(dev_labels)}"),
                        "name": name,
                        "guid": f"{guid:016x}",
                    }
                    for ctx, addr, name, guid in items
                ]
        elif op == "rdma_free":
            impl.free(lists[step["list"]])
        elif op == "ibv_list":
            names = impl.ibv_names()
            result["result"] = names
        else:
            mutate(root, step)
        sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
