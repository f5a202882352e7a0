"""What sysverbs' library calls return for the user running this (tests/test_unprivileged.py).

``python tests/unprivileged_probe.py JSON`` with ``{"call": ..., "sysfs": ..., "dev": ...}``
prints one JSON object.  The test runs it as uid 65534 from the staged copy
(tests/staging.py) and as root, on the same tree, and compares.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import sysverbs
from sysverbs import placement
from sysverbs.devices.attributes import device_attributes
from sysverbs.rank.environment import rank_environment


def _attributes(req: dict[str, Any]) -> dict[str, Any]:
    a = device_attributes(req["device"])
    return {"node_guid": a.node_guid, "sys_image_guid": a.sys_image_guid, "hw_rev": a.hw_rev,
            "fw_ver": a.fw_ver,
            "ports": [{"port": p.port, "state": None if p.state is None else p.state.name,
                       "gids": [str(g.gid) for g in p.gids]} for p in a.ports]}


def _diagnose(req: dict[str, Any]) -> dict[str, Any]:
    found = sysverbs.diagnose(source="sysfs", sysfs_path=req["sysfs"], dev_dir=req["dev"],
                              providers="builtin", rdma_core="44")
    return {d.name: {"usable": d.usable, "listed": d.listed,
                     "reasons": [r.code for r in d.reasons]} for d in found}


def _read_host(req: dict[str, Any]) -> dict[str, Any]:
    host = placement.read_host(sysfs_path=req["sysfs"], dev_dir=req["dev"])
    return {"gpus": {g.address: g.pci.numa_node for g in host.gpus},
            "nics": {n.name: None if n.address is None else host.pci[n.address].numa_node
                     for n in host.nics},
            "problems": list(host.problems)}


def _rank_environment(req: dict[str, Any]) -> dict[str, Any]:
    env = rank_environment(req["nics"], environ={}, sysfs_path=req["sysfs"],
                           dev_dir=req["dev"], list_options={"providers": "builtin"})
    return {"variables": {v.name: v.value for v in env.variables},
            "warnings": list(env.warnings)}


CALLS = {"attributes": _attributes, "diagnose": _diagnose, "read_host": _read_host,
         "rank_environment": _rank_environment}

if __name__ == "__main__":
    request = json.loads(sys.argv[1])
    try:
        out: dict[str, Any] = {"ok": CALLS[request["call"]](request)}
    except OSError as e:  # the documented errors of the API
        out = {"error": type(e).__name__, "errno": e.errno, "message": str(e)}
    print(json.dumps(out, sort_keys=True))
