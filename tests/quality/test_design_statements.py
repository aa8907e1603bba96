"""A product's own design, stated (peakproof.design), over HTTP: a served variant that differs from the seed by
design PASSes the URL properties with its design stated, and unstated says which statement would explain what
it found; no property waits past --max-wait for it."""

from __future__ import annotations

from tests.support.runs import excerpt, properties_against

from ..support.mutants import served
from .test_served_mutants import NOTIFICATIONS_RULES, NOTIFICATIONS_SERVED


def test_a_shop_whose_holds_never_lapse_passes_with_it_stated_and_unstated_waits_for_no_lapse() -> None:
    with served("tickets-holds-never-lapse") as t:
        code, out, record = properties_against(t.url, "tickets", "--holds-never-lapse")
        assert code == 0 and record["outcome"] == "PASS", excerpt(out)
        stated = [r for r in record["reasons"] if r.startswith("stated: --holds-never-lapse")]
        assert stated and "not checked: expired_hold_is_never_sold" in stated[0], record["reasons"]
        assert "not checked: expired_hold_is_never_sold, because you stated --holds-never-lapse" in out, excerpt(out)
        # unstated: its holds say they expire ten years on; the property that pays a lapsed hold would wait for
        # that, and is not run past --max-wait (before, it said "about 5256000.0 min" and hung)
        code, out, record = properties_against(t.url, "tickets", "--max-wait", "60")
    assert "past --max-wait (60 s)" in out and record["outcome"] != "FAIL", excerpt(out)


def test_a_service_with_no_breaker_fails_the_breaker_s_property_naming_the_statement_and_stated_it_is_not_run() -> None:
    from peakproof.launch import ServedTarget

    only = ("-k", "keeps_failing")  # the property that exists to make a breaker fall due
    with ServedTarget("providers", latency=0.02) as providers, \
            served("notifications-breaker-never-opens", provider_url=providers.base, **NOTIFICATIONS_SERVED) as t:
        base = (t.url, "notifications", "--provider-url", providers.base, *NOTIFICATIONS_RULES, *only)
        code, out, record = properties_against(*base)
        assert code == 1 and "breaker_opens_when_due: FAIL" in out, excerpt(out)
        assert "state --no-breaker" in out and "otherwise this is a finding" in out, excerpt(out)
        code, out, record = properties_against(*base, "--no-breaker")
    assert code != 1 and record["outcome"] != "FAIL", excerpt(out)
    assert "not checked: breaker_opens_when_due, because you stated --no-breaker" in out, excerpt(out)


def test_a_shop_with_two_bugs_fails_the_url_properties_naming_both_each_judged_on_its_own() -> None:
    """One bug does not hide another: once a check is found broken, the property goes on, that check left out
    (its first violation kept), and judges every other promise; --stop-at-first ends it at the first."""
    from tests.support.runs import failed_checks

    late = {"hold_honoured_until_it_expires", "units_return_exactly_once"}  # either states the early release
    with served("tickets-keys-on-request-id-alone+tickets-releases-holds-early") as t:
        code, out, record = properties_against(t.url, "tickets", "-k", "any_sequence", "--every-promise")
        broken = failed_checks(record)
        assert code == 1 and record["outcome"] == "FAIL", excerpt(out)
        assert "answers_belong_to_who_asked" in broken and broken & late, (broken, excerpt(out))
        assert "judged on its own once the promise above was found broken" in out, excerpt(out)
        code, out, record = properties_against(t.url, "tickets", "-k", "any_sequence")  # --stop-at-first
    assert code == 1 and "judged on its own once" not in out, excerpt(out)  # it ended at the first broken promise
