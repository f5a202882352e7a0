"""Device fixtures in umockdev's recording format (the public name of
:mod:`sysverbs.testing.umockdev`, where the format is implemented and documented),
and :func:`materialize`, which writes one to disk.

>>> import tempfile
>>> from sysverbs import recording
>>> with tempfile.TemporaryDirectory() as tmp:
...     host = recording.materialize(recording.fixture_path("rxe"), tmp)
...     host.dev_nodes
('uverbs0', 'uverbs1')
"""

from __future__ import annotations

from .testing.host import (
    FIXTURE_DIR,
    FIXTURE_SUFFIX,
    Host,
    fixture_names,
    fixture_path,
    materialize,
)
from .testing.umockdev import (
    Attribute,
    Record,
    Recording,
    TreeEntry,
    class_file,
    dumps,
    escape,
    have_umockdev_run,
    load,
    parse,
    proc_file,
    umockdev_run_command,
    unescape,
)

__all__ = [
    "Attribute",
    "Host",
    "Record",
    "Recording",
    "TreeEntry",
    "class_file",
    "dumps",
    "escape",
    "fixture_names",
    "fixture_path",
    "have_umockdev_run",
    "load",
    "materialize",
    "parse",
    "proc_file",
    "umockdev_run_command",
    "unescape",
    "FIXTURE_DIR",
    "FIXTURE_SUFFIX",
]
