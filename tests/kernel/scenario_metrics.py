"""The ``metrics`` scenario: ``sysverbs metrics`` on a real kernel while rxe devices go.

Two rxe devices (rxe0 and rxe1, each on a dummy netdev of its own), then three runs of
``sysverbs metrics`` (the text exposition on stdout), the kernel's own list of devices
(``ls /sys/class/infiniband``) beside each:

* ``metrics:present``: both there;
* ``metrics:one_gone``: after ``rdma link delete rxe1``;
* ``metrics:all_gone``: after ``rdma link delete rxe0`` too.

Two devices, not more: each costs 0.7 to 1.5 s of a run under TCG (an rxe port has 1024
GID entries, a file each, and a snapshot reads each device's attributes three times).

``tests/kernel/test_metrics_lab.py`` serves the three outputs, in this order, to a real
Prometheus that has ``sysverbs/fleet/rules.yml`` loaded.  The scenario leaves no device
or netdev behind.

The VM's Python runs with ``-S`` on the staged code (:func:`tests.kernel.lab.stage_code`),
so the virtual environment's site-packages are not on its path: prometheus_client (pure
Python) is staged beside the code (:func:`stage_prometheus_client`).  The ``cli`` steps
are forks of the warm runner; a ``py`` step imports the exporter's modules in the runner
first, so that the three forks do not each import them again from the host's disk
(importing reads no option or environment: the lockstep scenarios' workers are
unaffected).
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any, Optional

from tests.kernel.scenarios import Step, cli, scenario, sh

#: The devices, and their netdevs, in the order they are made.
DEVICES = (("rxe0", "svm0"), ("rxe1", "svm1"))
#: The ``cli`` steps, in order, and the devices deleted just before each.
RUNS = (("metrics:present", ()), ("metrics:one_gone", ("rxe1",)),
        ("metrics:all_gone", ("rxe0",)))
#: The package the exporter needs beyond sysverbs.
PACKAGE = "prometheus_client"
#: What the warm-up step imports in the runner.
WARM = ("prometheus_client", "sysverbs.fleet.facts", "sysverbs.fleet.metrics",
        "sysverbs.cli.metrics")

LS = "ls /sys/class/infiniband"

SETUP = "set -e\n" + "".join(
    f"ip link add {net} type dummy\nip link set {net} up\n" for _, net in DEVICES
) + "".join(f"rdma link add {dev} type rxe netdev {net}\n" for dev, net in DEVICES) + LS + "\n"

TEARDOWN = "".join(f"ip link del {net}\n" for _, net in DEVICES)

#: A ``py`` step: import what ``sysverbs metrics`` imports; print each module's file
#: (or why it failed), so that the test can say why the VM could not run the exporter.
WARM_UP = f"""
import importlib
for name in {WARM!r}:
    try:
        print(name, getattr(importlib.import_module(name), '__file__', ''))
    except Exception as e:
        print(name, 'FAILED', type(e).__name__, e)
"""


def source_dir() -> Optional[Path]:
    """Where this machine's prometheus_client package is (None: not installed)."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def stage_prometheus_client(code: Path) -> Optional[Path]:
    """Copy prometheus_client into ``code``, the directory tests/staging.py stages the
    code into next (it compiles the copy and opens it to every user with the rest);
    returns the copy, or None when this machine has no prometheus_client (the scenario
    then records the ImportError)."""
    src = source_dir()
    if src is None:
        return None
    dest = code / PACKAGE
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def metrics_scenario() -> dict[str, Any]:
    steps: list[Step] = [sh(SETUP), {"op": "py", "code": WARM_UP}]
    for name, gone in RUNS:
        if gone:
            steps.append(sh("set -e\n" + "".join(f"rdma link delete {d}\n" for d in gone) + LS))
        steps.append(cli(name, ["metrics"]))
    steps.append(sh(TEARDOWN))
    return scenario("metrics", steps, {})
