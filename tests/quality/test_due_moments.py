"""Promises that come due (issue 36): a breaker the stated rules made due that never opened, and a
lapsed hold's units that came back late, FAIL naming the promise and the moment it fell due; the
reference, under the same rules, passes. Served variants over loopback, as a staging service."""

from __future__ import annotations

from pathlib import Path


from peakproof.cases import get_case
from peakproof.launch import ServedTarget

from ..support.mutants import served
from tests.support.runs import PropertiesRun, excerpt, failed_checks, load_against, properties_against, result



# The rules a user stated in issue 36: short rounds, the seed's breaker (24 transient failures in the last 200
# calls, 10 s before a probe), the answer timeout of the reference; 8 delivery workers, providers at 30 ms.
RULES = ("--backoff", "0.3", "--answer-timeout", "2", "--breaker-window", "200", "--breaker-failures", "24",
         "--breaker-cool-down", "10")
SERVED = dict(backoff=0.3, call_timeout=2.0, breaker_window=200, breaker_failures=24, breaker_cool_down=10.0,
              threads=8)


def breaker_property(mutant: str | None) -> PropertiesRun:
    with ServedTarget("providers", latency=0.03) as providers, \
            (served(mutant, provider_url=providers.base, **SERVED) if mutant else
             ServedTarget(get_case("notifications"), provider_url=providers.base, **SERVED)) as t:
        return properties_against(t.url, "notifications", "--provider-url", providers.base, *RULES,
                                  "-k", "breaker_is_due")


def test_a_breaker_that_never_opens_fails_the_property_naming_the_moment_it_fell_due() -> None:
    code, out, record = breaker_property("notifications-breaker-never-opens")
    assert code == 1 and "breaker_opens_when_due" in failed_checks(record), excerpt(out)
    assert "push's breaker open (" in out and "fell due at " in out and "went to it" in out, excerpt(out)


def test_the_reference_under_the_same_rules_opens_its_breaker_when_due() -> None:
    code, out, record = breaker_property(None)
    assert code == 0 and record["outcome"] == "PASS" and record["data"]["counts"]["passed"] == 1, excerpt(out)
    assert "breaker_opens_when_due: " in out, excerpt(out)  # the chances summary names it, with its moments


def test_a_breaker_that_never_opens_fails_the_push_down_load_and_its_report_lists_the_moments(tmp_path: Path) -> None:
    with ServedTarget("providers", latency=0.03) as providers, \
            served("notifications-breaker-never-opens", provider_url=providers.base, **SERVED) as t:
        code, doc, out = load_against(t.url, "notifications-push-down", tmp_path, "--scale", "0.1", "--duration", "8",
                                      "--time-scale", "30", "--provider-url", providers.base, *RULES)
    r = result(doc, "breaker_opens_when_due")
    assert code == 1 and r["valid"] is False and r["chances"] >= 1, excerpt(out)
    assert "fell due at" in r["first_violation"] and any(d["ended"] == "violated" for d in r["due"]), r
    html = (tmp_path / doc["html"]).read_text()
    assert "breaker_opens_when_due: moments it fell due" in html and "violated" in html
    print(f"\nnever-opens, push down: {r['chances']} due moments; {r['first_violation'][:300]}")


def test_a_shop_that_returns_lapsed_units_late_fails_naming_the_hold_and_when_its_units_fell_due() -> None:
    with served("tickets-returns-lapsed-units-late") as t:
        code, out, _ = properties_against(t.url, "tickets", "-k", "paid_after_it_lapsed")
    assert code == 1 and "units_return_exactly_once: FAIL" in out, excerpt(out)
    assert "units never returned; 1 lapsed holds' units were due back by then, the last: reservation " in out
    assert "its units due back at " in out and "by buyer 'ayse'" in out, excerpt(out)
