"""Runs inside the kernel-lab VM: the sysverbs side of the ``hotplug`` and
``attributes`` scenarios (see ``scenarios.py``), each in a process of its own.

    python -m tests.kernel.vm_probes monitor udev|poll   # print the events, one JSON line each
    python -m tests.kernel.vm_probes sources             # the udev and sysfs source listings
    python -m tests.kernel.vm_probes attributes          # attributes, topology, diagnose (pickled)
    python -m tests.kernel.vm_probes data_direct         # the Data Direct ioctl's answers (JSON)

``monitor`` and ``sources`` need pyudev: run them with the virtual environment's
Python (without ``-S``).  ``monitor`` creates ``/run/sv/ready-<kind>`` once it
listens and stops after the removal of ``rxefoo`` (or after 120 s).
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import sys


def monitor(kind: str) -> None:
    from sysverbs.devices.monitor import monitor

    if kind == "udev":
        mon = monitor(timeout=120, actions=None)
    else:
        mon = monitor(timeout=120, backend="poll", poll_interval=0.1)
    print(json.dumps({"backend": mon.backend, "reason": mon.reason}), flush=True)
    open("/run/sv/ready-" + kind, "w").close()
    for e in mon:
        print(
            json.dumps(
                [
                    e.action,
                    e.subsystem,
                    e.name,
                    e.ibdev,
                    e.seqnum > 0,
                    e.properties.get("DEVPATH_OLD", "").rsplit("/", 1)[-1],
                ]
            ),
            flush=True,
        )
        if (e.action, e.subsystem, e.name) == ("remove", "infiniband", "rxefoo"):
            break


def sources() -> None:
    import sysverbs

    def listing(source: str) -> list[tuple[object, ...]]:
        devs = sysverbs.get_device_list(source=source, providers="builtin")
        return [
            (
                d.name,
                d.dev_name,
                d.dev_path,
                d.ibdev_path,
                int(d.node_type),
                d.provider,
                sysverbs.get_device_guid(d),
            )
            for d in devs
        ]

    print(json.dumps({"udev": listing("udev"), "sysfs": listing("sysfs")}))


def attributes() -> None:
    import sysverbs
    from sysverbs.devices.attributes import device_attributes
    from sysverbs.devices.diagnosis import diagnose
    from sysverbs.devices.location import device_location

    names = sorted(os.listdir("/sys/class/infiniband"))
    found = diagnose()
    data = {
        "attributes": {n: device_attributes(n) for n in names},
        "topology": {n: device_location(n) for n in names},
        "diagnose": (list(found), found.host),
        "indexes": {d.name: sysverbs.get_device_index(d) for d in sysverbs.get_device_list()},
    }
    sys.stdout.write(base64.b64encode(pickle.dumps(data)).decode() + "\n")


def data_direct() -> None:
    """The Data Direct ioctl on every RDMA device, sent as for an mlx5 device (what
    sysverbs sends) and as for its own driver (rxe, siw): {device: {"mlx5"|"own":
    "path:<answer>" or "ERRNO: text"}}."""
    import errno

    from sysverbs.devices.datadirect import IDS, data_direct_path, uverbs_device

    out: dict[str, dict[str, str]] = {}
    for name in sorted(os.listdir("/sys/class/infiniband")):
        node = "/dev/infiniband/" + uverbs_device("/sys", name)
        own = IDS["RDMA_DRIVER_SIW"] if name.startswith("siw") else IDS["RDMA_DRIVER_RXE"]
        for variant, driver in (("mlx5", IDS["RDMA_DRIVER_MLX5"]), ("own", own)):
            try:
                got = "path:" + data_direct_path(node, driver)
            except OSError as e:
                got = f"{errno.errorcode.get(e.errno or 0, e.errno)}: {e.strerror}"
            out.setdefault(name, {})[variant] = got
    print(json.dumps(out))


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "monitor":
        monitor(sys.argv[2])
    elif what == "sources":
        sources()
    elif what == "attributes":
        attributes()
    elif what == "data_direct":
        data_direct()
    else:
        raise SystemExit(f"unknown probe {what!r}")
