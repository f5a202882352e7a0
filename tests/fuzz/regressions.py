"""Every difference the differential fuzzer found, as a named, minimal case.

Each entry of :data:`REGRESSIONS` is run by ``tests/test_fuzz_differential.py``
(``test_regression[<name>]``) against the real libibverbs and must give identical
results.  :data:`EXPECT` holds a byte string the libibverbs run must print (so a
broken harness cannot pass the case vacuously).  When the fuzzer reports a new
difference, paste the printed ``Case(...)`` here under a descriptive name,
shrink it by hand if Hypothesis did not, and fix sysverbs.
"""

from __future__ import annotations

from typing import Any

from tests.fuzz.model import Case, Dir, Entry, Link

__all__ = ["REGRESSIONS", "EXPECT", "rxe_entries"]


def rxe_entries(n: int, name: str) -> dict[str, Entry]:
    """The files of one rxe device ``name`` with uverbs entry ``n`` (a tree fragment)."""
    base = f"sys/devices/d{n}"
    return {
        f"{base}/uv/ibdev": f"{name}\n".encode(),
        f"{base}/uv/dev": f"231:{n}\n".encode(),
        f"{base}/uv/abi_version": b"2\n",
        f"{base}/ib/node_type": b"1: CA\n",
        f"{base}/ib/node_guid": b"0002:c903:0000:%04x\n" % n,
        f"sys/class/infiniband_verbs/uverbs{n}": Link(f"../../devices/d{n}/uv"),
        f"sys/class/infiniband/{name}": Link(f"../../devices/d{n}/ib"),
        f"dev/infiniband/uverbs{n}": b"",
    }


def _add_steps(tree: dict[str, Entry]) -> list[dict[str, Any]]:
    """Probe steps that create ``tree``'s files, then its links."""
    steps: list[dict[str, Any]] = []
    for path, entry in tree.items():
        if isinstance(entry, bytes):
            steps.append({"op": "mkdir", "path": path.rsplit("/", 1)[0]})
            steps.append({"op": "write", "path": path, "data": entry.hex()})
    for path, entry in tree.items():
        if isinstance(entry, Link):
            steps.append({"op": "symlink", "path": path, "target": entry.target})
    return steps


_BASE: dict[str, Entry] = {
    "sys/class/infiniband_verbs": Dir(),
    "sys/class/infiniband": Dir(),
    "sys/class/infiniband_verbs/abi_version": b"6\n",
    **rxe_entries(0, "rxe0"),
}

