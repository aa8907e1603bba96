"""One module per case: driver protocol and drivers, workload, checks."""
