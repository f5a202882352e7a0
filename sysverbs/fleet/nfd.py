"""A host's facts as node labels: the feature file of Node Feature Discovery's ``local``
source (docs/fleet.md).

NFD's worker reads every file of ``/etc/kubernetes/node-feature-discovery/features.d/``
that is not a dot file and not over 64 KiB: lines ``key=value`` (``key`` alone means
``true``), ``#`` comments, and the directives ``# +expiry-time=<RFC3339>`` (for the lines
that follow it) and ``# +no-label`` (the next line is a feature for NodeFeatureRules,
``local.feature``, not a label).  Each label key must be a Kubernetes qualified name and
each value a label value, or NFD drops the label.  :func:`feature_file` makes the file of
a :class:`~sysverbs.fleet.facts.HostFacts`, every key in the namespace
``sysverbs.feature.node.kubernetes.io`` (a sub-namespace of NFD's own, which NFD always
allows); a key or value that is not valid is left out with the reason
(:attr:`FeatureFile.dropped`), never written.  :func:`write_feature_file` writes it as a
dot file and renames it to ``sysverbs``, so NFD reads the old file or the new one, never
half of one.

>>> import tempfile
>>> from sysverbs import testing
>>> from sysverbs.fleet.facts import collect_facts
>>> from sysverbs.fleet.nfd import feature_file
>>> with tempfile.TemporaryDirectory() as tmp:
...     host = testing.materialize("gpu-dgx-b200", tmp)
...     facts = collect_facts(sysfs_path=host.sysfs, dev_dir=host.dev, providers="builtin",
...                           source="sysfs", recorded=True)
>>> f = feature_file(facts, expires_in=180, now=0)
>>> print(f.text().splitlines()[0])
# +expiry-time=1970-01-01T00:03:00Z
>>> [f"{k.split('/')[1]}={v}" for k, v in f.labels()][:4]
['rdma.usable=true', 'rdma.devices=18', 'rdma.usable-devices=18', 'rdma.infiniband=true']
>>> f.value("gpu-nic.worst-link"), f.value("nccl.transport"), f.value("rdma.device.mlx5_0.usable")
('PXB', 'ib', 'true')
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from ..devices.diagnosis import CODES
from .files import replace_file

if TYPE_CHECKING:
    from .facts import DeviceFacts, HostFacts

__all__ = ["FILE_NAME", "MAX_FILE_SIZE", "NAMESPACE", "Feature", "FeatureFile",
           "feature_file", "label_value_errors", "qualified_name_errors",
           "write_feature_file"]

#: The namespace of every key: a sub-namespace of ``feature.node.kubernetes.io``, which
#: NFD's master always allows (``-deny-label-ns`` cannot deny it).
NAMESPACE = "sysverbs.feature.node.kubernetes.io"
#: The file's name in the features directory (written as ``.sysverbs`` first).
FILE_NAME = "sysverbs"
#: NFD's local source ignores a larger file (``MaxFeatureFileSize``).
MAX_FILE_SIZE = 65536

# Kubernetes' rules (k8s.io/apimachinery/pkg/util/validation): a qualified name is
# [prefix/]name, name at most 63 characters of [-A-Za-z0-9_.] with an alphanumeric at
# each end, prefix a DNS-1123 subdomain (at most 253 characters, lower-case labels of
# [-a-z0-9] with an alphanumeric at each end, joined by dots); a label value is empty or
# a name's characters, at most 63.
_NAME = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*\Z")
_MAX_NAME = 63
_MAX_SUBDOMAIN = 253


def qualified_name_errors(key: str) -> list[str]:
    """Why ``key`` is not a Kubernetes qualified name (``IsQualifiedName``); ``[]`` when
    it is one."""
    parts = key.split("/")
    errors = []
    if len(parts) > 2:
        return ["a qualified name has at most one '/'"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            if len(prefix) > _MAX_SUBDOMAIN:
                errors.append(f"prefix part must be no more than {_MAX_SUBDOMAIN} characters")
            if not _SUBDOMAIN.match(prefix):
                errors.append("prefix part must be a DNS-1123 subdomain (lower-case "
                              "alphanumerics, '-' and '.', alphanumeric at each end)")
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > _MAX_NAME:
        errors.append(f"name part must be no more than {_MAX_NAME} characters")
    if not _NAME.match(name):
        errors.append("name part must consist of alphanumerics, '-', '_' or '.', and start "
                      "and end with an alphanumeric")
    return errors


def label_value_errors(value: str) -> list[str]:
    """Why ``value`` is not a Kubernetes label value (``IsValidLabelValue``); ``[]`` when
    it is one (the empty value is one)."""
    errors = []
    if len(value) > _MAX_NAME:
        errors.append(f"must be no more than {_MAX_NAME} characters")
    if value and not _NAME.match(value):
        errors.append("must be empty or consist of alphanumerics, '-', '_' or '.', and start "
                      "and end with an alphanumeric")
    return errors


@dataclass(frozen=True)
class Feature:
    """One line: ``key`` (with the namespace), ``value``; ``label`` False: a feature only
    (``# +no-label`` before it), for NodeFeatureRules."""

    key: str
    value: str
    label: bool = True

    def line(self) -> str:
        return f"{self.key}={self.value}\n" if self.label else \
            f"# +no-label\n{self.key}={self.value}\n"


@dataclass(frozen=True)
class FeatureFile:
    """The file for one snapshot: ``expiry`` (seconds since the epoch, whole seconds),
    ``features`` in the file's order, ``dropped``: ``(key=value, why)`` for each line left
    out (an invalid key or value, or past NFD's 64 KiB)."""

    expiry: int
    features: tuple[Feature, ...]
    dropped: tuple[tuple[str, str], ...]
    header: str = ""

    @property
    def expiry_time(self) -> str:
        """``expiry`` in RFC 3339 (UTC), as ``# +expiry-time=`` takes it."""
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.expiry))

    def text(self) -> str:
        """The file: the expiry directive first (it covers every line after it), a
        comment, the labels, then the per-device features."""
        head = f"# +expiry-time={self.expiry_time}\n"
        if self.header:
            head += f"# {self.header}\n"
        return head + "".join(f.line() for f in self.features)

    def labels(self) -> list[tuple[str, str]]:
        return [(f.key, f.value) for f in self.features if f.label]

    def value(self, name: str) -> Optional[str]:
        """The value of ``NAMESPACE/name``, or None."""
        key = f"{NAMESPACE}/{name}"
        for f in self.features:
            if f.key == key:
                return f.value
        return None


