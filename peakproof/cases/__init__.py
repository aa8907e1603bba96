"""One package per case, each with the same modules in the same roles:

* ``driver.py``: the case's driver ``Protocol``, its in-process driver (on
  :class:`peakproof.driver.InProcessDriver`) and its HTTP driver (on
  :class:`peakproof.driver.HttpDriver`);
* ``workload.py``: the seed's workload as a class with ``describe()``;
* ``checks.py``: the invariants, pure functions of one analysis type, and ``check_<case>``.

Each package's ``__init__`` re-exports them and names ``PROTOCOL``, ``IN_PROCESS`` and
``OVER_HTTP`` for the property fixtures (:class:`peakproof.pytest_plugin.Target`).
"""
