"""Differential fuzzing of sysverbs against the real libibverbs (issue #3).

* :mod:`tests.fuzz.model`: a generated case (a tree, a plan of steps, the
  environment) and how to build it on disk;
* :mod:`tests.fuzz.strategies`: Hypothesis strategies that generate cases;
* :mod:`tests.fuzz.probe`: the per-example probe (one fresh process per
  implementation per example);
* :mod:`tests.fuzz.runner`: runs both implementations on a case and compares;
* :mod:`tests.fuzz.regressions`: every difference found so far, as a named case.
"""
