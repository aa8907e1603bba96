"""Reference targets: each case's chosen design, implemented for real.

Import rule: nothing here imports from ``peakproof``, ``properties`` or ``loadtests``;
a target is a system under test, not part of the harness.
"""
