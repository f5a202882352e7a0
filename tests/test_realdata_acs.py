"""``acs_redirect`` on a tree rebuilt from a public capture (NVIDIA/nccl#304,
tests/data/pcie-captures/plx-acs-nccl304.json): the PLX switch's downstream ports hold
the capture's ACSCtl in an ACS capability where PLX ports have it (0xf24: the
``setpci f2a.w=0000`` of the capture's fix clears its control register), real
``lspci -F`` decodes them back into the capture's ``ACSCtl`` lines and real ``setpci``
reads the register the fix writes; sysverbs finds the redirect in the broken state and
nothing in the working one, as the capture says (GPUDirect RDMA between the GPU and the
NIC failed, then worked).  The capture gives no tree: the GPU and the NIC are placed
below two downstream ports of one PLX switch, the layout GPUDirect RDMA through a PLX
switch has.
"""

from __future__ import annotations

import json
from pathlib import Path

from sysverbs.placement import acs_redirects, read_host
from sysverbs.placement._acs import acs_text
from sysverbs.testing import HostBuilder
from sysverbs.testing.builder_lspci import ACS_AT_PLX, Function, acs_bits, write_function
from tests import lspci_oracle
from tests.conftest import require

CAPTURE = json.loads((Path(__file__).parent / "data/pcie-captures/plx-acs-nccl304.json")
                     .read_text())
RP, USP = "0000:00:03.0", "0000:02:00.0"
DSP_GPU, DSP_NIC = "0000:03:08.0", "0000:03:10.0"
GPU, NIC = "0000:04:00.0", "0000:05:00.0"
GEN3_X16 = ("LnkCap:\tPort #8, Speed 8GT/s, Width x16", "LnkSta:\tSpeed 8GT/s, Width x16")


def _ports(state: str) -> list[Function]:
    """The two downstream ports (a PLX PEX 8747, 10b5:8747: the capture names no
    model) with the capture's ACSCap
    and its ``state`` ("broken" or "working") ACSCtl."""
    acs = (CAPTURE["acscap"], CAPTURE[state])
    return [Function.parse(bdf, "downstream", 0x10B5, 0x8747, 0x060400, *GEN3_X16, acs=acs)
            for bdf in (DSP_GPU, DSP_NIC)]


def test_lspci_and_setpci_read_the_captures_registers(tmp_path: Path) -> None:
    require(lspci_oracle.unavailable(), "lspci/setpci (Debian's pciutils)")
    for state, register in (("broken", "001d"), ("working", "0000")):
        ports = _ports(state)
        got = lspci_oracle.decode(ports, tmp_path)
        for f in ports:
            assert f"Capabilities: [{ACS_AT_PLX:x} v1] Access Control Services" in got[f.bdf]
            assert lspci_oracle.line(got[f.bdf], "ACSCtl:") == CAPTURE[state]
            assert " ".join(lspci_oracle.line(got[f.bdf], "ACSCap:").split()) == \
                " ".join(CAPTURE["acscap"].split())
        # the register the fix writes (f2a.w) is the one lspci decodes as ACSCtl
        assert lspci_oracle.read_register(ports, tmp_path, DSP_NIC, "f2a.w") == register
        assert lspci_oracle.read_register(ports, tmp_path, DSP_NIC, "ECAP_ACS+6.w") == register
        assert int(register, 16) == acs_bits(CAPTURE[state])


def _tree(tmp_path: Path, state: str) -> str:
    hb = HostBuilder()
    root = hb.host_bridge("pci0000:00", numa_node=0)
    rp = hb.pci_bridge(f"{root}/{RP}", port="root", vendor=0x8086, device=0x2F08)
    usp = hb.pci_bridge(f"{rp}/{USP}", port="upstream", vendor=0x10B5, device=0x8747)
    dsp_gpu = hb.pci_bridge(f"{usp}/{DSP_GPU}", vendor=0x10B5, device=0x8747)
    dsp_nic = hb.pci_bridge(f"{usp}/{DSP_NIC}", vendor=0x10B5, device=0x8747)
    hb.gpu(f"{dsp_gpu}/{GPU}", model="a100")
    hb.mlx5(path=f"{dsp_nic}/{NIC}", model="cx6", link_layer="InfiniBand")
    host = hb.materialize(tmp_path)
    for path, f in zip((dsp_gpu, dsp_nic), _ports(state)):
        write_function(str(host.sysfs), path, f)
    return str(host.sysfs)


def test_the_broken_state_is_a_redirect(tmp_path: Path) -> None:
    (r,) = acs_redirects(read_host(_tree(tmp_path, "broken")))
    assert (r.device, r.name, r.peer, r.peer_role, r.switch, r.ports, r.evidence) == (
        NIC, "mlx5_0", GPU, "gpu", USP, (DSP_NIC, DSP_GPU), "acs_ctl")
    # the message quotes each port's ACSCtl as the capture's lspci printed it
    assert r.as_dict()["acs_ctl"] == [CAPTURE["broken"].split("\t", 1)[1]] * 2
    assert f"{DSP_NIC} ACSCtl: {acs_text(acs_bits(CAPTURE['broken']))}" in r.message()


def test_the_working_state_after_the_fix_is_no_finding(tmp_path: Path) -> None:
    assert acs_redirects(read_host(_tree(tmp_path, "working"))) == ()
