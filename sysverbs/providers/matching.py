"""Matching one device record to a provider (``try_drivers``/``try_driver``, init.c: match_device).

libibverbs tries every provider of its driver list in turn, and for each one runs
``match_device``: the driver id, then the text ``rdma_device:N<ibdev name>``, then
the device's modalias against the provider's table.  A :class:`Matcher` gives the
same answers without the walk: it indexes a driver list once (driver ids, the PCI
prefixes of the modalias, the fnmatch patterns) so that a record costs a few set
lookups, and it keeps what each modalias matched (every VF of a model has the
same one).  It reads ``device/modalias`` exactly when ``match_device`` would
reach it.  ``tests/test_matching.py`` checks it against a literal transcription of
``try_drivers`` on generated tables and records.

Pure over its inputs, except for the one cached read of ``device/modalias``.
"""

from __future__ import annotations

from ..ground.messages import AbiWarning, emit
from ..ground.sysfs_read import MODALIAS_SIZE, PATH_MAX_IBV, cstr, fnmatch, read_sysfs_file

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from typing import Optional

    from ..ground.records import DeviceRecord
    from .table import Provider

__all__ = [
    "Matcher",
    "matcher_for",
    "match_record",
    "explain_match",
    "driver_verdict",
    "modalias_of",
    "NO_MATCH",
    "PROVIDER_ABI",
    "DEV_PATH_TOO_LONG",
]

#: ``match_name``'s buffer: a longer ``rdma_device:N<name>`` text is not tried.
_NAME_BUF = 100
#: Length of the PCI part of a modalias a ``VERBS_PCI_MATCH`` entry compares:
#: ``pci:v%08Xd%08Xsv``.
_PCI_PREFIX_LEN = 24
#: Distinct modalias texts remembered per matcher before the memory is cleared.
_MODALIAS_MEMORY = 4096

#: Why a provider did not take a record (:func:`driver_verdict`).
NO_MATCH = "no_match"
PROVIDER_ABI = "provider_abi"
DEV_PATH_TOO_LONG = "dev_path_too_long"


def modalias_of(rec: DeviceRecord) -> bytes:
    """``<ibdev_path>/device/modalias``, read once per record (failure cached as empty)."""
    if not rec.modalias_read:
        value = read_sysfs_file(rec.ibdev_path + b"/device/modalias", MODALIAS_SIZE)
        rec.modalias = cstr(value) if value else b""
        rec.modalias_read = True
    return rec.modalias or b""


def _abi_and_path(prov: Provider, rec: DeviceRecord) -> Optional[str]:
    """The rest of ``try_driver`` once the table matched."""
    abi = rec.abi_ver
    if abi < prov.min_abi or abi > prov.max_abi:
        return PROVIDER_ABI
    return None if len(rec.dev_path) < PATH_MAX_IBV else DEV_PATH_TOO_LONG


def _literals(pattern: bytes) -> tuple[bytes, ...]:
    """Pieces of ``pattern`` every match must contain, in order (those without '?')."""
    return tuple(p for p in pattern.split(b"*") if p and b"?" not in p)


def _pattern_matches(pattern: bytes, pieces: tuple[bytes, ...], text: bytes) -> bool:
    """``fnmatch(pattern, text)``, after a quick "cannot match": the literal ``pieces``
    of the pattern (:func:`_literals`) must all be in ``text``, in order."""
    at = 0
    for piece in pieces:
        at = text.find(piece, at)
        if at < 0:
            return False
        at += len(piece)
    return fnmatch(pattern, text)


#: What every ``match_name`` text starts with.
_NAME_HEAD = b"rdma_device:N"


def _may_start_with(pattern: bytes, head: bytes) -> bool:
    """False when no text that starts with ``head`` can match ``pattern``."""
    cut = len(pattern)
    for wildcard in b"*?":
        at = pattern.find(bytes([wildcard]))
        if 0 <= at < cut:
            cut = at
    literal = pattern[:cut]
    return literal.startswith(head) or head.startswith(literal)


