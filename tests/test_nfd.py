"""``sysverbs nfd``'s feature file (sysverbs/fleet/nfd.py) as Node Feature Discovery's
``local`` source reads it, and its keys and values by Kubernetes' rules.

* :func:`nfd_read` is NFD's reader (source/local/local.go, v0.19): the file ignored past
  64 KiB, split on ``\\n``, each line trimmed; ``#`` lines are comments, ``# +`` ones
  directives (``expiry-time=<RFC 3339>`` for the lines after it, ``no-label`` and
  ``no-feature`` for the next line, anything else an error); a line is ``SplitN(line,
  "=", 2)``, the value ``true`` when there is no ``=``; a line past its expiry time is
  skipped.  Every bundled fixture's file reads with no error, every line, and gives the
  labels and features sysverbs meant.
* Keys and values are held to the rules as Kubernetes documents them ("Labels and
  Selectors": name segment at most 63 characters, alphanumeric at each end, ``-_.`` and
  alphanumerics between; prefix a DNS subdomain of at most 253 characters; value at most
  63 characters, empty or the name's characters), written here apart from sysverbs'
  validator, and by NFD's own namespace rule; the validator passes Kubernetes' own test
  cases (apimachinery's ``TestIsQualifiedName``, ``TestIsValidLabelValue``).
"""

from __future__ import annotations

import calendar
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sysverbs.fleet.facts import CollectorResult, DeviceFacts, HostFacts, PortFacts, collect_facts
from sysverbs.fleet.nfd import (
    MAX_FILE_SIZE,
    NAMESPACE,
    feature_file,
    label_value_errors,
    qualified_name_errors,
    write_feature_file,
)
from sysverbs.testing import fixture_names
from sysverbs.testing.cache import fixture_tree
from tests.bad_input import CORRUPTIONS, build_host, corrupt
from tests.fuzz.profiles import fuzz_settings
from tests.trees import build, host, rdma_dev

# ------------------------------------------------------------------ NFD's local source

_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(\.\d+)?"
                      r"([Zz]|[+-]\d\d:\d\d)\Z")


def _rfc3339(text: str) -> float:
    m = _RFC3339.match(text.strip())
    if m is None:
        raise ValueError(f"not RFC 3339: {text!r}")
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    t = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + float(m.group(7) or 0)
    zone = m.group(8)
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        t -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return t


class Read:
    def __init__(self) -> None:
        self.labels: dict[str, str] = {}
        self.features: dict[str, str] = {}
        self.errors: list[str] = []
        self.expiries: list[float] = []
        self.skipped = 0


def nfd_read(data: bytes, now: float) -> Optional[Read]:
    """What NFD's local source makes of one file at time ``now`` (None: ignored)."""
    if len(data) > 65536:  # MaxFeatureFileSize
        return None
    out = Read()
    expiry, skip_label, skip_feature = now, False, False
    for raw in data.split(b"\n"):
        line = raw.decode("utf-8", "replace").strip()
        if not line:
            continue
        if line.startswith("#"):
            if line.startswith("# +"):
                key, eq, value = line[3:].partition("=")
                if key == "expiry-time":
                    try:
                        expiry = _rfc3339(value) if eq else expiry
                        out.expiries.append(expiry)
                    except ValueError as e:
                        out.errors.append(str(e))
                    if not eq:
                        out.errors.append(f"invalid directive format in {line!r}")
                elif key == "no-feature":
                    skip_feature = True
                elif key == "no-label":
                    skip_label = True
                else:
                    out.errors.append(f"unknown feature file directive {key!r}")
            continue
        if expiry < now:
            out.skipped += 1
            continue
        key, eq, value = line.partition("=")
        value = value if eq else "true"
        for skip, table in ((skip_feature, out.features), (skip_label, out.labels)):
            if skip:
                table.pop(key, None)
            else:
                table[key] = value
        skip_label = skip_feature = False
    return out


