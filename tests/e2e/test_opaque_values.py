"""What real services hand the harness: page cursors of any JSON type (the integer 2, a dict, a string),
the same cursor value for every reader's second page, times cut to milliseconds with the precision
stated (``tests/support/cursor_drivers.py`` over the correct example feed). Through ``driver check`` and
``peakproof run`` (the URL properties and a load): no harness error and no FAIL."""

from __future__ import annotations


from tests.support.runs import peakproof, service, verdict_of

from .test_examples import LOAD, REPORTS



DRIVER = "tests/support/cursor_drivers.py:PageNumbers"
RULES = ["--time-precision", "0.001", "--without", "inbox_size"]


def test_cursors_of_every_json_type_and_shared_values_and_millisecond_times_pass_a_correct_feed() -> None:
    with service("feed") as (url, options):
        check = peakproof("driver", "check", "feed", "--driver", DRIVER, "--target-url", url, *options, *RULES,
                          timeout=120)
        run = peakproof("run", "feed", "--driver", DRIVER, "--target-url", url, *options, *RULES, *LOAD["feed"],
                        "--report-dir", REPORTS)
    assert check.returncode == 0 and "[NO ]" not in check.stdout, check.stdout + check.stderr
    assert "'next_cursor': 2" in check.stdout and "'next_cursor': {'page': 3}" in check.stdout, check.stdout
    verdict = verdict_of(run)
    assert "harness raised" not in run.stdout + run.stderr, verdict
    assert run.returncode == 0, verdict
    assert "rule: time precision (s): 0.001" in verdict, verdict
    assert "[ok] pages_do_not_skip_or_repeat" in verdict, verdict  # page turns were followed and judged
