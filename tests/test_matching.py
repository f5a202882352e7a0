"""The indexed Matcher against a literal transcription of libibverbs' try_drivers.

``reference_attempts`` below is rdma-core's ``try_drivers``/``try_driver``/
``match_device`` written out as they are in C (every provider, in order, each
table entry in turn, the modalias read on first need).  The Matcher must give the
same providers, verdicts and order (leaving out the providers whose table did not
match, which have no effect), read the modalias exactly when the C code would,
and print the same ABI warnings.  The real libibverbs is the oracle of the
fixture and fuzz tests; this test reaches table shapes no real provider has.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from typing import Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sysverbs.ground import messages
from sysverbs.ground.records import DeviceRecord
from sysverbs.ground.sysfs_read import fnmatch
from sysverbs.providers import matching
from sysverbs.providers.table import Provider, provider_table
from tests.fuzz.profiles import fuzz_settings


def _table_hit(prov: Provider, text: bytes) -> bool:
    if text[:24] in prov.pci_prefixes:
        return True
    return any(fnmatch(p, text) for p in prov.patterns)


def _match_device(prov: Provider, rec: DeviceRecord, read: list[int]) -> bool:
    if rec.driver_id and rec.driver_id in prov.driver_ids:
        return True
    name = b"rdma_device:N" + rec.ibdev_name
    if len(name) < 100 and _table_hit(prov, name):
        return True
    if not prov.pci_prefixes and not prov.patterns:
        return False
    read.append(1)
    modalias = rec.modalias or b""
    return bool(modalias) and _table_hit(prov, modalias)


def _try_driver(prov: Provider, rec: DeviceRecord, read: list[int]) -> Optional[str]:
    if not _match_device(prov, rec, read):
        return matching.NO_MATCH
    if rec.abi_ver < prov.min_abi or rec.abi_ver > prov.max_abi:
        return matching.PROVIDER_ABI
    dev_path = rec.sysfs_root + b"/class/infiniband_verbs/" + rec.dev_name
    return None if len(dev_path) < 256 else matching.DEV_PATH_TOO_LONG


def reference_attempts(
    rec: DeviceRecord, drivers: Sequence[Provider], read: list[int]
) -> Iterator[tuple[Provider, Optional[str]]]:
    if rec.driver_id:
        for prov in drivers:
            if rec.driver_id in prov.driver_ids:
                verdict = _try_driver(prov, rec, read)
                yield prov, verdict
                if verdict is None:
                    return
    for prov in drivers:
        verdict = _try_driver(prov, rec, read)
        yield prov, verdict
        if verdict is None:
            return


# -- generated tables and records --------------------------------------------------
PCI = [(0x15B3, 0x1017), (0x15B3, 0x101E), (0x8086, 0x1592), (0x14E4, 0x16D7)]
PATTERNS = [b"rdma_device:*Nrxe*", b"acpi*:HISI00D1:*", b"of:N*T*Chisilicon,hns?", b"*x*",
            b"vmbus:3daf*", b"rdma_device:N?lx5_*", b"pci:v000015B3*"]
NAMES = [b"mlx5_0", b"rxe0", b"rxe_eth0", b"mlx4_1", b"hns_0", b"x" * 90, b""]
MODALIASES = [b"", b"pci:v000015B3d00001017sv000015B3sd00000020bc02sc00i00",
              b"pci:v000015B3d0000101Esv000015B3sd00000000bc02sc00i00",
              b"pci:v00008086d00001592sv00008086sd00000002bc02sc00i00",
              b"acpi:HISI00D1:", b"of:NroceTChisilicon,hns1", b"vmbus:3daf2e8ca732094b"]


@st.composite
def providers(draw: st.DrawFn, i: int) -> Provider:
    pci = draw(st.lists(st.sampled_from(PCI), max_size=2, unique=True))
    patterns = draw(st.lists(st.sampled_from(PATTERNS), max_size=2, unique=True))
    ids = draw(st.lists(st.integers(1, 3), max_size=2, unique=True))
    lo = draw(st.integers(0, 2))
    return Provider(
        name=f"p{i}", library=f"p{i}", min_abi=lo, max_abi=lo + draw(st.integers(0, 2)),
        pci_prefixes=frozenset(b"pci:v%08Xd%08Xsv" % vd for vd in pci),
        patterns=tuple(patterns), driver_ids=frozenset(ids),
    )


@st.composite
def driver_lists(draw: st.DrawFn) -> tuple[Provider, ...]:
    n = draw(st.integers(0, 7))
    return tuple(draw(providers(i)) for i in range(n))


@st.composite
def records(draw: st.DrawFn) -> DeviceRecord:
    root = draw(st.sampled_from([b"/sys", b"/" + b"r" * 220]))
    return DeviceRecord(
        dev_name=b"uverbs0", ibdev_name=draw(st.sampled_from(NAMES)),
        ibdev_path=b"/sys/class/infiniband/x", sysfs_root=root, cdev=(231, 192),
        abi_ver=draw(st.integers(0, 4)), node_type=1, time_created_ns=0,
        driver_id=draw(st.sampled_from([0, 0, 1, 2, 3])),
        modalias=draw(st.sampled_from(MODALIASES)),
    )


def _ours(rec: DeviceRecord, drivers: Sequence[Provider],
          monkeypatch: pytest.MonkeyPatch) -> tuple[list[tuple[str, Optional[str]]], int]:
    reads: list[int] = []
    value = rec.modalias

    def fake_read(path: bytes, size: int) -> Optional[bytes]:
        assert path == rec.ibdev_path + b"/device/modalias" and size == 512
        reads.append(1)
        return value  # read_sysfs_file has already taken the newline off

    rec.modalias, rec.modalias_read = None, False
    with monkeypatch.context() as m:
        m.setattr(matching, "read_sysfs_file", fake_read)
        got = [(p.name, v) for p, v in matching.Matcher(drivers).attempts(rec)]
    rec.modalias, rec.modalias_read = value, True
    return got, len(reads)


@fuzz_settings(ci=300, deep=5000)  # `make fuzz` runs the deep count
@given(drivers=driver_lists(), rec=records())
def test_matcher_equals_try_drivers(drivers: tuple[Provider, ...], rec: DeviceRecord) -> None:
    read: list[int] = []
    expected = [(p.name, v) for p, v in reference_attempts(rec, drivers, read)
                if v != matching.NO_MATCH]
    with pytest.MonkeyPatch.context() as mp:
        got, reads = _ours(rec, drivers, mp)
    assert got == expected
    assert reads == (1 if read else 0), "modalias read when try_drivers would not (or not)"


def test_real_tables_every_capture_modalias() -> None:
    """Each real table (rdma-core 44 and latest) with names and modaliases of real
    devices: the same provider and the same refused ones as the transcription."""
    for release in (44, 65):
        drivers = provider_table(release)
        for name in NAMES + [b"rxe0", b"siw_eth0", b"efa_0", b"irdma0", b"mana_0",
                     b"rxe" + b"0" * 83, b"rxe" + b"0" * 84]:  # 99 and 100 with the head
            for modalias in MODALIASES:
                for abi in (0, 1, 6):
                    for driver_id in (0, 1, 20):
                        rec = DeviceRecord(b"uverbs0", name, b"/sys/class/infiniband/x",
                                           b"/sys", (231, 192), abi, 1, 0,
                                           driver_id=driver_id, modalias=modalias,
                                           modalias_read=True)
                        expected = [(p.name, v) for p, v in reference_attempts(rec, drivers, [])
                                    if v != matching.NO_MATCH]
                        got = [(p.name, v) for p, v in matching.Matcher(drivers).attempts(rec)]
                        assert got == expected, (release, name, modalias, abi, driver_id)


def test_match_record_warns_like_try_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ABI warning is printed for each refused provider, in order, as libibverbs does
    (the exact text is checked against the real library by the oracle tests)."""
    stream = io.BytesIO()
    monkeypatch.setattr(messages, "_stream", stream)
    drivers = provider_table(44)
    rec = DeviceRecord(b"uverbs0", b"mlx5_0", b"/sys/class/infiniband/mlx5_0", b"/sys",
                       (231, 192), 0, 1, 0, modalias=MODALIASES[1], modalias_read=True)
    assert matching.match_record(rec, drivers) is None
    err = stream.getvalue().decode()
    assert err == ("libibverbs: Warning: Driver mlx5 does not support the kernel ABI of 0 "
                   "(supports 1 to 1) for device /sys/class/infiniband/mlx5_0\n")


