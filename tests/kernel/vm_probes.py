"""Runs inside the kernel-lab VM: the sysverbs side of the ``hotplug`` and
``attributes`` scenarios (see ``scenarios.py``), each in a process of its own.

    python -m tests.kernel.vm_probes monitor udev|poll   # print the events, one JSON line each
    python -m tests.kernel.vm_probes sources             # the udev and sysfs source listings
    python -m tests.kernel.vm_probes attributes          # attributes, topology, diagnose (pickled)

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


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "monitor":
        monitor(sys.argv[2])
    elif what == "sources":
        sources()
    elif what == "attributes":
        attributes()
    else:
        raise SystemExit(f"unknown probe {what!r}")
