"""Matching one device record to a provider (``try_drivers``/``try_driver``, spec 2.1).

Pure over its inputs, except for the one cached read of ``device/modalias``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from .cparse import cstr
from .messages import AbiWarning, emit
from .providers import Provider
from .records import DeviceRecord
from .sysfs_read import MODALIAS_SIZE, PATH_MAX_IBV, read_sysfs_file

__all__ = ["match_record", "table_match", "modalias_of"]

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


def _try_driver(prov: Provider, rec: DeviceRecord) -> bool:
    if not table_match(prov, rec):
        return False
    if rec.abi_ver < prov.min_abi or rec.abi_ver > prov.max_abi:
        emit(
            b"Warning: Driver %s does not support the kernel ABI of %d (supports %d to %d) "
            b"for device %s\n"
            % (prov.name.encode(), rec.abi_ver, prov.min_abi, prov.max_abi, rec.ibdev_path),
            AbiWarning,
        )
        return False
    dev_path = rec.sysfs_root + b"/class/infiniband_verbs/" + rec.dev_name
    return len(dev_path) < PATH_MAX_IBV


def match_record(rec: DeviceRecord, driver_list: Sequence[Provider]) -> Optional[Provider]:
    """The first provider of ``driver_list`` that takes the record (``try_drivers``)."""
    if rec.driver_id:
        for prov in driver_list:
            if rec.driver_id in prov.driver_ids and _try_driver(prov, rec):
                return prov
    for prov in driver_list:
        if _try_driver(prov, rec):
            return prov
    return None
