"""Matching one device record to a provider (``try_drivers``/``try_driver``, spec 2.1).

Pure over its inputs, except for the one cached read of ``device/modalias``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Optional

from .cparse import cstr
from .messages import AbiWarning, emit
from .providers import Provider
from .records import DeviceRecord
from .sysfs_read import MODALIAS_SIZE, PATH_MAX_IBV, read_sysfs_file

__all__ = ["match_record", "explain_match", "driver_verdict", "table_match", "modalias_of"]

_NAME_BUF = 100


def modalias_of(rec: DeviceRecord) -> bytes:
    """``<ibdev_path>/device/modalias``, read once per record (failure cached as empty)."""
    if not rec.modalias_read:
        value = read_sysfs_file(rec.ibdev_path + b"/device/modalias", MODALIAS_SIZE)
        rec.modalias = cstr(value) if value else b""
        rec.modalias_read = True
    return rec.modalias or b""


def _table_hit(prov: Provider, text: bytes) -> bool:
    if text[:24] in prov.pci_prefixes:
        return True
    return any(p.fullmatch(text) for p in prov.patterns)


def table_match(prov: Provider, rec: DeviceRecord) -> bool:
    """``match_device``: driver id, then the name string, then the modalias."""
    if rec.driver_id and rec.driver_id in prov.driver_ids:
        return True
    name = b"rdma_device:N" + rec.ibdev_name
    if len(name) < _NAME_BUF and _table_hit(prov, name):
        return True
    if not prov.pci_prefixes and not prov.patterns:
        return False
    modalias = modalias_of(rec)
    return bool(modalias) and _table_hit(prov, modalias)


#: Why a provider did not take a record (:func:`driver_verdict`).
NO_MATCH = "no_match"
PROVIDER_ABI = "provider_abi"
DEV_PATH_TOO_LONG = "dev_path_too_long"


def driver_verdict(prov: Provider, rec: DeviceRecord) -> Optional[str]:
    """``try_driver`` without its message: None when ``prov`` takes ``rec``, else why not
    (:data:`NO_MATCH`, :data:`PROVIDER_ABI` or :data:`DEV_PATH_TOO_LONG`)."""
    if not table_match(prov, rec):
        return NO_MATCH
    if rec.abi_ver < prov.min_abi or rec.abi_ver > prov.max_abi:
        return PROVIDER_ABI
    dev_path = rec.sysfs_root + b"/class/infiniband_verbs/" + rec.dev_name
    return None if len(dev_path) < PATH_MAX_IBV else DEV_PATH_TOO_LONG


def _attempts(
    rec: DeviceRecord, driver_list: Sequence[Provider]
) -> Iterator[tuple[Provider, Optional[str]]]:
    """``try_drivers``: each provider tried, in libibverbs' order, with its verdict;
    stops after the first that takes the record."""
    if rec.driver_id:
        for prov in driver_list:
            if rec.driver_id in prov.driver_ids:
                verdict = driver_verdict(prov, rec)
                yield prov, verdict
                if verdict is None:
                    return
    for prov in driver_list:
        verdict = driver_verdict(prov, rec)
        yield prov, verdict
        if verdict is None:
            return


def match_record(rec: DeviceRecord, driver_list: Sequence[Provider]) -> Optional[Provider]:
    """The first provider of ``driver_list`` that takes the record (``try_drivers``)."""
    for prov, verdict in _attempts(rec, driver_list):
        if verdict is None:
            return prov
        if verdict == PROVIDER_ABI:
            emit(
                b"Warning: Driver %s does not support the kernel ABI of %d (supports %d to %d) "
                b"for device %s\n"
                % (prov.name.encode(), rec.abi_ver, prov.min_abi, prov.max_abi, rec.ibdev_path),
                AbiWarning,
            )
    return None


def explain_match(
    rec: DeviceRecord, driver_list: Sequence[Provider]
) -> tuple[Optional[Provider], tuple[tuple[Provider, str], ...]]:
    """:func:`match_record` without messages: the provider that takes the record, and
    each provider whose table matched it but that refused it, with the verdict."""
    refused: list[tuple[Provider, str]] = []
    for prov, verdict in _attempts(rec, driver_list):
        if verdict is None:
            return prov, tuple(refused)
        if verdict != NO_MATCH:
            refused.append((prov, verdict))
    return None, tuple(refused)