def _dashes(code: str) -> str:
    return code.replace("_", "-")


def _problems(codes: list[str]) -> list[str]:
    """The codes that are problems (errors and warnings, not notes), in CODES order."""
    present = set(codes)
    return [c for c in CODES if c in present and CODES[c][0] != "note"]


def _usable_ports(d: DeviceFacts) -> list[str]:
    """The link layers of ``d``'s ACTIVE ports, when ``d`` is usable."""
    if not d.usable:
        return []
    return [p.link_layer for p in d.ports if p.state == "ACTIVE"]


def _unknown_only(facts: HostFacts) -> bool:
    """The discovery part ran and failed only because some device's files are unknown
    (:mod:`sysverbs.devices.readable`): its labels stay, with ``rdma.problem.unknown``."""
    return facts.host_reasons is not None and any("unknown" in d.reasons
                                                  for d in facts.devices)


def _host_features(facts: HostFacts) -> list[Feature]:
    out: list[Feature] = []

    def label(name: str, value: str) -> None:
        out.append(Feature(f"{NAMESPACE}/{name}", value))

    failed = {c.name for c in facts.collectors if not c.success}
    if "discovery" in failed:
        label("discovery.failed", "true")
    if "discovery" not in failed or _unknown_only(facts):
        usable = [d for d in facts.devices if d.usable]
        label("rdma.usable", "true" if usable else "false")
        label("rdma.devices", str(len(facts.devices)))
        label("rdma.usable-devices", str(len(usable)))
        layers = {(layer, d.node_type) for d in usable for layer in _usable_ports(d)}
        if any(layer == "InfiniBand" for layer, _ in layers):
            label("rdma.infiniband", "true")
        if any(layer == "Ethernet" and kind != "RNIC" for layer, kind in layers):
            label("rdma.roce", "true")
        if any(kind == "RNIC" for _, kind in layers):
            label("rdma.iwarp", "true")
        label("rdma.cm", "true" if facts.rdma_cm_available else "false")
        codes = [c for d in facts.devices for c in d.reasons] + list(facts.host_reasons or ())
        for code in _problems(codes):
            label(f"rdma.problem.{_dashes(code)}", "true")
    if "topology" in failed:
        label("topology.failed", "true")
    elif facts.gpus:
        worst = facts.worst_assigned_link()
        if worst is not None:
            label("gpu-nic.worst-link", worst)
        if facts.layout in ("dma-based", "numa-based"):  # Grace: rdma_topo's names
            label("gpu-nic.layout", facts.layout)
            # DRA: aligning GPU and NIC on resource.kubernetes.io/pcieRoot would pick
            # other NICs than the pairing (every Grace GPU: docs/placement.md)
            label("gpu-nic.pcie-root-aligned",
                  "false" if facts.pcie_root_misaligned else "true")
    if "topology" not in failed and facts.pcie_links:
        label("pcie.degraded", "true")
    found = facts.findings if "topology" not in failed else None
    offs = {p.code for p in found.pairs} \
        if found is not None and found.gdr.code is None else set()
    if found is not None and (found.gdr.code is not None or "gdr_unavailable" in offs):
        label("gdr.unavailable", "true")
    if "gdr_disabled_by_distance" in offs:
        label("gdr.disabled-by-distance", "true")
    if found is not None and found.addr:
        label("roce.no-address-gid", "true")
    if "topology" not in failed and facts.acs_redirects:
        label("pcie.acs-redirect", "true")
    if "topology" not in failed and facts.translated_nics:
        label("iommu.translated", "true")
    if "nccl" in failed:
        label("nccl.failed", "true")
    else:  # none: NCCL would fail to initialise (NCCL_NET names no network it has)
        label("nccl.transport", facts.nccl_transport or "none")
        for code in sorted({c for _, _, c in facts.nccl_gid_problems}):  # nccl check's
            label(f"nccl.problem.{code}", "true")
    return out