class Matcher:
    """``try_drivers`` over one driver list, indexed (see the module docstring)."""

    __slots__ = ("driver_list", "_by_driver_id", "_prefixes", "_with_prefixes", "_patterns",
                 "_tables", "_seen", "_name_patterns")

    def __init__(self, driver_list: Sequence[Provider]) -> None:
        self.driver_list = driver_list
        # Every PCI prefix of the list (a text whose first bytes are none of them
        # matches no PCI entry), and the providers that have any.
        self._prefixes: frozenset[bytes] = frozenset().union(
            *[prov.pci_prefixes for prov in driver_list]
        )
        self._with_prefixes = tuple(i for i, prov in enumerate(driver_list) if prov.pci_prefixes)
        # (provider index, pattern, literal pieces) for each MODALIAS/NAME entry
        self._patterns = [
            (i, pattern, _literals(pattern))
            for i, prov in enumerate(driver_list)
            for pattern in prov.patterns
        ]
        self._tables = tuple(
            i for i, prov in enumerate(driver_list) if prov.pci_prefixes or prov.patterns
        )
        by_id: dict[int, list[int]] = {}
        for i, prov in enumerate(driver_list):
            for driver_id in prov.driver_ids:
                by_id.setdefault(driver_id, []).append(i)
        self._by_driver_id = {k: tuple(v) for k, v in by_id.items()}
        # modalias -> the indexes of the providers it matches, as a set and in order
        self._seen: dict[bytes, tuple[frozenset[int], tuple[int, ...]]] = {}
        # The patterns a name text (rdma_device:N<name>) can match.
        self._name_patterns = [
            entry for entry in self._patterns if _may_start_with(entry[1], _NAME_HEAD)
        ]

    def _text_hits(self, text: bytes) -> frozenset[int]:
        """Indexes of the providers whose table matches ``text`` (``_table_hit``)."""
        head = text[:_PCI_PREFIX_LEN]
        if head in self._prefixes:
            drivers = self.driver_list
            hits = frozenset(i for i in self._with_prefixes if head in drivers[i].pci_prefixes)
        else:
            hits = frozenset()
        more = None
        for i, pattern, pieces in self._patterns:
            if i in hits or (more is not None and i in more):
                continue
            if _pattern_matches(pattern, pieces, text):
                if more is None:
                    more = set()
                more.add(i)
        return hits if more is None else hits | more

    def _modalias_hits(self, modalias: bytes) -> tuple[frozenset[int], tuple[int, ...]]:
        """The providers ``modalias`` matches: a set, and the same indexes in order."""
        seen = self._seen.get(modalias)
        if seen is None:
            if len(self._seen) >= _MODALIAS_MEMORY:
                self._seen.clear()
            hits = self._text_hits(modalias) if modalias else frozenset()
            seen = self._seen[modalias] = (hits, tuple(sorted(hits)))
        return seen

    def _plain(self, rec: DeviceRecord) -> bool:
        """True when neither a driver id nor the name text matches any table: then
        ``try_drivers`` reads the modalias at the first provider that has a table,
        and the providers its table lists are the whole answer."""
        if rec.driver_id:
            return False
        name = _NAME_HEAD + rec.ibdev_name
        if len(name) >= _NAME_BUF:
            return True
        if name[:_PCI_PREFIX_LEN] in self._prefixes:
            return False
        return not any(
            _pattern_matches(pattern, pieces, name) for _i, pattern, pieces in self._name_patterns
        )

    def attempts(self, rec: DeviceRecord) -> Iterator[tuple[Provider, Optional[str]]]:
        """``try_drivers``: each provider whose table matched the record, in the order
        libibverbs tries it, with the verdict of ``try_driver`` (None: it takes the
        record); stops after the first that takes it.  Providers whose table did not
        match (verdict :data:`NO_MATCH`) are left out."""
        drivers = self.driver_list
        pre: frozenset[int] = frozenset()
        if rec.driver_id:
            by_id = self._by_driver_id.get(rec.driver_id, ())
            for i in by_id:
                verdict = _abi_and_path(drivers[i], rec)
                yield drivers[i], verdict
                if verdict is None:
                    return
            pre = frozenset(by_id)
        name = b"rdma_device:N" + rec.ibdev_name
        if len(name) < _NAME_BUF:
            pre = pre | self._text_hits(name) if pre else self._text_hits(name)
        # The first provider whose match_device would go on to read the modalias.
        first_table = -1
        for i in self._tables:
            if i not in pre:
                first_table = i
                break
        done = -1
        for i in sorted(pre):
            if first_table >= 0 and i > first_table:
                break
            verdict = _abi_and_path(drivers[i], rec)
            yield drivers[i], verdict
            if verdict is None:
                return
            done = i
        if first_table < 0:
            return
        hits = pre | self._modalias_hits(modalias_of(rec))[0]
        for i in sorted(hits):
            if i <= done:
                continue
            verdict = _abi_and_path(drivers[i], rec)
            yield drivers[i], verdict
            if verdict is None:
                return

    def match(self, rec: DeviceRecord) -> Optional[Provider]:
        """The provider that takes the record, printing libibverbs' ABI warnings."""
        if self._plain(rec):  # the common case, without the general walk
            if not self._tables:
                return None
            for i in self._modalias_hits(modalias_of(rec))[1]:
                prov = self.driver_list[i]
                verdict = _abi_and_path(prov, rec)
                if verdict is None:
                    return prov
                if verdict == PROVIDER_ABI:
                    self._abi_warning(prov, rec)
            return None
        for prov, verdict in self.attempts(rec):
            if verdict is None:
                return prov
            if verdict == PROVIDER_ABI:
                self._abi_warning(prov, rec)
        return None

    @staticmethod
    def _abi_warning(prov: Provider, rec: DeviceRecord) -> None:
        emit(
            b"Warning: Driver %s does not support the kernel ABI of %d "
            b"(supports %d to %d) for device %s\n"
            % (prov.name.encode(), rec.abi_ver, prov.min_abi, prov.max_abi, rec.ibdev_path),
            AbiWarning,
        )


