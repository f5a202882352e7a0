"""The engine: libibverbs' device list over the sources and providers below it.  The
API functions and the options (:mod:`~sysverbs.engine.api`), which source a call reads
and the process-wide list (:mod:`~sysverbs.engine.devlist`), ``Device`` and ``Context``
(:mod:`~sysverbs.engine.device`) and ``ibv_fork_init`` (:mod:`~sysverbs.engine.fork`).
This is the path of ``import sysverbs`` and of its first call (tests/test_layout.py
lists the modules it may load).  Use the names :mod:`sysverbs` exports."""
