"""A testing kit: fake RDMA hosts for your tests, built in code or recorded from a host.

Everything here produces or consumes :class:`sysverbs.testing.umockdev.Recording` objects,
umockdev's recording format, so one host description serves three ways: as a
``SYSFS_PATH`` tree on disk (:func:`materialize`, for sysverbs or for libibverbs
itself), as a umockdev testbed (``umockdev-run -d FILE``, where ``/sys`` and
``/dev`` are the host's for every library in the process, pyudev included) and as
a file to keep next to your tests.

* :class:`HostBuilder`: hosts in code: ``HostBuilder().mlx5(vfs=8).efa().rxe()``,
  with the ABI, node type, missing ``/dev`` nodes and raw attribute bytes of your
  choice;
* :func:`load_fixture`, :func:`fixture_names`: the bundled realistic hosts;
* :func:`materialize`: any of those (or a recording file) into a directory, giving a
  :class:`FakeHost` whose :meth:`FakeHost.get_device_list` lists it, with any
  :class:`TreeEntry` (a path no device record holds: a broken host) written after;
* :func:`record_host`: a live host (or any sysfs tree) into the same format,
  bounded in size and never following a link out of sysfs;
* ``sysverbs.testing.plugin``: the same as pytest fixtures (``rdma_host``,
  ``rdma_fixture``, ``rdma_builder``);
* :mod:`sysverbs.testing.cache`: the bundled fixtures unpacked once per user and
  checked at each use (what ``--fixture`` needs: a tree in milliseconds).

The names below are imported when first used (``import sysverbs.testing.cache``
must not pay for the host builder).

See ``docs/testing-kit.md`` for examples.
"""

from __future__ import annotations

from ..ground.errors import RecordLimitError

#: The public names by the module that defines them (relative to this package).
_API: dict[str, tuple[str, ...]] = {
    "builder": ("HostBuilder", "FakeDevice", "MLX5_MODELS", "GPU_MODELS", "GpuModel"),
    "host": ("FakeHost", "Source", "as_recording", "fixture_names", "fixture_path",
             "load_fixture", "materialize"),
    "recorder": ("Limits", "record_host"),
    "umockdev": ("TreeEntry",),
}

TYPE_CHECKING = False
if TYPE_CHECKING:  # the same names, for type checkers
    from typing import Any

    from .builder import GPU_MODELS, MLX5_MODELS, FakeDevice, GpuModel, HostBuilder
    from .host import (
        FakeHost,
        Source,
        as_recording,
        fixture_names,
        fixture_path,
        load_fixture,
        materialize,
    )
    from .recorder import Limits, record_host
    from .umockdev import TreeEntry

__all__ = [
    "HostBuilder",
    "FakeDevice",
    "FakeHost",
    "Limits",
    "RecordLimitError",
    "MLX5_MODELS",
    "GPU_MODELS",
    "GpuModel",
    "fixture_names",
    "fixture_path",
    "load_fixture",
    "materialize",
    "TreeEntry",
    "as_recording",
    "Source",
    "record_host",
]
_MODULE_OF = {name: module for module, names in _API.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    mod = __import__(f"{__name__}.{module}", None, None, ("_",), 0)
    for each in _API[module]:
        globals()[each] = getattr(mod, each)
    return globals()[name]


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
