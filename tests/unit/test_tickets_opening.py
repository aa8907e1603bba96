"""The full opening of Case T, in process, at seed scale (BS1-BS3): 200,000 requests in 10 s."""

from __future__ import annotations


from peakproof.cases.tickets import InProcessTickets, OpeningWorkload, check_tickets, replay_opening
from peakproof.history import OK
def test_the_seed_scale_opening_sells_exactly_the_quota_and_locks_only_before_sell_out() -> None:
    workload = OpeningWorkload()  # 5,000 quota, 200,000 requests, 60% ask 1 and 40% ask 2
    driver = InProcessTickets()
    quota, history = replay_opening(driver, workload)
    reserves = history.of("reserve")
    assert len(reserves) == workload.requests
    final = history.ops[-1].value
    assert final["held"] + final["sold"] == workload.quota and final["available"] == 0

    results = {r.name: r for r in check_tickets(history, driver.tolerance)}
    assert not any(r.failed for r in results.values()), [r.summary() for r in results.values()]
    for name in ("no_oversell", "no_valid_rejection", "stock_is_conserved"):  # what the opening alone can break
        assert results[name].valid is True and results[name].chances, results[name].summary()
    assert results["no_oversell"].counts["oversold_units"] == 0
    assert results["no_valid_rejection"].counts["violations"] == 0

    # The quota row's lock is taken at most once per request that arrived before sell-out;
    # every later request is refused on the fast path.
    last_ok = max(i for i, op in enumerate(reserves) if op.type == OK)
    before_sell_out = last_ok + 1
    locks = driver.core.lock_acquisitions(quota)
    print(f"\nrequests before sell-out {before_sell_out:,}; lock acquisitions {locks:,}; "
          f"fast rejections {driver.core.stats.fast_rejections:,}")
    assert locks <= before_sell_out
    assert driver.core.stats.fast_rejections >= workload.requests - before_sell_out
    # the seed's arithmetic: quota / mean items per request = 3,571 requests (BS1 / BS3)
    assert abs(before_sell_out - workload.quota / (workload.p_single + 2 * (1 - workload.p_single))) < 150
