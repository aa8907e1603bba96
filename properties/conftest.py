"""Wherever the properties run from (this checkout, or ``pytest --pyargs peakproof.properties`` in a
team's repository), they run under the profile ``HYPOTHESIS_PROFILE`` names (:mod:`peakproof.profiles`)."""

from peakproof.profiles import load_profile

load_profile()