@fuzz_settings(ci=300, deep=5000)  # `make fuzz` runs the deep count
@given(drivers=driver_lists(), rec=records())
def test_match_equals_try_drivers(drivers: tuple[Provider, ...], rec: DeviceRecord) -> None:
    """Matcher.match (with its fast path for records no driver id or name matches):
    the provider, the ABI warnings in order and the modalias reads of try_drivers."""
    read: list[int] = []
    expected_prov: Optional[str] = None
    expected_warned = []
    for prov, verdict in reference_attempts(rec, drivers, read):
        if verdict is None:
            expected_prov = prov.name
        elif verdict == matching.PROVIDER_ABI:
            expected_warned.append(prov.name)
    warned: list[str] = []
    reads: list[int] = []
    value = rec.modalias

    def fake_read(path: bytes, size: int) -> Optional[bytes]:
        reads.append(1)
        return value

    rec.modalias, rec.modalias_read = None, False
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(matching, "read_sysfs_file", fake_read)
        mp.setattr(matching.Matcher, "_abi_warning",
                   staticmethod(lambda prov, r: warned.append(prov.name)))
        got = matching.Matcher(drivers).match(rec)
    rec.modalias, rec.modalias_read = value, True
    assert (got.name if got else None) == expected_prov
    assert warned == expected_warned
    assert len(reads) == (1 if read else 0)