def test_the_reader_reads_as_nfd() -> None:
    """The reader on NFD's own documented cases: a bare key is true, the value is all
    after the first '=', comments, a past expiry drops the lines after it, no-label
    applies to one line, an unknown directive is an error, a big file is ignored."""
    text = (b"a\nb=c=d\n  # a comment\n# +no-label\nf1=1\nl1=2\n"
            b"# +expiry-time=2000-01-01T00:00:00Z\nold=1\n"
            b"# +expiry-time=2100-01-01T00:00:00+02:00\nnew=1\n# +bogus\n")
    r = nfd_read(text, now=time.time())
    assert r is not None
    assert r.labels == {"a": "true", "b": "c=d", "l1": "2", "new": "1"}
    assert r.features == {"a": "true", "b": "c=d", "f1": "1", "l1": "2", "new": "1"}
    assert r.skipped == 1 and r.errors == ["unknown feature file directive 'bogus'"]
    assert r.expiries[1] == calendar.timegm((2099, 12, 31, 22, 0, 0, 0, 0, 0))
    assert nfd_read(b"a\n" * 40000, now=0) is None


# ---------------------------------------------------- Kubernetes' rules, as documented

def documented_key(key: str) -> bool:
    """A label key by the documentation: ``[prefix/]name``."""
    if key.count("/") > 1:
        return False
    prefix, _, name = key.rpartition("/")
    if "/" in key:
        if not 1 <= len(prefix) <= 253:
            return False
        for part in prefix.split("."):
            if not re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", part):
                return False
    return 1 <= len(name) <= 63 and bool(re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?",
                                                       name))


