"""The fuzz probe: run one plan with ONE implementation, in the current process.

    python -m tests.fuzz.probe libibverbs|sysverbs PLAN_FILE

It is :mod:`tests.oracle.probe` (the same ctypes binding of libibverbs, the same
report of every field) with two changes that make generated plans safe and
deterministic:

* a failed ``open`` whose errno libibverbs left unset reports ``"errno": null``
  (:func:`open_close`); the runner accepts any failure errno from sysverbs there;
* device labels follow identity with one canonical rule (:class:`Labels`):
  libibverbs' ``malloc`` may reuse a freed device's address for a new device;
* ``free`` and ``open`` name a list by its position among the successful
  ``list`` steps and a device by index modulo the list's length; a step that
  would be undefined behaviour in C (a list that does not exist or was already
  freed, an empty list) reports ``{"skipped": true}`` and does nothing;
* after a step that changes the tree, every mtime the kernel set to "now" is
  replaced by a fixed stamp for that step (``STEP_EPOCH + k``), so whether a
  device directory "changed" between two calls never depends on timing.
  ``touch`` sets ``STEP_EPOCH + k + seconds`` and ``utime`` copies an mtime.

The output is one JSON line per step on stdout; libibverbs' messages go to stderr.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any, Optional, Union

from tests.fuzz.model import STEP_EPOCH, normalize_mtimes
from tests.oracle.probe import Libibverbs, Sysverbs

Impl = Union[Libibverbs, Sysverbs]


def mutate(root: str, step: dict[str, Any], k: int) -> None:
    """Apply one tree change (paths relative to root; they may be any bytes)."""
    path = os.path.join(root, step["path"])
    op = step["op"]
    stamp = STEP_EPOCH + k
    if op == "write":
        with open(path, "wb") as f:
            f.write(bytes.fromhex(step["data"]))
    elif op == "remove":
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    elif op == "touch":
        t = (stamp + int(step.get("seconds", 1))) * 1_000_000_000
        os.utime(path, ns=(t, t))
        return
    elif op == "utime":
        st = os.stat(os.path.join(root, step["like"]))
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        return
    elif op == "chmod":
        os.chmod(path, int(step["mode"], 8))
        return
    elif op == "symlink":
        os.symlink(step["target"], path)
    elif op == "mkdir":
        os.makedirs(path, exist_ok=True)
    elif op == "rename":
        os.rename(path, os.path.join(root, step["to"]))
    elif op == "mknod":
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(step["major"], step["minor"]))
    else:
        raise SystemExit(f"unknown op {op!r}")
    normalize_mtimes(Path(root), stamp)


#: errno set before ibv_open_device(); still there afterwards means "not set".
UNSET = 9999


def open_close(impl: Impl, handle: Any, index: int) -> Optional[int]:
    """``ibv_open_device`` + close: 0, the errno, or None when libibverbs failed without
    setting errno (``dev`` 0:0 and a node that is not a char device: open_cdev()
    returns -1 after a successful open/fstat/close), where errno is unspecified."""
    if isinstance(impl, Sysverbs):
        return impl.open_close(handle, index)
    ctypes.set_errno(UNSET)
    ctx = impl.lib.ibv_open_device(handle[index])
    if ctx:
        impl.lib.ibv_close_device(ctx)
        return 0
    err = ctypes.get_errno()
    return None if err == UNSET else err


class Labels:
    """Device identity across calls as labels d0, d1, ...: the same label is the same
    ``struct ibv_device *`` (the same ``sysverbs.Device``), with one canonical rule.

    An address is an identity only while its device is alive.  A device that some
    unfreed list holds is alive, so it is matched by address (by ``id()`` for
    sysverbs): exact.  A device that no unfreed list holds may be freed by the very
    call that lists again (when it leaves the library's list), and ``malloc`` may give
    its address to a device created in that call; then "kept" and "re-created at the
    same address" look the same from outside (with all fields equal), so for such a
    device both implementations get the same canonical rule: it keeps its label when
    a device with exactly the same fields (name, paths, node type, GUID, ...) is
    listed, and any device with other fields gets a new label.  Labels of devices
    that are out of the library's list and held by no list are retired.
    """

    def __init__(self) -> None:
        self.by_ident: dict[int, str] = {}
        self.ident_of: dict[str, int] = {}
        self.holders: dict[str, set[int]] = {}
        self.fields: dict[str, str] = {}
        self.latest: set[str] = set()
        self.count = 0

    def listed(self, list_index: int, items: list[tuple[int, dict[str, Any]]]) -> list[str]:
        unheld = {self.fields[lb]: lb for lb in self.latest if not self.holders[lb]}
        out: list[str] = []
        for ident, fields in items:
            key = json.dumps(fields, sort_keys=True)
            label = self.by_ident.get(ident)
            if label is None or not self.holders[label]:
                label = unheld.pop(key, None)
            if label is None or label in out:
                label = f"d{self.count}"
                self.count += 1
                self.holders[label] = set()
            old = self.ident_of.get(label)
            if old is not None and old != ident and self.by_ident.get(old) == label:
                del self.by_ident[old]  # that address no longer names this label
            self.by_ident[ident] = label
            self.ident_of[label] = ident
            self.holders[label].add(list_index)
            self.fields[label] = key
            out.append(label)
        self.latest = set(out)
        self._retire()
        return out

    def freed(self, list_index: int) -> None:
        for held in self.holders.values():
            held.discard(list_index)
        self._retire()

    def _retire(self) -> None:
        for ident, label in list(self.by_ident.items()):
            if label not in self.latest and not self.holders[label]:
                del self.by_ident[ident]


def run(impl_name: str, plan: dict[str, Any]) -> None:
    """Run ``plan`` and print one JSON line per step."""
    root = plan["root"]
    impl: Impl
    impl = Libibverbs() if impl_name == "libibverbs" else Sysverbs(plan.get("options", {}))
    labels = Labels()
    lists: list[Any] = []
    sizes: list[int] = []
    freed: list[bool] = []
    for k, step in enumerate(plan["steps"]):
        op = step["op"]
        result: dict[str, Any] = {"op": op}
        if op == "list":
            got = impl.get_list()
            if isinstance(got, int):
                result["errno"] = got
            else:
                handle, devs = got
                lists.append(handle)
                sizes.append(len(devs))
                freed.append(False)
                ids = labels.listed(len(lists) - 1, devs)
                result["devices"] = [{"id": i, **fields} for i, (_, fields) in zip(ids, devs)]
        elif op in ("free", "open"):
            i = step["list"]
            if i >= len(lists) or freed[i] or (op == "open" and sizes[i] == 0):
                result["skipped"] = True
            elif op == "free":
                impl.free(lists[i])
                freed[i] = True
                labels.freed(i)
            else:
                result["errno"] = open_close(impl, lists[i], step["device"] % sizes[i])
        else:
            try:
                mutate(root, step, k)
            except OSError as e:  # the same failure happens in both copies
                result["failed"] = e.errno
        sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")
        sys.stdout.flush()


def main() -> None:
    impl_name, plan_file = sys.argv[1], sys.argv[2]
    with open(plan_file, encoding="utf-8") as f:
        plan = json.load(f)
    run(impl_name, plan)


if __name__ == "__main__":
    main()
