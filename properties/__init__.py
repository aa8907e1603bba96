"""The Hypothesis invariants of the three cases (a package so the quality suite can import the machines)."""
