"""The checkout's tests and properties run under the Hypothesis profile ``HYPOTHESIS_PROFILE`` names
(:mod:`peakproof.profiles`); the plugin itself (options, fixtures, verdict) comes by its pytest11 entry point."""

from peakproof.profiles import load_profile

load_profile()
