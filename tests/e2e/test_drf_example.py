"""The DRF-shaped shop (``examples/drfshop/``): a service shaped like the ones real teams run
(token auth on every call, errors nested in lists, ids it allocates, an idempotency header that
replays stored answers, an expiry job that sells a lapsed order until it runs), driven only
through its driver and every entry point: ``driver check``, ``peakproof run`` (the properties
and the load), ``locust -f loadtests/``. With the shop's stated rule (``--release-lag 3``) it
PASSes and the verdict lists the rules; with the seed's it FAILs naming
``expired_hold_is_never_sold``."""

from __future__ import annotations

import os
import subprocess
import sys


from tests.support.runs import ROOT, decided, locust_verdict, peakproof, started, verdict_of

from .test_examples import REPORTS



DRIVER = "examples/drfshop/driver.py:DrfShop"
TOKENS = ["--token", "buyer-token", "--admin-token", "admin-token"]
RULES = ["--release-lag", "3"]  # the shop's documented rule: lapsed orders are released within 3 s
LOAD = ["--scale", "0.02", "--calibrated-rate", "1000", "--hold-window", "0.3"]


def shop() -> object:
    return started("examples/drfshop/service.py", "--port", "0")


def test_the_drf_shop_driver_answers_every_call_as_the_harness_needs() -> None:
    with shop() as url:
        out = peakproof("driver", "check", "tickets", "--driver", DRIVER, "--target-url", url, *TOKENS, *RULES,
                        timeout=120)
    assert out.returncode == 0 and "[NO ]" not in out.stdout, out.stdout + out.stderr


def test_a_driver_that_maps_sold_out_to_another_code_fails_driver_check_naming_it() -> None:
    with shop() as url:
        out = peakproof("driver", "check", "tickets", "--driver", "tests/support/wrong_code_driver.py:SoldOutAsInvalid",
                        "--target-url", url, *TOKENS, timeout=120)
    assert out.returncode == 1, out.stdout + out.stderr
    failed = [line for line in out.stdout.splitlines() if "[NO ]" in line]
    assert failed and "1 unit left" in failed[0], out.stdout
    assert "map your sold-out answer to 'sold_out'" in out.stdout, out.stdout


def test_the_drf_shop_passes_its_load_with_its_rule_stated_and_the_verdict_lists_the_rules() -> None:
    with shop() as url:
        out = peakproof("run", "tickets", "--driver", DRIVER, "--target-url", url, *TOKENS, *RULES, *LOAD,
                        "--skip-properties", "--report-dir", REPORTS)
    verdict = verdict_of(out)
    assert out.returncode == 0 and "[ok] load scenario" in out.stdout, verdict
    assert "rule: release lag (s): 3" in verdict and "rule: retries under one idempotency key" in verdict, verdict
    assert "[ok] expired_hold_is_never_sold" in verdict  # decided: late payments came after the stated lag


def test_the_drf_shop_passes_the_properties_with_its_rule_stated_and_they_list_the_rules() -> None:
    with shop() as url:
        out = subprocess.run([sys.executable, "-m", "pytest", "properties/test_tickets.py", "-q", "-p",
                              "no:cacheprovider", "-k", "any_sequence", "--driver", DRIVER, "--target-url", url,
                              *TOKENS, *RULES], cwd=ROOT, capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, HYPOTHESIS_PROFILE="ci"))
    # the ci profile, as a team's CI runs it: derandomized, so every run draws the same steps. The dev
    # profile draws afresh, and in about 1 run in 4 its 12 examples gave one check no chance (exit 6,
    # INCONCLUSIVE by chance: the check named changes from run to run)
    text = out.stdout + out.stderr
    assert out.returncode == 0 and "1 passed" in text, text[-4000:]
    assert "tickets: release lag (s): 3" in text, text[-4000:]


def test_the_drf_shop_fails_expired_hold_is_never_sold_by_the_seeds_rule() -> None:
    # The shop's job (every 2 s) sells a lapsed order until it runs. The opening's holds lapse together (one
    # tick decides all their late payments), but the late wave pays late for holds whose lapses lie 0.2 s
    # apart across 2 s: some payment always comes before the job's next tick. One run, no retry.
    with shop() as url:
        out = peakproof("run", "tickets", "--driver", DRIVER, "--target-url", url, *TOKENS, *LOAD,
                        "--skip-properties", "--report-dir", REPORTS)
    verdict = verdict_of(out)
    assert out.returncode == 1, verdict
    assert "[FAIL] expired_hold_is_never_sold" in verdict, verdict
    assert "--release-lag" in verdict  # the finding says which rule would state the shop's lag


def test_the_drf_shop_through_locust_with_its_rule_stated_passes() -> None:
    with shop() as url:  # undecided for a neighbour's CPU (the suite's own load beside it): run again, as advised
        out = decided(lambda: subprocess.run(
            [sys.executable, "-m", "locust", "-f", "loadtests/", "--headless", "--scenario", "tickets-opening",
             "--host", url, "--driver", DRIVER, *TOKENS, *RULES, "--scale", "0.02", "--report-dir", REPORTS],
            cwd=ROOT, capture_output=True, text=True, timeout=300))
    text = out.stdout + out.stderr
    assert out.returncode == 0, locust_verdict(out)
    assert "release lag" in text, text[-4000:]
