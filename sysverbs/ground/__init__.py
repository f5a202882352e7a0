"""The ground layer: what every other layer stands on, importing nothing else of the
package (tests/test_layout.py).  The bounded sysfs reader with libibverbs' read rules
(:mod:`~sysverbs.ground.sysfs_read`), the device records
(:mod:`~sysverbs.ground.records`), libibverbs' messages
(:mod:`~sysverbs.ground.messages`), the errors and warnings
(:mod:`~sysverbs.ground.errors`), the node and transport types
(:mod:`~sysverbs.ground.enums`) and text helpers (:mod:`~sysverbs.ground.text`).
Its package holds the version, so that every layer can name it."""

__version__ = "0.1.0"