_last: list[Matcher] = []


def matcher_for(driver_list: Sequence[Provider]) -> Matcher:
    """A :class:`Matcher` for this driver list (the last one is kept for reuse)."""
    last = _last[0] if _last else None
    if last is not None and last.driver_list is driver_list:
        return last
    matcher = Matcher(driver_list)
    _last[:] = [matcher]
    return matcher


def driver_verdict(prov: Provider, rec: DeviceRecord) -> Optional[str]:
    """``try_driver`` without its message: None when ``prov`` takes ``rec``, else why not
    (:data:`NO_MATCH`, :data:`PROVIDER_ABI` or :data:`DEV_PATH_TOO_LONG`)."""
    for _prov, verdict in Matcher((prov,)).attempts(rec):
        return verdict
    return NO_MATCH


def match_record(rec: DeviceRecord, driver_list: Sequence[Provider]) -> Optional[Provider]:
    """The first provider of ``driver_list`` that takes the record (``try_drivers``)."""
    return matcher_for(driver_list).match(rec)


def explain_match(
    rec: DeviceRecord, driver_list: Sequence[Provider]
) -> tuple[Optional[Provider], tuple[tuple[Provider, str], ...]]:
    """:func:`match_record` without messages: the provider that takes the record, and
    each provider whose table matched it but that refused it, with the verdict."""
    refused: list[tuple[Provider, str]] = []
    for prov, verdict in matcher_for(driver_list).attempts(rec):
        if verdict is None:
            return prov, tuple(refused)
        refused.append((prov, verdict))
    return None, tuple(refused)
