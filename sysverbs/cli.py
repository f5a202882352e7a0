"""The ``sysverbs`` command: ``ibv_devices`` and ``ibv_devinfo -l`` without rdma-core.

    sysverbs devices                 # byte-identical to ibv_devices
    sysverbs devinfo -l              # byte-identical to ibv_devinfo -l
    sysverbs devices --fixture dgx-demo   # a bundled demo host instead of this one
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO, Optional

from . import api

__all__ = ["main"]


def _out() -> BinaryIO:
    return sys.stdout.buffer


def _perror(prefix: str, err: OSError) -> None:
    """C ``perror``: ``<prefix>: <strerror(errno)>``."""
    code = err.errno or 0
    sys.stderr.flush()
    sys.stderr.buffer.write(f"{prefix}: {os.strerror(code)}\n".encode())
    sys.stderr.buffer.flush()


@contextlib.contextmanager
def _options(args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    opts: dict[str, Any] = {
        "source": args.source,
        "sysfs_path": args.sysfs_path,
        "dev_dir": args.dev_dir,
        "config_dir": args.config_dir,
        "providers": args.providers,
        "rdma_core": args.rdma_core,
    }
    if args.fixture is None:
        yield opts
        return
    from .recording import fixture_path, materialize

    with tempfile.TemporaryDirectory(prefix="sysverbs-") as tmp:
        host = materialize(fixture_path(args.fixture), tmp)
        opts["sysfs_path"] = str(host.sysfs)
        opts["dev_dir"] = str(host.dev)
        if args.providers is None:
            opts["providers"] = "builtin"
        yield opts


def _devices(args: argparse.Namespace) -> int:
    with _options(args) as opts:
        try:
            devices = api.get_device_list(**opts)
        except OSError as e:
            _perror("Failed to get IB devices list", e)
            return 1
        out = _out()
        out.write(b"    %-16s\t   node GUID\n" % b"device")
        out.write(b"    %-16s\t----------------\n" % b"------")
        for dev in devices:
            guid = api.get_device_guid(dev)
            out.write(b"    %-16s\t%016x\n" % (os.fsencode(dev.name), guid))
        out.flush()
        api.free_device_list(devices)
    return 0


def _devinfo(args: argparse.Namespace) -> int:
    if not args.list:
        sys.stderr.write("sysverbs devinfo: only -l (list devices) is implemented\n")
        return 2
    with _options(args) as opts:
        try:
            devices = api.get_device_list(**opts)
        except OSError as e:
            _perror("Failed to get IB devices list", e)
            return 255
        out = _out()
        n = len(devices)
        out.write(b"%d HCA%s found:\n" % (n, b"" if n == 1 else b"s"))
        for dev in devices:
            out.write(b"\t%s\n" % os.fsencode(dev.name))
        out.write(b"\n")
        out.flush()
        api.free_device_list(devices)
    return 0


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--sysfs-path", help="sysfs root (default: $SYSFS_PATH or /sys)")
    common.add_argument("--dev-dir", help="uverbs device nodes (default: /dev/infiniband)")
    common.add_argument("--config-dir", help="provider config dir (default: /etc/libibverbs.d)")
    common.add_argument("--source", default="auto", choices=["auto", "sysfs"])
    common.add_argument("--providers", choices=["installed", "builtin"],
                        help="which providers count (default: installed if the config dir "
                        "exists, else builtin)")
    common.add_argument("--rdma-core", help="rdma-core release of the provider tables "
                        "(e.g. 44, latest; default: the installed one, else latest)")
    common.add_argument("--fixture", help="list a bundled fixture host (e.g. dgx-demo) "
                        "instead of this machine")
    p = argparse.ArgumentParser(
        prog="sysverbs",
        description="RDMA device discovery exactly as libibverbs does it, in pure Python.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("devices", parents=[common],
                       help="list devices and node GUIDs, exactly as ibv_devices")
    d.set_defaults(func=_devices)
    i = sub.add_parser("devinfo", parents=[common], help="ibv_devinfo; only -l for now")
    i.add_argument("-l", "--list", action="store_true",
                   help="print only the device names, exactly as ibv_devinfo -l")
    i.set_defaults(func=_devinfo)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        rc: int = args.func(args)
    except (ValueError, TypeError, KeyError) as e:
        sys.stderr.write(f"sysverbs: {e.args[0] if e.args else e}\n")
        return 2
    return rc


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
