"""rank/predict.py by value (issue 41: the survivors of its mutation run; launch.py's
part is tests/test_mut_rank3.py): pure rules on data, as tests/test_predict.py and
tests/test_predict_fabric.py write them (the latter beside the real ``fi_info``)."""

from __future__ import annotations

from sysverbs.rank.gdr import GdrSupport
from sysverbs.rank.predict import DeviceView, NcclView, PortView, fabric_verbs, predict


def _dev(name: str, state: str = "ACTIVE", gids: int = 1, usable: bool = True,
         link: str = "InfiniBand") -> DeviceView:
    return DeviceView(name, "mlx5", True, usable, "CA", "" if usable else "no_dev_node",
                      (PortView(name, 1, state, link, gids),))


def _by_lib(devices: list[DeviceView], nccl: NcclView) -> dict[str, tuple[str, str]]:
    gdr = GdrSupport("peermem", "/sys/module/nvidia_peermem/version exists")
    return {p.library: (p.outcome, p.reason) for p in predict(devices, (), nccl=nccl, gdr=gdr)}


def test_only_socket_nccl_takes_libibverbs_reason() -> None:
    """NCCL on sockets because no device opens: its reason says why, libibverbs' reason
    after it; a NCCL that fails for its own reason keeps that reason alone; libfabric's
    verbs provider has libibverbs' reason."""
    closed = [_dev("mlx5_0", usable=False)]
    sock = _by_lib(closed, NcclView("socket", (), "no IB device"))
    assert sock["nccl"] == ("sockets (TCP)", "no IB device: mlx5_0: no_dev_node")
    assert sock["libfabric-verbs"] == ("no verbs domain (fi_getinfo -61)",
                                       "mlx5_0: no_dev_node")
    bad = _by_lib(closed, NcclView("", (), "NCCL_NET=Foo names no network"))
    assert bad["nccl"] == ("fails to initialise", "NCCL_NET=Foo names no network")


def test_a_port_without_gid_has_no_msg_domain() -> None:
    p = fabric_verbs([_dev("mlx5_0", gids=0)], (), {}, {})
    assert p.outcome == "no MSG domain; dgram for mlx5_0"
    assert p.reason == "mlx5_0: no MSG domain: no address rdma_cm binds to it, no GID"


def test_the_first_reason_is_said() -> None:
    none = fabric_verbs([_dev("a", "DOWN"), _dev("b", "DOWN")], (), {}, {})
    assert none.reason == "a: no ACTIVE port"
    rxm = fabric_verbs([_dev("a"), _dev("b", "DOWN"), _dev("c", "DOWN")], ("no_rdma_cm",), {},
                       {})
    assert rxm.outcome == "MSG domains for a; dgram for a"
    assert rxm.reason == "no_rdma_cm: no ofi_rxm (its rdma_create_id fails)"