def _device_features(facts: HostFacts) -> list[Feature]:
    out: list[Feature] = []
    if any(c.name == "discovery" and not c.success for c in facts.collectors) and \
            not _unknown_only(facts):
        return out
    for d in facts.devices:
        base = f"{NAMESPACE}/rdma.device.{d.name}"
        if d.usable is not None:
            out.append(Feature(f"{base}.usable", "true" if d.usable else "false", False))
        if d.provider:
            out.append(Feature(f"{base}.provider", d.provider, False))
        out.extend(Feature(f"{base}.problem.{_dashes(c)}", "true", False)
                   for c in _problems(list(d.reasons)))
    return out


def feature_file(facts: HostFacts, *, expires_in: float, now: Optional[float] = None,
                 header: str = "") -> FeatureFile:
    """The feature file of ``facts``, whose lines expire ``expires_in`` seconds after
    ``now`` (default: the time now), rounded up to a whole second.  ``header``: a comment
    line after the directive (never one that starts with ``+``, NFD's directive mark)."""
    start = time.time() if now is None else now
    expiry = int(-(-(start + expires_in) // 1))
    kept: list[Feature] = []
    dropped: list[tuple[str, str]] = []
    size = len(FeatureFile(expiry, (), (), header.lstrip("+")).text().encode())
    for f in [*_host_features(facts), *_device_features(facts)]:
        why = qualified_name_errors(f.key) or label_value_errors(f.value)
        if why:
            dropped.append((f"{f.key}={f.value}", "; ".join(why)))
            continue
        n = len(f.line().encode())
        if size + n > MAX_FILE_SIZE:
            dropped.append((f"{f.key}={f.value}",
                            f"the file would pass NFD's limit of {MAX_FILE_SIZE} bytes"))
            continue
        size += n
        kept.append(f)
    return FeatureFile(expiry, tuple(kept), tuple(dropped), header.lstrip("+"))


def write_feature_file(directory: str, text: str) -> str:
    """Write ``text`` as ``<directory>/sysverbs`` through a dot file in ``directory``
    (``.sysverbs.*.tmp``, which NFD skips) and a rename
    (:func:`sysverbs.fleet.files.replace_file`): NFD sees the whole old file or the whole
    new one.  Returns the file's path.  ``OSError`` when the directory is missing or not
    writable (no dot file is left behind)."""
    return replace_file(directory, FILE_NAME, text.encode())