def documented_value(value: str) -> bool:
    return value == "" or (len(value) <= 63 and bool(
        re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?", value)))


def nfd_allows(key: str) -> bool:
    """NFD's namespace rule (pkg/apis/nfd/validate): a prefix, not kubernetes.io or a
    sub-namespace of it unless feature.node.kubernetes.io (or profile.) or theirs."""
    ns = key.split("/", 1)[0] if "/" in key else ""
    if not ns:
        return False
    if ns == "kubernetes.io" or ns.endswith(".kubernetes.io"):
        return ns in ("feature.node.kubernetes.io", "profile.node.kubernetes.io") or \
            ns.endswith((".feature.node.kubernetes.io", ".profile.node.kubernetes.io"))
    return True


# apimachinery's pkg/util/validation/validation_test.go cases
GOOD_KEYS = ["simple", "now-with-dashes", "1-starts-with-num", "1234", "simple/simple",
             "now-with-dashes/simple", "now-with-dashes/now-with-dashes",
             "now.with.dots/simple", "now-with.dashes-and.dots/simple", "1-num.2-num/3-num",
             "1234/5678", "1.2.3.4/5678", "Uppercase_Is_OK_123",
             "example.com/Uppercase_Is_OK_123", "requests.storage-foo", "a" * 63,
             "a" * 253 + "/" + "b" * 63]
BAD_KEYS = ["nospecialchars%^=@", "cantendwithadash-", "-cantstartwithadash-",
            "only/one/slash", "Example.com/abc", "example_com/abc", "example.com/",
            "/simple", "a" * 64, "a" * 254 + "/abc", ""]
GOOD_VALUES = ["simple", "now-with-dashes", "1-starts-with-num", "end-with-num-1", "1234",
               "a" * 63, ""]
BAD_VALUES = ["nospecialchars%^=@", "Tama-nui-te-r\u0101.is.M\u0101ori.sun",
              "\\backslashes\\are\\bad", "-starts-with-dash", "ends-with-dash-",
              ".starts.with.dot", "ends.with.dot.", "a" * 64]


CASES = [("key", k, True) for k in GOOD_KEYS] + [("key", k, False) for k in BAD_KEYS] + [
    ("value", v, True) for v in GOOD_VALUES] + [("value", v, False) for v in BAD_VALUES]


@pytest.mark.parametrize("kind,text,valid", CASES,
                         ids=[f"{k}-{'good' if ok else 'bad'}-{i}" for i, (k, _, ok)
                              in enumerate(CASES)])
def test_kubernetes_own_cases(kind: str, text: str, valid: bool) -> None:
    """Kubernetes' cases: sysverbs' validator and the documented rules both agree."""
    check, documented = ((qualified_name_errors, documented_key) if kind == "key" else
                         (label_value_errors, documented_value))
    assert (check(text) == []) is valid and documented(text) is valid


_KEY_CHARS = st.sampled_from("aZ09-_./:=% \u0101")


@fuzz_settings(ci=300, deep=3000)
@given(st.text(_KEY_CHARS, max_size=70) | st.builds(
    lambda p, n: f"{p}/{n}", st.text(_KEY_CHARS, max_size=260), st.text(_KEY_CHARS, max_size=70)))
def test_validators_are_the_documented_rules(text: str) -> None:
    assert (qualified_name_errors(text) == []) == documented_key(text)
    assert (label_value_errors(text) == []) == documented_value(text)


# ---------------------------------------------------------------------------- files

def _facts(name: str) -> HostFacts:
    h = fixture_tree(name)
    return collect_facts(sysfs_path=h.sysfs, dev_dir=h.dev, providers="builtin",
                         source="sysfs", recorded=True)


def _read_ok(text: str, now: float) -> Read:
    data = text.encode()
    assert len(data) <= MAX_FILE_SIZE
    r = nfd_read(data, now)
    assert r is not None and r.errors == [] and r.skipped == 0
    return r


def _short(table: dict[str, str]) -> dict[str, str]:
    return {k[len(NAMESPACE) + 1:]: v for k, v in table.items()}


@pytest.mark.parametrize("fixture", fixture_names())
def test_every_fixture_file_reads_as_nfd(fixture: str) -> None:
    """On every bundled fixture: NFD reads every line (no error, none expired), the
    labels are the lines without ``# +no-label``, every key is a valid qualified name in
    sysverbs' namespace that NFD allows, every value a valid label value, the expiry
    directive comes first."""
    now = time.time()
    ff = feature_file(_facts(fixture), expires_in=180, now=now, header="a comment")
    text = ff.text()
    assert text.startswith("# +expiry-time=") and ff.dropped == ()
    r = _read_ok(text, now)
    assert r.labels == dict(ff.labels())
    assert r.features == {f.key: f.value for f in ff.features}
    assert set(r.labels) <= set(r.features)  # the per-device lines are features only
    for key, value in r.features.items():
        assert documented_key(key) and nfd_allows(key), key
        assert key.startswith(NAMESPACE + "/")
        assert documented_value(value), (key, value)
    assert r.expiries == [pytest.approx(now + 180, abs=1)]


EXPECTED = {
    "dgx-demo": {"rdma.usable": "true", "rdma.devices": "19", "rdma.usable-devices": "19",
                 "rdma.infiniband": "true", "rdma.roce": "true",
                 "rdma.problem.port-down": "true", "nccl.transport": "ib",
                 "nccl.problem.gid-link-local": "true"},
    "gpu-dgx-b200": {"rdma.usable": "true", "rdma.devices": "18",
                     "rdma.usable-devices": "18", "rdma.infiniband": "true",
                     "rdma.roce": "true", "rdma.problem.port-down": "true",
                     "gpu-nic.worst-link": "PXB", "nccl.transport": "ib",
                     "nccl.problem.gid-link-local": "true"},
    "gpu-hgx-h100": {"rdma.usable": "true", "rdma.devices": "8", "rdma.usable-devices": "8",
                     "rdma.infiniband": "true", "gpu-nic.worst-link": "PIX",
                     "nccl.transport": "ib"},
    "irdma": {"rdma.usable": "true", "rdma.devices": "2", "rdma.usable-devices": "2",
              "rdma.roce": "true", "nccl.transport": "ib",
              "nccl.problem.gid-link-local": "true"},
    "cxgb4": {"rdma.usable": "true", "rdma.devices": "1", "rdma.usable-devices": "1",
              "rdma.iwarp": "true", "nccl.transport": "ib",
              "nccl.problem.gid-unsuitable": "true"},
    # the SMI device is no verbs device: not usable, and no problem either
    "smi": {"rdma.usable": "true", "rdma.devices": "2", "rdma.usable-devices": "1",
            "rdma.infiniband": "true", "nccl.transport": "ib"},
    # EFA: NCCL reaches it through aws-ofi-nccl (its link layer is Unknown to NET/IB)
    "efa": {"rdma.usable": "true", "rdma.devices": "32", "rdma.usable-devices": "32",
            "nccl.transport": "ofi"},
    "empty": {"rdma.usable": "false", "rdma.devices": "0", "rdma.usable-devices": "0",
              "rdma.problem.no-kernel-support": "true", "nccl.transport": "socket"},
}


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_labels_of_known_fixtures(fixture: str) -> None:
    """The labels NFD would set on known hosts (rdma.cm is false on a recording: it has
    no class/misc; nccl.problem.*: the GID verdict nccl check gives the same ports)."""
    now = time.time()
    r = _read_ok(feature_file(_facts(fixture), expires_in=60, now=now).text(), now)
    assert _short(r.labels) == {**EXPECTED[fixture], "rdma.cm": "false"}


def test_irdma_usable_where_nfd_says_not_rdma_capable() -> None:
    """NFD's own rdma.capable is a PCI vendor 15b3 (Mellanox) rule: the Intel E810 host
    has no such device, and sysverbs labels it usable RoCE."""
    h = fixture_tree("irdma")
    pci = Path(os.fsdecode(h.sysfs)) / "bus" / "pci" / "devices"
    vendors = {(d / "vendor").read_text().strip() for d in pci.iterdir()}
    assert "0x15b3" not in vendors and "0x8086" in vendors
    r = _read_ok(feature_file(_facts("irdma"), expires_in=60).text(), time.time())
    assert r.labels[f"{NAMESPACE}/rdma.usable"] == "true"
    assert r.labels[f"{NAMESPACE}/rdma.roce"] == "true"


def test_a_host_without_dev_nodes(tmp_path: Path) -> None:
    """A broken host: one device without its /dev/infiniband node, one whose node is a
    plain file: nothing usable, each reason a label and a per-device feature."""
    root = build(tmp_path, host(rdma_dev("uverbs0", "mlx5_0", dev_node=False),
                                rdma_dev("uverbs1", "mlx5_1", pci="0000:08:00.0",
                                         dev="231:193\n")))
    facts = collect_facts(sysfs_path=str(root / "sys"), dev_dir=str(root / "dev/infiniband"),
                          providers="builtin", source="sysfs", rdma_core="44")
    now = time.time()
    r = _read_ok(feature_file(facts, expires_in=60, now=now).text(), now)
    labels = _short(r.labels)
    assert labels["rdma.problem.no-dev-node"] == "true"
    assert labels["rdma.problem.dev-node-wrong"] == "true"
    assert (labels["rdma.usable"], labels["rdma.usable-devices"]) == ("false", "0")
    assert labels["nccl.transport"] == "socket"
    features = _short(r.features)
    assert features["rdma.device.mlx5_0.problem.no-dev-node"] == "true"
    assert features["rdma.device.mlx5_0.usable"] == "false"
    assert "rdma.device.mlx5_1.problem.no-dev-node" not in features



@pytest.mark.parametrize("kind", CORRUPTIONS)
def test_broken_trees_give_a_file_nfd_reads(kind: str, tmp_path: Path) -> None:
    """Every file (or link) of the host's sysfs broken one way (tests/bad_input.py):
    still a file NFD reads whole, every key and value valid, every part reported."""
    h = build_host(tmp_path / "host")
    corrupt(h, kind)
    facts = collect_facts(sysfs_path=str(h.sysfs), dev_dir=str(h.dev), providers="builtin",
                          source="sysfs")
    now = time.time()
    r = _read_ok(feature_file(facts, expires_in=60, now=now).text(), now)
    for key, value in r.features.items():
        assert documented_key(key) and nfd_allows(key) and documented_value(value), key
    assert {k.split("/")[1] for k in r.labels} >= {"rdma.usable", "rdma.devices"} or \
        f"{NAMESPACE}/discovery.failed" in r.labels

def _device(name: str, usable: bool = True, reasons: tuple[str, ...] = ()) -> DeviceFacts:
    port = PortFacts(1, "InfiniBand", "ACTIVE", "", (("ib", 1), ("roce_v1", 0), ("roce_v2", 0)))
    return DeviceFacts(name, usable, usable, reasons, "mlx5", "CA", "0" * 16, "mlx5_core",
                       "0000:01:00.0", "pci0000:00", "0", (port,))


def _host(devices: list[DeviceFacts]) -> HostFacts:
    ok = tuple(CollectorResult(n, True, 0.0) for n in ("discovery", "topology", "nccl"))
    return HostFacts("0", "44", "/sys", False, tuple(devices), (), True, 1e9, (), (), (),
                     (), "ib", ok)


def test_invalid_names_are_left_out_with_the_reason() -> None:
    """A device name that makes no valid key (a space, 70 characters, not ASCII, a '/') is
    left out, said in ``dropped``; the others and the host labels stay."""
    names = ["mlx5_0", "bad name", "x" * 70, "caf\u00e9", "a/b"]
    ff = feature_file(_host([_device(n) for n in names]), expires_in=60)
    r = _read_ok(ff.text(), time.time())
    assert _short(r.labels)["rdma.devices"] == "5"
    keys = {k for k in _short(r.features) if k.startswith("rdma.device.")}
    assert keys == {"rdma.device.mlx5_0.usable", "rdma.device.mlx5_0.provider"}
    assert len(ff.dropped) == 8
    for line, why in ff.dropped:
        assert ("name part" in why) != line.startswith(f"{NAMESPACE}/rdma.device.a/b"), why
    for key in r.features:
        assert documented_key(key)


def test_the_file_stays_under_nfds_limit() -> None:
    """2,000 devices: the per-device lines past 64 KiB are left out (said), the labels
    all stay, NFD reads the file."""
    devices = [_device(f"mlx5_{i}", usable=i % 2 == 0, reasons=() if i % 2 == 0 else
                       ("dev_node_access",)) for i in range(2000)]
    ff = feature_file(_host(devices), expires_in=60)
    data = ff.text().encode()
    assert MAX_FILE_SIZE - 200 < len(data) <= MAX_FILE_SIZE
    r = _read_ok(ff.text(), time.time())
    assert _short(r.labels)["rdma.usable-devices"] == "1000"
    assert _short(r.labels)["rdma.problem.dev-node-access"] == "true"
    assert ff.dropped and all("65536 bytes" in why for _, why in ff.dropped)


def test_a_failed_part_leaves_its_labels_out() -> None:
    facts = _host([_device("mlx5_0")])
    failed = replace(facts, collectors=(CollectorResult("discovery", False, 0.0, "OSError"),
                                        *facts.collectors[1:]))
    r = _read_ok(feature_file(failed, expires_in=60).text(), time.time())
    assert _short(r.labels) == {"discovery.failed": "true", "nccl.transport": "ib"}
    assert set(r.features) == set(r.labels)


def test_expiry_is_now_plus_the_time_given() -> None:
    """The expiry directive is ``now + expires_in`` (whole seconds, rounded up), in
    RFC 3339; NFD drops every line once it is past."""
    facts = _host([_device("mlx5_0")])
    for now, expires_in in ((1_000_000_000.25, 180.0), (0.0, 3 * 0.2), (86400.0, 600.0)):
        ff = feature_file(facts, expires_in=expires_in, now=now)
        r = _read_ok(ff.text(), now)
        assert r.expiries == [float(-(-(now + expires_in) // 1))]
        assert r.expiries[0] >= now + expires_in
        late = nfd_read(ff.text().encode(), r.expiries[0] + 1)
        assert late is not None and late.labels == {} and late.skipped == len(ff.features)
    assert feature_file(facts, expires_in=180, now=0).expiry_time == "1970-01-01T00:03:00Z"


# --------------------------------------------------------------------------- writing

def test_write_is_atomic_and_leaves_no_dot_file(tmp_path: Path) -> None:
    """Written as a dot file, renamed to sysverbs: a reader that keeps reading while the
    file is rewritten always finds one whole file, and no dot file is left."""
    facts = _facts("gpu-dgx-b200")
    texts = [feature_file(facts, expires_in=60 + i).text() for i in range(2)]
    write_feature_file(str(tmp_path), texts[0])
    stop = threading.Event()
    seen: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            seen.append((tmp_path / "sysverbs").read_text())

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(300):
            path = write_feature_file(str(tmp_path), texts[i % 2])
    finally:
        stop.set()
        t.join()
    assert path == str(tmp_path / "sysverbs")
    assert seen and set(seen) <= set(texts)
    assert sorted(os.listdir(tmp_path)) == ["sysverbs"]
    assert (tmp_path / "sysverbs").stat().st_mode & 0o777 == 0o644  # NFD may run as another user


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        write_feature_file(str(tmp_path / "missing"), "a=b\n")
    (tmp_path / "sysverbs").mkdir()  # the rename fails: the dot file goes
    with pytest.raises(OSError):
        write_feature_file(str(tmp_path), "a=b\n")
    assert sorted(os.listdir(tmp_path)) == ["sysverbs"]


# ----------------------------------------------------------------- the command line

def _sv(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    env.pop("NCCL_IB_HCA", None)
    return subprocess.run([sys.executable, "-m", "sysverbs", "nfd", *argv],
                          capture_output=True, text=True, timeout=120, env=env, **kw)


@pytest.mark.parametrize("extra,expires_in", [(("--interval", "30"), 90), ((), 600)])
def test_once_writes_the_file_expiring_as_said(tmp_path: Path, extra: tuple[str, ...],
                                               expires_in: int) -> None:
    """--once: 3 x --interval from the write, else 10 minutes; the file alone is left."""
    before = time.time()
    p = _sv("--fixture", "gpu-hgx-h100", "--features-dir", str(tmp_path), "--once", *extra)
    after = time.time()
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert sorted(os.listdir(tmp_path)) == ["sysverbs"]
    r = _read_ok((tmp_path / "sysverbs").read_text(), after)
    assert before + expires_in <= r.expiries[0] <= after + expires_in + 1
    assert _short(r.labels)["gpu-nic.worst-link"] == "PIX"


def test_stdout_and_json(tmp_path: Path) -> None:
    text = _sv("--fixture", "rxe")
    assert text.returncode == 0 and text.stdout.startswith("# +expiry-time=")
    doc = json.loads(_sv("--fixture", "rxe", "--json").stdout)
    assert doc["text"].split("\n", 1)[1] == text.stdout.split("\n", 1)[1]
    assert doc["path"] is None and doc["dropped"] == []
    assert doc["labels"] == _read_ok(doc["text"], time.time()).labels
    written = json.loads(_sv("--fixture", "rxe", "--json", "--once", "--features-dir",
                             str(tmp_path)).stdout)
    assert written["path"] == str(tmp_path / "sysverbs") and "text" not in written


def test_it_rewrites_until_sigterm(tmp_path: Path) -> None:
    """--features-dir without --once: a new file every --interval (a new inode each time:
    a rename), one JSON line per write, SIGTERM ends it with 0 and no dot file."""
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-m", "sysverbs", "nfd", "--fixture", "rxe",
                             "--features-dir", str(tmp_path), "--interval", "0.2", "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        inodes: set[int] = set()
        deadline = time.monotonic() + 60
        while len(inodes) < 3 and time.monotonic() < deadline:
            try:
                inodes.add((tmp_path / "sysverbs").stat().st_ino)
            except FileNotFoundError:
                pass
            time.sleep(0.02)
        assert len(inodes) >= 3
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (0, "")
    docs = [json.loads(line) for line in out.splitlines()]
    assert len(docs) >= 3 and all(d["path"] == str(tmp_path / "sysverbs") for d in docs)
    assert sorted(os.listdir(tmp_path)) == ["sysverbs"]
    r = _read_ok((tmp_path / "sysverbs").read_text(), time.time() - 1)
    assert r.expiries[0] - time.time() <= 0.6 + 1  # 3 x 0.2 s, rounded up to a second


def test_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    p = _sv("--fixture", "rxe", "--features-dir", str(missing), "--once", "--json")
    assert p.returncode == 1
    assert p.stderr == f"sysverbs nfd: error: --features-dir {missing}: not a directory\n"
    assert json.loads(p.stdout)["error"]["kind"] == "os-error"
    for bad in ("0", "-1", "nan", "inf", "x"):
        p = _sv("--fixture", "rxe", "--interval", bad)
        assert p.returncode == 2 and p.stdout == "", bad
        assert p.stderr.splitlines()[-1].startswith("sysverbs nfd: error: "), p.stderr
