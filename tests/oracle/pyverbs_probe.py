"""The real pyverbs and sysverbs.compat.pyverbs, one after the other in ONE process.

    /usr/bin/python3 pyverbs_probe.py [--layout]

Run in a private mount namespace with ``SYSFS_PATH`` set and the tree's
``dev/infiniband`` on ``/dev/infiniband`` (tests/oracle/harness.py: run_in_ns).  For
each implementation (``pyverbs``: rdma-core's bindings over the real libibverbs and
librdmacm; ``sysverbs``: ``sysverbs.compat.pyverbs``), with no arguments, as a
pyverbs program calls them: ``device.get_device_list()``, ``device.rdma_get_devices()``
and ``fork.is_fork_initialized()``, each with what it wrote on file descriptor 2.  The
two implementations keep separate process-wide state (libibverbs' and sysverbs'), so
one process can hold both.  ``--layout`` adds the modules' names and the pure helpers.
Prints one JSON object: ``{"pyverbs": {...}, "sysverbs": {...}}``.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

PACKAGES = {"pyverbs": "pyverbs", "sysverbs": "sysverbs.compat.pyverbs"}
ERRORS = ("PyverbsError", "PyverbsRDMAError", "PyverbsUserError")

_libc = ctypes.CDLL(None)
_libc.__errno_location.restype = ctypes.POINTER(ctypes.c_int)


def _exception(e: BaseException, errors: Any, c_errno: Optional[int] = None) -> dict[str, Any]:
    """What a caller can see of ``e``; with ``c_errno`` (a call's exception), ``errno``:
    the sysverbs exception's, or for pyverbs (whose get_device_list() drops it) the C
    errno libibverbs left."""
    out: dict[str, Any] = {
        "type": type(e).__name__,
        "str": str(e),
        "args": [str(a) for a in e.args],
        "error_code": getattr(e, "error_code", None),
        "is": [n for n in ERRORS if isinstance(e, getattr(errors, n))],
    }
    if c_errno is not None:
        ours = not type(e).__module__.startswith("pyverbs")
        out["errno"] = getattr(e, "errno", None) if ours else c_errno
    return out


def _call(fn: Callable[[], Any], errors: Any) -> tuple[Any, str]:
    """``fn()``'s value (or its exception) and what was written on fd 2 meanwhile."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            try:
                value: Any = fn()
            except Exception as e:
                c_errno = _libc.__errno_location()[0]  # first: nothing may reset it
                value = {"error": _exception(e, errors, c_errno)}
            sys.stderr.flush()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        err = f.read().decode("utf-8", "backslashreplace")
    return value, err


def _value(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as e:
        return {"raises": type(e).__name__, "str": str(e)}


def _device(dev: Any) -> dict[str, Any]:
    def set_name() -> str:
        dev.name = b"other"
        return "set"

    return {
        "class": type(dev).__name__,
        "name": dev.name.hex(), "name_type": type(dev.name).__name__,
        "guid": dev.guid, "guid_type": type(dev.guid).__name__,
        "node_type": dev.node_type, "node_type_type": type(dev.node_type).__name__,
        "transport_type": dev.transport_type,
        "transport_type_type": type(dev.transport_type).__name__,
        "index": dev.index,
        "str": _value(lambda: str(dev)),
        "repr": re.sub(r"0x[0-9a-f]+", "ADDR", repr(dev)).replace(type(dev).__module__, "MOD"),
        "set_name": _value(set_name),
    }


def _devices(value: Any) -> Any:
    return [_device(d) for d in value] if isinstance(value, list) else value


def _names(module: Any) -> list[str]:
    return sorted(n for n in dir(module) if not n.startswith("_")
                  and not isinstance(getattr(module, n), type(os)))


def _kind(package: str, module: str, name: str = "") -> str:
    """provided, out_of_scope (sysverbs' OutOfScopeError) or missing."""
    try:
        mod = importlib.import_module(f"{package}.{module}")
        if name:
            getattr(mod, name)
    except ImportError as e:
        return "out_of_scope" if type(e).__name__ == "OutOfScopeError" else "missing"
    except AttributeError:
        return "missing"
    return "provided"


def _real_modules() -> list[str]:
    """Every module of the installed pyverbs, as dotted names below the package."""
    import pyverbs

    root = Path(list(pyverbs.__path__)[0])
    out = set()
    for path in root.rglob("*"):
        if path.suffix in (".py", ".so") and path.name != "__init__.py":
            rel = path.relative_to(root).with_suffix("")
            out.add(".".join(rel.parts).split(".cpython-")[0])
    return sorted(out)


def _facts() -> dict[str, Any]:
    """The installed pyverbs' modules and the public names of those sysverbs answers."""
    names = {m: _names(importlib.import_module(f"pyverbs.{m}"))
             for m in ("device", "pyverbs_error", "enums", "fork")}
    return {"modules": _real_modules(), "names": names, "enum_names": names["enums"]}


def _layout(impl: str, package: str, facts: dict[str, Any]) -> dict[str, Any]:
    device = importlib.import_module(f"{package}.device")
    errors = importlib.import_module(f"{package}.pyverbs_error")
    enums = importlib.import_module(f"{package}.enums")
    fork = importlib.import_module(f"{package}.fork")
    numbers = [-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 99, 2**31]
    out: dict[str, Any] = {
        "node_types": [device.translate_node_type(n) for n in numbers],
        "transport_types": [device.translate_transport_type(n) for n in numbers],
        "guids": [device.guid_to_hex(g) for g in (0, 1, 0x10e00001c88150, 2**64 - 1)],
        "enums": {c: [(m.name, int(m), type(m).__mro__[1].__name__)
                      for m in getattr(enums, c)]
                  for c in ("ibv_node_type", "ibv_transport_type", "ibv_fork_status")},
        "enum_constants": {n: int(getattr(enums, n)) for n in facts["enum_names"]
                           if n.startswith(("IBV_NODE_", "IBV_TRANSPORT_", "IBV_FORK_"))},
        "made": [_exception(e, errors) for e in (
            errors.PyverbsError("m"), errors.PyverbsError("m", 5),
            errors.PyverbsRDMAError("m"), errors.PyverbsRDMAError("m", 19),
            errors.PyverbsUserError("m"))],
        "device": _device(device.Device(b"mlx4_0", 4749890261909840, 1, 0, -1)),
        "fork": [fork.is_fork_initialized(), _value(fork.fork_init),
                 fork.is_fork_initialized()],
        "fork_type": type(fork.is_fork_initialized()).__name__,
    }
    out["modules"] = {m: _kind(package, m) for m in facts["modules"]}
    out["names"] = {m: {n: _kind(package, m, n) for n in names}
                    for m, names in facts["names"].items()}
    return out


def run(impl: str, facts: dict[str, Any]) -> dict[str, Any]:
    package = PACKAGES[impl]
    device = importlib.import_module(f"{package}.device")
    errors = importlib.import_module(f"{package}.pyverbs_error")
    fork = importlib.import_module(f"{package}.fork")
    out: dict[str, Any] = {}
    value, out["list_stderr"] = _call(device.get_device_list, errors)
    out["list"] = _devices(value)
    value, out["rdma_stderr"] = _call(device.rdma_get_devices, errors)
    out["rdma"] = _devices(value)
    out["fork"] = fork.is_fork_initialized()
    if facts:
        out["layout"] = _layout(impl, package, facts)
    return out


def main() -> None:
    facts = _facts() if "--layout" in sys.argv[1:] else {}
    results = {impl: run(impl, facts) for impl in PACKAGES}
    if facts:
        results["facts"] = facts
    print(json.dumps(results))


if __name__ == "__main__":
    main()
