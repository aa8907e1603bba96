"""The Locust scenarios of the three cases (a package so an installed peakproof ships them as
``peakproof.loadtests``; Locust skips files starting with an underscore, so this one is no locustfile)."""
