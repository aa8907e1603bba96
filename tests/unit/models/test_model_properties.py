"""Properties the model ports must have for any assumptions, not only the seed's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from peakproof.models.feed import FeedParams, compute as feed_compute
from peakproof.models.notifications import NotificationsParams, channel_order
from peakproof.models.tickets import TicketsParams, contention

small_tickets = st.builds(TicketsParams, quota=st.integers(0, 60), requests=st.integers(0, 120),
                          workers=st.integers(1, 6), retry_budget=st.integers(0, 4),
                          p_single=st.floats(0, 1), seed=st.integers(0, 2**32 - 1))


@given(small_tickets)
def test_pessimistic_locking_never_oversells_nor_refuses_a_request_it_could_serve(p: TicketsParams) -> None:
    r = contention(p, "pessimistic")
    assert r["oversell"] == 0 and r["rejected_valid"] == 0
    assert r["sold"] + r["stock_left"] == p.quota


@given(small_tickets)
def test_optimistic_locking_never_oversells(p: TicketsParams) -> None:
    r = contention(p, "optimistic")
    assert r["oversell"] == 0 and r["stock_left"] >= 0 and r["sold"] + r["stock_left"] == p.quota


@given(small_tickets)
def test_only_the_unprotected_discipline_can_oversell_and_it_never_waits(p: TicketsParams) -> None:
    r = contention(p, "unprotected")
    assert r["conflicts"] == 0 and r["wait_steps"] == 0
    assert r["oversell"] == max(0, r["sold"] - p.quota)


@given(n=st.integers(1, 400), budget=st.integers(0, 5), seed=st.integers(1, 2**31), m=st.floats(0, 5),
       down=st.sampled_from([None, "push", "sms", "email"]))
def test_channel_orders_spend_the_budget_as_the_seed_says(n: int, budget: int, seed: int, m: float,
                                                          down: str | None) -> None:
    p = NotificationsParams(notifications=n, budget=budget, seed=seed)
    par = channel_order(p, "parallel", m, down)
    assert par["calls"] == budget * n  # parallel sends every call without waiting
    for order in ("single", "cascade"):
        r = channel_order(p, order, m, down)
        assert r["duplicates"] == 0 and r["calls"] <= budget * n
        assert r["delivered"] <= r["calls"]


@given(users=st.integers(10, 3_000), exponent=st.floats(0.5, 3), base=st.integers(1, 80), seed=st.integers(1, 2**31 - 2))
def test_the_hybrid_table_is_monotone_in_the_threshold(users: int, exponent: float, base: int, seed: int) -> None:
    r = feed_compute(FeedParams(users=users, pareto_exponent=exponent, pareto_base=base, seed=seed,
                                thresholds=[1, 10, 100]))
    rows = sorted(r["hybrid"]["rows"], key=lambda x: x["threshold"])
    above = [x["accounts_above"] for x in rows]
    assert above == sorted(above, reverse=True)
    steady = r["hybrid"]["steady_fan_out"]
    for x in rows:  # every edge is either fanned out or merged at read time
        assert abs(x["write_work"] / r["fan_out_models"]["peak_posts_per_s"]
                   + x["read_work"] / r["fan_out_models"]["peak_feed_requests_per_s"]
                   - r["fan_out_models"]["followers"]["mean"]) < 1e-6 * max(1.0, steady)
