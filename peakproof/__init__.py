"""peakproof: prove that a system design keeps its promises at its peak load."""

__version__ = "0.1.0"
