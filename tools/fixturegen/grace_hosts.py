"""The Grace fixture hosts (gpu-gb200-nvl72, gpu-gb300-nvl72, gpu-dgx-station-gb300,
gpu-gh200): the testing kit's Grace builders (sysverbs/testing/builder_grace.py) as
bundled recordings.  What each fact comes from, and every choice no source shows, is
in tests/data/PROVENANCE.md ("The Grace fixtures"); the builders' docstrings and
``choice:`` comments say the same per value."""

from __future__ import annotations

from sysverbs.testing.builder_grace import GRACE_HOSTS

from .builder import Fixture

#: Fixture name -> the builder's name in GRACE_HOSTS.
GRACE_FIXTURES = {
    "gpu-gb200-nvl72": "gb200-nvl72",
    "gpu-gb300-nvl72": "gb300-nvl72",
    "gpu-dgx-station-gb300": "dgx-station-gb300",
    "gpu-gh200": "gh200",
}


def grace_fixture(name: str) -> Fixture:
    """The fixture ``name`` of :data:`GRACE_FIXTURES`: its builder's host, recorded."""
    return Fixture(name, host=GRACE_HOSTS[GRACE_FIXTURES[name]]())


def fx_gpu_gb200_nvl72() -> Fixture:
    """GB200 NVL72 compute tray: 2 Grace, 4 GB200, CX-7 + BlueField-3 (NUMA-based)."""
    return grace_fixture("gpu-gb200-nvl72")


def fx_gpu_gb300_nvl72() -> Fixture:
    """GB300 NVL72 compute tray: 4 GB300, each with a CX-8 Data Direct DMA function."""
    return grace_fixture("gpu-gb300-nvl72")


def fx_gpu_dgx_station_gb300() -> Fixture:
    """DGX Station GB300: one GB300 and a dual-port CX-8 (Data Direct)."""
    return grace_fixture("gpu-dgx-station-gb300")


def fx_gpu_gh200() -> Fixture:
    """GH200: one Grace Hopper superchip and a dual-port CX-7 (NUMA-based)."""
    return grace_fixture("gpu-gh200")