REGRESSIONS: dict[str, Case] = {
    # drivers.py: a driver name whose "lib<name>-rdmav34.so" is longer than NAME_MAX.
    # glibc's library search stops at the first existing directory where open() fails
    # with anything but ENOENT/EACCES and dlerror() says "File name too long";
    # sysverbs said "No such file or directory".  (Found by the first 500 examples.)
    "driver_name_too_long_in_config": Case(
        tree=dict(_BASE),
        config={"rxe.driver": b"driver rxe\ndriver " + b"n" * 300 + b"\n"},
        env={"IBV_SHOW_WARNINGS": "1"},
    ),
    "driver_name_too_long_in_rdmav_drivers": Case(
        tree=dict(_BASE),
        config={"rxe.driver": b"driver rxe\n"},
        env={"RDMAV_DRIVERS": "n" * 300 + ":rxe"},
    ),
    # drivers.py: config files were split with bytes.splitlines(), which also ends a
    # line at "\r"; libibverbs reads them with getline(), which ends lines at "\n" only.
    # "driver rxe\r extra words" is driver "rxe\r" (not "rxe\r" plus a bad directive
    # 'extra'), and a lone "\r" stays inside the bad directive it is part of.
    "config_line_with_cr_inside": Case(
        tree=dict(_BASE),
        config={
            "rxe.driver": b"driver rxe\r extra words\n\x80\rfoo\ndriver rxe\n",
        },
        env={"IBV_SHOW_WARNINGS": "1"},
    ),
    # The fuzz probe (not sysverbs): a device is removed and its last list freed, so
    # libibverbs frees it; the next new device may get the same address from malloc
    # (whether it does depends on the heap: it did in a fork-server child with 50
    # devices), and the probe gave it the old device's label.  tests/fuzz/probe.py's
    # Labels now retires a label once its device is provably freed; the label logic
    # itself is tested by test_probe_labels_retire_freed_devices.
    "freed_device_address_reused_by_a_new_device": Case(
        tree={**_BASE, **rxe_entries(1, "rxe1")},
        steps=[
            {"op": "list"},
            {"op": "remove", "path": "dev/infiniband/uverbs1"},
            {"op": "free", "list": 0},
            *_add_steps(rxe_entries(2, "rxe2")),
            {"op": "list"},
            {"op": "free", "list": 1},
            {"op": "remove", "path": "sys/class/infiniband_verbs/uverbs2"},
            *_add_steps(rxe_entries(3, "rxe3")),
            {"op": "list"},
        ],
    ),
    # drivers.py: libibverbs stats every readdir entry of the config directory,
    # "." and ".." included; as a user who may read the directory but not search it
    # (mode 744) those stats fail too and each prints "couldn't stat config file".
    # os.listdir() leaves "." and ".." out, so sysverbs printed only the files' lines.
    "config_dir_readable_but_not_searchable": Case(
        tree=dict(_BASE),
        config={"rxe.driver": b"driver rxe\n", "mlx5.driver": b"driver mlx5\n"},
        modes={"etc/libibverbs.d": 0o744},
        user="nobody",
        env={"IBV_SHOW_WARNINGS": "1"},
    ),
    # The fuzz probe again, in the same call: the last list holding a device is freed,
    # then its ibdev is renamed, so the next call drops the device (freeing it) and
    # creates one for the new name, which got the freed address.  The probe now gives
    # labels by address only to devices a list holds, and by their fields otherwise.
    "ibdev_renamed_after_its_list_was_freed": Case(
        tree={
            **_BASE,
            **rxe_entries(1, "rxe1"),
            "sys/devices/d9/ib/node_type": b"7\n",
            "sys/class/infiniband/rxe9": Link("../../devices/d9/ib"),
        },
        steps=[
            {"op": "list"},
            {"op": "write", "path": "sys/devices/d1/uv/ibdev", "data": b"rxe9\n".hex()},
            {"op": "free", "list": 0},
            {"op": "list"},
            {"op": "list"},
        ],
    ),
    # device.py: open_device() built the device number with os.makedev(), which takes
    # C ints, so a dev file whose numbers are 2**31 or more ("-1:5" is 4294967295:5,
    # sscanf's %u wraps) raised OverflowError instead of failing like libibverbs
    # (not the char device it names: ENOENT).  Now glibc's makedev() formula.
    "open_with_device_numbers_over_int_max": Case(
        tree={
            **_BASE,
            **rxe_entries(1, "rxe1"),
            **rxe_entries(2, "rxe2"),
            "sys/devices/d0/uv/dev": b"-1:5\n",
            "sys/devices/d1/uv/dev": b"4294967295:4294967295\n",
            "sys/devices/d2/uv/dev": b"2147483648:1\n",
        },
        steps=[
            {"op": "list"},
            {"op": "open", "list": 0, "device": 0},
            {"op": "open", "list": 0, "device": 1},
            {"op": "open", "list": 0, "device": 2},
        ],
    ),
    # Not a sysverbs difference: with a dev file of 0:0 the char-device number is not
    # checked, and for a node that opens but is not a char device libibverbs returns
    # NULL without setting errno (whatever errno held before stays); sysverbs raises
    # ENOENT, as documented.  The probe reports that errno as null (unspecified) and
    # the comparison accepts any failure errno there; a directory still gives EISDIR.
    "open_with_dev_0_0_leaves_errno_unset": Case(
        tree={
            **_BASE,
            **rxe_entries(1, "rxe1"),
            "sys/devices/d0/uv/dev": b"0:0\n",
            "sys/devices/d1/uv/dev": b"0:0\n",
            "dev/infiniband/uverbs1": Dir(),
        },
        steps=[
            {"op": "list"},
            {"op": "open", "list": 0, "device": 0},
            {"op": "open", "list": 0, "device": 1},
        ],
    ),
}

EXPECT: dict[str, bytes] = {
    "open_with_dev_0_0_leaves_errno_unset": b'{"errno": null, "op": "open"}\n',
    "open_with_device_numbers_over_int_max": b'{"errno": 2, "op": "open"}\n' * 3,
    "config_dir_readable_but_not_searchable": (
        b"couldn't stat config file '/etc/libibverbs.d/.'.\n"
        b"libibverbs: Warning: couldn't stat config file '/etc/libibverbs.d/..'.\n"
    ),
    "config_line_with_cr_inside": b"ignoring bad config directive '\x80\rfoo'",
    "driver_name_too_long_in_config": b"cannot open shared object file: File name too long\n",
    "driver_name_too_long_in_rdmav_drivers": b"File name too long\n",
}
