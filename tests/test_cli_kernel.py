"""The ``sysverbs`` command against the real tools under a real kernel: the kernel lab VM
(../shared/kernel-lab/run-in-vm.sh beside the checkout), ONE boot for every check here.

Two rxe devices (rxe0 on dummy0, rxe1 on a veth with an IPv4 address, so its GID table
has an IPv4-mapped RoCE v2 GID).  libibverbs in the VM uses RDMA netlink, and so does
``sysverbs`` with the default ``--source auto``; ``--source sysfs`` is checked too.

* ``devices`` and ``devinfo -l``: stdout, stderr and exit status identical to
  ``ibv_devices`` / ``ibv_devinfo -l``, with both sources;
* ``devinfo``, ``devinfo -v``, ``-d``/``-i``: every line is identical to
  ``ibv_devinfo``'s except the lines docs/cli.md lists as only a device query knowing,
  which keep their label and say ``(unavailable)``; the error paths (``-d`` unknown,
  ``-i`` past the last port, ``-i 0``) are byte-identical;
* ``netdev``: the netdev of each port is the one ``rdma link`` shows;
* ``doctor``: both devices usable, exit 0; ``snapshot``: the snapshot materialized
  outside the VM lists the same devices.

Skipped when the VM cannot start (no qemu, no kernel image, not root), except under
``CI=true``, where that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from sysverbs.cli_devinfo import QUERY_ONLY_DEVICE, QUERY_ONLY_PORT, UNAVAILABLE
from tests.conftest import require
from tests.kernel_recipe import RUN_IN_VM, vm_reason

pytestmark = pytest.mark.kernel

ROOT = Path(__file__).resolve().parents[1]

DRIVER = textwrap.dedent(
    """
    import json, subprocess, sys
    PY = sys.executable
    SV = [PY, "-m", "sysverbs"]
    def run(argv):
        p = subprocess.run(argv, capture_output=True)
        return [p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")]
    out = {}
    for key, real, ours in [
        ("devices", ["ibv_devices"], SV + ["devices"]),
        ("devices-sysfs", ["ibv_devices"], SV + ["devices", "--source", "sysfs"]),
        ("devinfo-l", ["ibv_devinfo", "-l"], SV + ["devinfo", "-l"]),
        ("devinfo-l-sysfs", ["ibv_devinfo", "-l"], SV + ["devinfo", "-l", "--source", "sysfs"]),
        ("devinfo", ["ibv_devinfo"], SV + ["devinfo"]),
        ("devinfo-v", ["ibv_devinfo", "-v"], SV + ["devinfo", "-v"]),
        ("devinfo-v-sysfs", ["ibv_devinfo", "-v"], SV + ["devinfo", "-v", "--source", "sysfs"]),
        ("devinfo-d-i", ["ibv_devinfo", "-d", "rxe1", "-i", "1", "-v"],
         SV + ["devinfo", "-d", "rxe1", "-i", "1", "-v"]),
        ("devinfo-i2", ["ibv_devinfo", "-i", "2"], SV + ["devinfo", "-i", "2"]),
        ("devinfo-nope", ["ibv_devinfo", "-d", "nope"], SV + ["devinfo", "-d", "nope"]),
        ("devinfo-i0", ["ibv_devinfo", "-i", "0"], SV + ["devinfo", "-i", "0"]),
        ("devinfo-l-i0", ["ibv_devinfo", "-l", "-i", "0"], SV + ["devinfo", "-l", "-i", "0"]),
    ]:
        out[key] = {"real": run(real), "ours": run(ours)}
    out["rdma-link"] = run(["rdma", "link"])
    out["netdev"] = run(SV + ["netdev"])
    out["netdev-json"] = run(SV + ["netdev", "--json"])
    out["operstate"] = {n: open(f"/sys/class/net/{n}/operstate").read().strip()
                        for n in ("dummy0", "v0")}
    out["doctor"] = run(SV + ["doctor"])
    out["devinfo-json"] = run(SV + ["devinfo", "--json"])
    out["snapshot"] = run(SV + ["snapshot"])
    print("===JSON")
    print(json.dumps(out))
    """
)

VM_SCRIPT = textwrap.dedent(
    """
    export PYTHONPATH={repo} PYTHONDONTWRITEBYTECODE=1
    ip link set dummy0 up
    ip link add v0 type veth peer name v1
    ip addr add 192.168.77.1/24 dev v0
    ip link set v0 up; ip link set v1 up
    rdma link add rxe0 type rxe netdev dummy0
    rdma link add rxe1 type rxe netdev v0
    sleep 2
    {python} {driver}
    echo "===END"
    """
)


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    reuse = os.environ.get("SV_CLI_VM_REUSE")  # a result kept by an earlier run
    if reuse:
        kept: dict[str, Any] = json.loads(Path(reuse).read_text())
        return kept
    require(vm_reason(), "kernel lab VM")
    scripts = tmp_path_factory.mktemp("cli-vm")  # below /tmp: the VM sees it, read-only
    os.chmod(scripts, 0o755)
    (scripts / "driver.py").write_text(DRIVER)
    script = VM_SCRIPT.format(repo=ROOT, python=sys.executable, driver=scripts / "driver.py")
    seconds = int(os.environ.get("VM_TIMEOUT", "1500"))
    env = dict(os.environ, VM_TIMEOUT=str(seconds))
    proc = subprocess.run([str(RUN_IN_VM), script], capture_output=True, text=True,
                          timeout=seconds + 60, env=env)
    if "===END" not in proc.stdout or "===JSON" not in proc.stdout:
        reason = (f"the VM did not run the script (exit {proc.returncode}): "
                  f"{(proc.stderr or proc.stdout)[-2000:]}")
        if proc.returncode in (2, 3):  # run-in-vm.sh: no kernel / no boot
            require(reason, "kernel lab VM")
        pytest.fail(reason)
    line = proc.stdout.split("===JSON", 1)[1].split("===END", 1)[0].strip().splitlines()[0]
    result: dict[str, Any] = json.loads(line)
    (scripts / "result.json").write_text(line)
    print(f"kernel lab result kept in {scripts / 'result.json'} (SV_CLI_VM_REUSE=...)")
    return result


@pytest.mark.parametrize("key", ["devices", "devices-sysfs", "devinfo-l", "devinfo-l-sysfs",
                                 "devinfo-i2", "devinfo-nope", "devinfo-i0", "devinfo-l-i0"])
def test_byte_identical(vm: dict[str, Any], key: str) -> None:
    real, ours = vm[key]["real"], vm[key]["ours"]
    assert ours == real
    if key.startswith("devices"):
        assert "rxe0" in real[1] and "rxe1" in real[1]
    if key == "devinfo-i2":
        assert real[0] == 4


_DEVICE_ONLY = {label for label, _ in QUERY_ONLY_DEVICE}
#: the lines of plain ibv_devinfo that only a device query knows
PLAIN_UNAVAILABLE = {"vendor_id", "vendor_part_id", "hw_ver", "max_mtu", "active_mtu",
                     "fw_ver"}
_LABEL = re.compile(r"\t+([A-Za-z0-9_ ]+|GID\[ *\d+\]):")


def _label(line: str) -> str:
    m = _LABEL.match(line)
    return m.group(1) if m else line


def _blocks(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """(device header lines, [port block lines]) per hca_id."""
    out: list[tuple[list[str], list[list[str]]]] = []
    for chunk in re.split(r"(?m)^(?=hca_id:)", text):
        if not chunk:
            continue
        head, *ports = re.split(r"(?m)^(?=\t\tport:\t)", chunk)
        out.append((head.splitlines(), [p.splitlines() for p in ports]))
    return out


def _compare_lines(real: list[str], ours: list[str], allowed: set[str]) -> list[str]:
    assert [_label(x) for x in ours] == [_label(x) for x in real], (real, ours)
    unavailable = []
    for r, o in zip(real, ours):
        if o == r:
            continue
        label = _label(o)
        assert o.endswith("\t" + UNAVAILABLE) and o[: -len(UNAVAILABLE)] == \
            r[: len(o) - len(UNAVAILABLE)], (r, o)
        assert label in allowed, (label, r, o)
        unavailable.append(label)
    return unavailable


@pytest.mark.parametrize("key", ["devinfo", "devinfo-v", "devinfo-v-sysfs", "devinfo-d-i"])
def test_devinfo_same_where_sysfs_knows(vm: dict[str, Any], key: str) -> None:
    real, ours = vm[key]["real"], vm[key]["ours"]
    assert (ours[0], ours[2]) == (real[0], real[2]) == (0, "")
    rb, ob = _blocks(real[1]), _blocks(ours[1])
    assert [h[0] for h, _ in ob] == [h[0] for h, _ in rb]
    assert len(rb) == (1 if key == "devinfo-d-i" else 2)
    seen: set[str] = set()
    for (rhead, rports), (ohead, oports) in zip(rb, ob):
        # the device lines up to phys_port_cnt; -v's capability block only a query knows
        cut = [_label(x) for x in rhead].index("phys_port_cnt") + 1
        seen.update(_compare_lines(rhead[:cut], ohead[:cut], PLAIN_UNAVAILABLE))
        if "-v" in key:
            assert [_label(x) for x in ohead[cut:]] == [label for label, _ in QUERY_ONLY_DEVICE]
            assert all(x.endswith(UNAVAILABLE) for x in ohead[cut:])
        assert len(oports) == len(rports)
        for rp, op in zip(rports, oports):
            seen.update(_compare_lines(rp, op, PLAIN_UNAVAILABLE | set(QUERY_ONLY_PORT)))
            if "-v" in key:
                gids = [x for x in rp if "GID[" in x]
                assert gids and all(x in op for x in gids)
    # rxe's sysfs fw_ver is empty while its provider formats "0.0.0"
    expected = {"vendor_id", "vendor_part_id", "hw_ver", "max_mtu", "active_mtu", "fw_ver"}
    if "-v" in key or key == "devinfo-d-i":
        expected |= set(QUERY_ONLY_PORT)
    assert seen == expected
    assert not (_DEVICE_ONLY & seen)


def test_devinfo_shows_an_ipv4_mapped_gid_as_inet_ntop(vm: dict[str, Any]) -> None:
    real = vm["devinfo-d-i"]["real"][1]
    assert "::ffff:192.168.77.1, RoCE v2" in real
    assert "::ffff:192.168.77.1, RoCE v2" in vm["devinfo-d-i"]["ours"][1]


def test_netdev_matches_rdma_link(vm: dict[str, Any]) -> None:
    rc, text, err = vm["rdma-link"]
    assert rc == 0, err
    expected = []
    for line in text.splitlines():
        m = re.match(r"link (\S+)/(\d+) .*netdev (\S+)", line)
        if m:
            dev, port, nd = m.groups()
            state = "Up" if vm["operstate"][nd] == "up" else "Down"
            expected.append(f"{dev} port {port} ==> {nd} ({state})")
    assert len(expected) == 2
    assert vm["netdev"] == [0, "".join(x + "\n" for x in sorted(expected)), ""]
    doc = json.loads(vm["netdev-json"][1])
    assert doc["schema"] == "sysverbs.netdev/1"
    assert [(x["device"], x["netdev"]) for x in doc["links"]] == [("rxe0", "dummy0"),
                                                                 ("rxe1", "v0")]


def test_doctor_says_both_usable(vm: dict[str, Any]) -> None:
    rc, text, _ = vm["doctor"]
    assert rc == 0, text
    assert "rxe0: usable (provider rxe" in text and "rxe1: usable (provider rxe" in text


def test_devinfo_json(vm: dict[str, Any]) -> None:
    doc = json.loads(vm["devinfo-json"][1])
    assert doc["schema"] == "sysverbs.devinfo/1"
    assert [d["hca_id"] for d in doc["devices"]] == ["rxe0", "rxe1"]
    assert doc["devices"][0]["ports"][0]["state"] == "PORT_ACTIVE"


def test_snapshot_of_a_real_kernel(vm: dict[str, Any], tmp_path: Path) -> None:
    import sysverbs
    from sysverbs import recording

    rc, text, err = vm["snapshot"]
    assert rc == 0, err
    host = recording.materialize(recording.parse(text), tmp_path)
    devs = sysverbs.get_device_list(sysfs_path=host.sysfs, dev_dir=host.dev, source="sysfs",
                                    providers="builtin")
    assert sorted(d.name for d in devs) == ["rxe0", "rxe1"]
