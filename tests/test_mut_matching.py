"""providers/matching.py's edges (issue 41: the mutants of ``make mutation``): the
``rdma_device:N<name>`` buffer (100 bytes), ``PATH_MAX`` of the uverbs path (256), the
ABI range's ends, the fast path's answers where a driver id or a name decides, the one
matcher kept, the modaliases remembered and the read of ``device/modalias``.
libibverbs' rules as tests/test_matching.py's transcription of ``try_drivers`` has
them (init.c: match_name's ``char name[100]``, try_driver's ``PATH_MAX`` check).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from sysverbs.ground.records import DeviceRecord
from sysverbs.providers.matching import (
    DEV_PATH_TOO_LONG,
    NO_MATCH,
    PROVIDER_ABI,
    Matcher,
    driver_verdict,
    explain_match,
    match_record,
    matcher_for,
    modalias_of,
)
from sysverbs.providers.table import Provider

MLX5 = b"pci:v000015B3d00001017sv000015B3sd00000020bc02sc00i00"


def _prov(name: str, *, patterns: tuple[bytes, ...] = (), pci: bool = False,
          ids: frozenset[int] = frozenset(), abi: tuple[int, int] = (1, 2)) -> Provider:
    return Provider(name=name, library=name, min_abi=abi[0], max_abi=abi[1],
                    pci_prefixes=frozenset({MLX5[:24]}) if pci else frozenset(),
                    patterns=patterns, driver_ids=ids)


def _rec(name: bytes = b"dev0", *, abi: int = 1, root: bytes = b"/sys", driver_id: int = 0,
         modalias: Optional[bytes] = b"") -> DeviceRecord:
    return DeviceRecord(b"uverbs0", name, b"/sys/class/infiniband/" + name, root, (231, 192),
                        abi, 1, 0, driver_id=driver_id, modalias=modalias,
                        modalias_read=modalias is not None)


BY_NAME = _prov("byname", patterns=(b"rdma_device:N*",))


def test_the_name_text_fits_in_100_bytes() -> None:
    """``rdma_device:N`` and a name of 86 bytes (99 in all) is tried; of 87 (100) not."""
    fits, long = _rec(b"n" * 86), _rec(b"n" * 87)
    for drivers in ((BY_NAME,), (BY_NAME, _prov("pci", pci=True))):
        assert match_record(fits, drivers) is BY_NAME
        assert match_record(long, drivers) is None
        assert explain_match(fits, drivers) == (BY_NAME, ())
        assert explain_match(long, drivers) == (None, ())
    assert driver_verdict(BY_NAME, fits) is None
    assert driver_verdict(BY_NAME, long) == NO_MATCH


def test_the_abi_range_and_the_path_limit() -> None:
    """ABI 1 and 2 of a 1-2 provider are taken, 0 and 3 not; a uverbs path of 255 bytes
    is taken, of 256 not (``<S>/class/infiniband_verbs/uverbs0`` is 31 bytes after S)."""
    verdicts = [driver_verdict(BY_NAME, _rec(abi=a)) for a in (0, 1, 2, 3)]
    assert verdicts == [PROVIDER_ABI, None, None, PROVIDER_ABI]
    for length, want in ((255, None), (256, DEV_PATH_TOO_LONG)):
        rec = _rec(root=b"/" + b"r" * (length - 32))
        assert len(rec.dev_path) == length
        assert driver_verdict(BY_NAME, rec) == want
        assert explain_match(rec, (BY_NAME,)) == (
            (BY_NAME, ()) if want is None else (None, ((BY_NAME, want),)))
        assert match_record(rec, (BY_NAME,)) is (BY_NAME if want is None else None)


def test_a_driver_id_or_a_name_decides_before_the_modalias() -> None:
    """The kernel's driver id is tried before every table, a matching name before the
    modalias of a later provider's table: the fast path must not skip either."""
    pci, by_id = _prov("pci", pci=True), _prov("byid", ids=frozenset({5}))
    rec = _rec(driver_id=5, modalias=MLX5)
    assert match_record(rec, (pci, by_id)) is by_id
    assert explain_match(rec, (pci, by_id)) == (by_id, ())
    assert match_record(_rec(driver_id=6, modalias=MLX5), (pci, by_id)) is pci
    foo = _prov("foo", patterns=(b"rdma_dev?ce:Nfoo*",))  # a wildcard inside the head
    assert match_record(_rec(b"foo0", modalias=MLX5), (foo, pci)) is foo
    assert match_record(_rec(b"bar0", modalias=MLX5), (foo, pci)) is pci
    assert match_record(_rec(b"foo0", modalias=b""), (pci, foo)) is foo
    assert match_record(_rec(b"foo0", modalias=MLX5, abi=9), (foo, pci)) is None


def test_one_matcher_is_kept() -> None:
    a, b = (BY_NAME,), (BY_NAME,)
    first = matcher_for(a)
    assert matcher_for(a) is first and first.driver_list is a
    second = matcher_for(b)
    assert second is not first and second.driver_list is b
    assert matcher_for(a) is not first  # only the last one is kept


def test_the_remembered_modaliases_are_bounded() -> None:
    """4096 distinct modaliases are remembered; the next one starts over."""
    m = Matcher((_prov("pci", pci=True),))
    for i in range(4096):
        m.match(_rec(modalias=MLX5 + b"%d" % i))
    assert len(m._seen) == 4096
    assert m.match(_rec(modalias=MLX5 + b"x")) is not None and len(m._seen) == 1


def test_modalias_of_reads_once(tmp_path: Path) -> None:
    """``device/modalias`` read once (its newline off, cut at a NUL), a failure kept as
    empty."""
    ib = tmp_path / "mlx5_0"
    (ib / "device").mkdir(parents=True)
    (ib / "device/modalias").write_bytes(MLX5 + b"\0junk\n")
    rec = DeviceRecord(b"uverbs0", b"mlx5_0", bytes(ib), b"/sys", (231, 192), 1, 1, 0)
    assert modalias_of(rec) == MLX5 and rec.modalias_read
    (ib / "device/modalias").unlink()
    assert modalias_of(rec) == MLX5
    gone = DeviceRecord(b"uverbs1", b"x", bytes(tmp_path / "x"), b"/sys", (231, 193), 1, 1, 0)
    assert modalias_of(gone) == b"" and gone.modalias_read and gone.modalias == b""


def test_the_first_of_several_tables_takes_the_device() -> None:
    """Providers 1 and 8 of nine both list the device's PCI id: libibverbs tries them in
    list order, so provider 1 takes it (a set of the two, {1, 8}, iterates 8 first)."""
    drivers = tuple(_prov(f"p{i}", pci=i in (1, 8), patterns=() if i in (1, 8) else
                          (b"nothing",)) for i in range(9))
    assert match_record(_rec(modalias=MLX5), drivers) is drivers[1]
    assert explain_match(_rec(modalias=MLX5), drivers) == (drivers[1], ())
