"""The path of ``import sysverbs`` and of its first call (kept under the 15 ms budget
that tests/test_layout.py guards): the API functions, ``Device``, the options, the
process-wide list state, libibverbs' messages, the C parsing helpers, the bounded
sysfs reader and the device records.  Nothing here is public by its module path:
use the names :mod:`sysverbs` exports."""
