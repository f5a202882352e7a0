"""sysverbs.diagnose(): consistency with the device list, its output and ``sysverbs
doctor``."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

import sysverbs
from sysverbs import testing
from sysverbs.devices.diagnosis import DiagnosisList, diagnose
from tests import listing_hosts, trees
from tests.diagnose_runs import diagnose_module

# -- consistency, output, state --------------------------------------------------------------


@pytest.mark.parametrize("name", testing.fixture_names())
@pytest.mark.parametrize("providers", ["builtin", "installed"])
def test_listed_is_what_get_device_list_returns(ftmp: Path, name: str, providers: str) -> None:
    host = listing_hosts.materialize(name, ftmp)
    opts: dict[str, Any] = {
        "sysfs_path": host.sysfs,
        "dev_dir": host.dev,
        "providers": providers,
        "rdma_core": "44",
    }
    found = diagnose(**opts)
    devs = sysverbs.get_device_list(**opts)
    try:
        assert sorted(d.name for d in found if d.listed) == sorted(d.name for d in devs)
        assert {d.name: d.provider for d in found if d.listed} == {d.name: d.provider for d in devs}
    finally:
        sysverbs.free_device_list(devs)
    kernel = (
        sorted(os.listdir(host.sysfs / "class/infiniband"))
        if (host.sysfs / "class/infiniband").is_dir()
        else []
    )
    assert sorted(d.name for d in found) == kernel  # one entry per device the kernel shows


def test_diagnose_is_silent(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    trees.build(
        tmp_path,
        trees.host(
            trees.rdma_dev("uverbs0", "mlx5_0", abi="0\n"),
            trees.rdma_dev("uverbs1", "usnic_0", modalias="pci:v00001137d00000043sv0\n"),
            extra={"sys/class/infiniband_verbs/abi_version": "9\n"},
        ),
    )
    os.environ["IBV_SHOW_WARNINGS"] = "1"
    try:
        diagnose(sysfs_path=tmp_path / "sys", dev_dir=tmp_path / "dev/infiniband")
    finally:
        del os.environ["IBV_SHOW_WARNINGS"]
    assert capfd.readouterr().err == ""


def test_report_and_str(tmp_path: Path) -> None:
    host = testing.materialize(testing.fixture_path("smi"), tmp_path)
    found = diagnose(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin")
    text = found.report()
    assert "smi1: management device, no verbs" in text and "[management_device]" in text
    assert "mlx5_0: listed, not usable (provider mlx5, uverbs0)" in text
    assert found[0].errors and str(found[0].errors[0]).startswith("error: ")
    assert DiagnosisList([], ()).report() == "no RDMA device"


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """``sysverbs doctor`` is the command line of diagnose()."""
    from sysverbs.cli import main

    assert main(["doctor", "--fixture", "rxe", "--json", "--no-open"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "sysverbs.doctor/1" and doc["usable"] is True
    assert [d["name"] for d in doc["devices"]] == ["rxe0", "rxe1"]
    assert doc["devices"][0]["reasons"] == []
    assert doc["devices"][0]["node"] == {"path": "/dev/infiniband/uverbs0", "kind": "char",
                                         "major": 231, "minor": 192, "stand_in": True}
    assert [r["code"] for r in doc["host"]] == ["recorded_host"]
    assert main(["doctor", "--fixture", "usnic"]) == 1
    assert "usnic_0: MISSING" in capsys.readouterr().out
    assert main(["doctor", "--fixture", "nosuch"]) == 2
    assert not hasattr(diagnose_module, "main")  # one command line: the CLI's


def _uverbs_numbers(sysfs: Path, uverbs: str) -> tuple[int, int]:
    major, minor = (sysfs / "class/infiniband_verbs" / uverbs / "dev").read_text().split(":")
    return int(major), int(minor)


def test_doctor_on_the_readme_demo_fixture(
        capsys: pytest.CaptureFixture[str], fast_fixture_tmp: None) -> None:
    """``doctor --fixture dgx-demo`` (the README's demo host): every device the recording
    has is usable there, so exit 0; each line shows the recorded node, with the
    numbers of the fixture's own sysfs ``dev`` files, and no advice for this machine.
    Failed before: 19 devices "listed, not usable ... is not a character device ...
    bind-mount the host's /dev/infiniband", exit 1."""
    from sysverbs.cli import main

    assert main(["doctor", "--fixture", "dgx-demo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    host = testing.materialize(testing.fixture_path("dgx-demo"), tempfile.mkdtemp())
    try:
        kernel = sorted(os.listdir(host.sysfs / "class/infiniband"))
        verbs = host.sysfs / "class/infiniband_verbs"
        entries = {(verbs / e / "ibdev").read_text().strip(): e
                   for e in os.listdir(verbs) if e.startswith("uverbs")}
        devices = [x for x in lines if not x.startswith("host: ")]
        assert len(devices) == len(kernel) == len(entries) == 19
        for line in devices:
            name = line.split(":", 1)[0]
            entry = entries[name]
            major, minor = _uverbs_numbers(host.sysfs, entry)
            assert line.startswith(f"{name}: usable (provider "), line
            assert f", {entry}: recorded char device {major}:{minor})" in line, line
        assert lines[0].startswith("host: note: A recorded host, not this machine")
        assert "[recorded_host]" in lines[0]
        text = "\n".join(lines)
        for live_only in ("bind-mount", "not a character device", "modprobe rdma_ucm",
                          "ulimit", tempfile.gettempdir() + "/"):
            assert live_only not in text
        # The same tree given as --sysfs-path/--dev-dir is not a recording: a plain file
        # at /dev/infiniband/uverbsN stays the error it is, with the live host's fix.
        assert main(["doctor", "--sysfs-path", str(host.sysfs), "--dev-dir", str(host.dev),
                     "--providers", "builtin", "--no-open"]) == 1
        out = capsys.readouterr().out
        assert out.count("listed, not usable") == 19 and "recorded" not in out
        assert out.count("bind-mount the host's /dev/infiniband") == 19
    finally:
        shutil.rmtree(host.root, ignore_errors=True)
