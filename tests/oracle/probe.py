"""Run a plan of device-list calls and tree changes with ONE implementation.

    python probe.py libibverbs|sysverbs PLAN_JSON

The same plan is run once with the real libibverbs (through ctypes) and once
with sysverbs, each in a fresh process; stdout (one JSON object per step) and
stderr (the library's messages) are then compared byte for byte.  Steps:

  {"op": "list"}                                   ibv_get_device_list + every accessor
  {"op": "free", "list": K}                        ibv_free_device_list of the K-th list
  {"op": "open", "list": K, "device": I}           ibv_open_device + close: 0 or errno
  {"op": "fork_init"} / {"op": "fork_status"}      ibv_fork_init / ibv_is_fork_initialized
  {"op": "write", "path": P, "data": HEX}          write a file (P relative to the root)
  {"op": "remove", "path": P}                      remove a file, link or tree
  {"op": "touch", "path": P, "seconds": S}         set mtime to now + S seconds
  {"op": "symlink", "path": P, "target": T}
  {"op": "mkdir", "path": P}
  {"op": "rename", "path": P, "to": Q}
  {"op": "utime", "path": P, "like": Q}            give P the mtime of Q (to the ns)
  {"op": "chmod", "path": P, "mode": "755"}

Device identity across calls is reported as labels (d0, d1, ...): the same label
means the same ``struct ibv_device *`` / the same ``sysverbs.Device`` object.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import stat
import sys
import time
from typing import Any


class IbvDevice(ctypes.Structure):
    _fields_ = [
        ("ops", ctypes.c_void_p * 2),
        ("node_type", ctypes.c_int),
        ("transport_type", ctypes.c_int),
        ("name", ctypes.c_char * 64),
        ("dev_name", ctypes.c_char * 64),
        ("dev_path", ctypes.c_char * 256),
        ("ibdev_path", ctypes.c_char * 256),
    ]


class Libibverbs:
    def __init__(self) -> None:
        lib = ctypes.CDLL("libibverbs.so.1", use_errno=True)
        lib.ibv_get_device_list.restype = ctypes.POINTER(ctypes.POINTER(IbvDevice))
        lib.ibv_get_device_list.argtypes = [ctypes.POINTER(ctypes.c_int)]
        lib.ibv_free_device_list.argtypes = [ctypes.POINTER(ctypes.POINTER(IbvDevice))]
        lib.ibv_get_device_guid.restype = ctypes.c_uint64
        lib.ibv_get_device_guid.argtypes = [ctypes.POINTER(IbvDevice)]
        lib.ibv_get_device_index.restype = ctypes.c_int
        lib.ibv_get_device_index.argtypes = [ctypes.POINTER(IbvDevice)]
        lib.ibv_get_device_name.restype = ctypes.c_char_p
        lib.ibv_get_device_name.argtypes = [ctypes.POINTER(IbvDevice)]
        lib.ibv_open_device.restype = ctypes.c_void_p
        lib.ibv_open_device.argtypes = [ctypes.POINTER(IbvDevice)]
        lib.ibv_close_device.argtypes = [ctypes.c_void_p]
        lib.ibv_fork_init.restype = ctypes.c_int
        lib.ibv_is_fork_initialized.restype = ctypes.c_int
        self.lib = lib

    def fork_init(self) -> int:
        return int(self.lib.ibv_fork_init())

    def fork_status(self) -> int:
        return int(self.lib.ibv_is_fork_initialized())

    def open_close(self, handle: Any, index: int) -> int:
        ctypes.set_errno(0)
        ctx = self.lib.ibv_open_device(handle[index])
        if not ctx:
            return ctypes.get_errno()
        self.lib.ibv_close_device(ctx)
        return 0

    def get_list(self) -> tuple[Any, list[tuple[int, dict[str, Any]]]] | int:
        num = ctypes.c_int(-1)
        ctypes.set_errno(0)
        arr = self.lib.ibv_get_device_list(ctypes.byref(num))
        if not arr:
            return ctypes.get_errno()
        out = []
        for i in range(num.value):
            p = arr[i]
            d = p.contents
            raw = self.lib.ibv_get_device_guid(p)
            guid = int.from_bytes(raw.to_bytes(8, sys.byteorder), "big")
            out.append(
                (
                    ctypes.cast(p, ctypes.c_void_p).value or 0,
                    {
                        "name": os.fsdecode(self.lib.ibv_get_device_name(p)),
                        "dev_name": os.fsdecode(d.dev_name),
                        "dev_path": os.fsdecode(d.dev_path),
                        "ibdev_path": os.fsdecode(d.ibdev_path),
                        "node_type": d.node_type,
                        "transport_type": d.transport_type,
                        "guid": f"{guid:016x}",
                        "index": self.lib.ibv_get_device_index(p),
                    },
                )
            )
        if arr[num.value]:
            raise SystemExit("libibverbs list not NULL-terminated at num")
        return arr, out

    def free(self, handle: Any) -> None:
        self.lib.ibv_free_device_list(handle)


class Sysverbs:
    def __init__(self, options: dict[str, Any]) -> None:
        import sysverbs

        self.sv = sysverbs
        self.options = options

    def get_list(self) -> tuple[Any, list[tuple[int, dict[str, Any]]]] | int:
        sv = self.sv
        try:
            devs = sv.get_device_list(**self.options)
        except OSError as e:
            return int(e.errno or 0)
        out = []
        for d in devs:
            out.append(
                (
                    id(d),
                    {
                        "name": sv.get_device_name(d),
                        "dev_name": d.dev_name,
                        "dev_path": d.dev_path,
                        "ibdev_path": d.ibdev_path,
                        "node_type": int(d.node_type),
                        "transport_type": int(d.transport_type),
                        "guid": f"{sv.get_device_guid(d):016x}",
                        "index": sv.get_device_index(d),
                    },
                )
            )
        return devs, out

    def free(self, handle: Any) -> None:
        self.sv.free_device_list(handle)

    def fork_init(self) -> int:
        try:
            return int(self.sv.fork_init())
        except OSError as e:
            return int(e.errno or 0)

    def fork_status(self) -> int:
        return int(self.sv.is_fork_initialized())

    def open_close(self, handle: Any, index: int) -> int:
        try:
            ctx = self.sv.open_device(handle[index])
        except OSError as e:
            return int(e.errno or 0)
        self.sv.close_device(ctx)
        return 0


def mutate(root: str, step: dict[str, Any]) -> None:
    path = os.path.join(root, step["path"])
    op = step["op"]
    if op == "write":
        with open(path, "wb") as f:
            f.write(bytes.fromhex(step["data"]))
    elif op == "remove":
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    elif op == "touch":
        t = time.time() + float(step.get("seconds", 1))
        os.utime(path, (t, t), follow_symlinks=True)
    elif op == "symlink":
        os.symlink(step["target"], path)
    elif op == "mkdir":
        os.makedirs(path, exist_ok=True)
    elif op == "utime":
        st = os.stat(os.path.join(root, step["like"]))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    elif op == "chmod":
        os.chmod(path, int(step["mode"], 8))
    elif op == "mknod":
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(step["major"], step["minor"]))
    elif op == "rename":
        os.rename(path, os.path.join(root, step["to"]))
    else:
        raise SystemExit(f"unknown op {op!r}")


def main() -> None:
    impl_name, plan_text = sys.argv[1], sys.argv[2]
    plan = json.loads(plan_text)
    root = plan.get("root", "")
    impl: Libibverbs | Sysverbs
    impl = Libibverbs() if impl_name == "libibverbs" else Sysverbs(plan.get("options", {}))
    labels: dict[int, str] = {}
    lists: list[Any] = []
    for step in plan["steps"]:
        op = step["op"]
        if op == "list":
            got = impl.get_list()
            if isinstance(got, int):
                result: dict[str, Any] = {"op": "list", "errno": got}
            else:
                handle, devs = got
                lists.append(handle)
                items = []
                for ident, fields in devs:
                    label = labels.setdefault(ident, f"d{len(labels)}")
                    items.append({"id": label, **fields})
                result = {"op": "list", "devices": items}
        elif op == "open":
            result = {"op": "open", "errno": impl.open_close(lists[step["list"]], step["device"])}
        elif op == "fork_init":
            result = {"op": op, "result": impl.fork_init()}
        elif op == "fork_status":
            result = {"op": op, "status": impl.fork_status()}
        elif op == "free":
            impl.free(lists[step["list"]])
            result = {"op": "free"}
        else:
            mutate(root, step)
            result = {"op": op}
        sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
