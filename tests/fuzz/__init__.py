"""Differential fuzzing of sysverbs against the real libibverbs (issue #3, docs/reliability.md).

* :mod:`tests.fuzz.model`: a generated case (a tree, a plan of steps, the
  environment) and how to build it on disk with fixed timestamps;
* :mod:`tests.fuzz.strategies`: Hypothesis strategies that generate cases;
* :mod:`tests.fuzz.probe`: runs a plan with one implementation in one process;
* :mod:`tests.fuzz.zygote`: the fork server that starts each probe as a fresh
  process in its own mount namespace;
* :mod:`tests.fuzz.runner`: builds a case, runs both implementations, compares;
* :mod:`tests.fuzz.profiles`: the ``ci`` and ``deep`` Hypothesis profiles, seeds,
  progress;
* :mod:`tests.fuzz.regressions`: every difference found so far, as a named case;
* :mod:`tests.fuzz.campaign`: a command that runs N examples and collects every
  difference instead of stopping at the first.
"""
