"""Case N's models: the back-of-envelope (``bildirim/olcek.mjs``) and the channel-order
model (``bildirim/dagitim.mjs``), ported.

The channel-order model draws from one LCG stream per run, always from its start, so the
stream is computed once and every run reads it by index (:class:`LazyStream`).
"""

from __future__ import annotations

from typing import Any

from .params import CHANNELS, NotificationsParams
from .common import LazyStream, fx, js_fixed, js_round, table

ORDERS = ("single", "parallel", "cascade")
DAY = 86_400


# -- bildirim/olcek.mjs ----------------------------------------------------------------------


def scale(p: NotificationsParams) -> dict[str, Any]:
    daily = p.recipients * p.per_recipient
    peak = daily / DAY * p.peak_factor
    channels, blended = [], 0.0
    for i, ch in enumerate(CHANNELS):
        left = p.permanent[i] + p.transient[i] ** p.budget
        blended += p.share[i] * left
        channels.append({"channel": ch, "share": p.share[i], "peak_calls_per_s": peak * p.share[i],
                         "transient": p.transient[i], "permanent": p.permanent[i], "left_after_budget": left})
    delivery = 1 - blended
    return {"daily": daily, "peak_per_s": peak, "gb_per_day": daily * p.record_bytes / 1e9, "channels": channels,
            "blended_left": blended, "single_channel_delivery": delivery,
            "passes_threshold": delivery >= p.threshold, "gap_points": (p.threshold - delivery) * 100,
            "undelivered_peak_per_s": peak * blended, "undelivered_per_day": js_round(daily * blended),
            "cascade_worst_s": (p.budget - 1) * p.backoff}


# -- bildirim/dagitim.mjs --------------------------------------------------------------------


def channel_order(p: NotificationsParams, order: str, multiplier: float = 1, down: str | None = None,
                  stream: LazyStream | None = None) -> dict[str, Any]:
    """One run of the seed's model: ``order`` spends the budget; returns its row."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {', '.join(ORDERS)}; got {order!r}")
    if down is not None and down not in CHANNELS:
        raise ValueError(f"down must be one of {', '.join(CHANNELS)}; got {down!r}")
    stream = stream or LazyStream(p.seed)
    values = stream.ensure(p.notifications * (4 + max(p.budget, 3)))
    share = p.share
    perm = [min(1.0, x * multiplier) for x in p.permanent]
    trans = [min(1.0, x * multiplier) for x in p.transient]
    down_i = CHANNELS.index(down) if down is not None else -1
    parallel, single = order == "parallel", order == "single"
    budget = p.budget
    pos = delivered = calls = duplicates = rounds_total = 0
    for _ in range(p.notifications):
        if pos + 16 > len(values):
            values = stream.ensure(len(values) + (1 << 18))
        u = values[pos]
        pos += 1
        preferred = 2
        for k in range(3):  # the last channel when the shares do not add up to u
            if u < share[k]:
                preferred = k
                break
            u -= share[k]
        failed = [False, False, False]
        for k in range(3):
            if k == down_i:
                failed[k] = True  # no draw for a channel that is down
            else:
                failed[k] = values[pos] < perm[k]
                pos += 1
        seq = (preferred, preferred, preferred) if single else (preferred,) + tuple(k for k in range(3) if k != preferred)
        reached, first_round = 0, -1
        for t in range(budget):
            calls += 1
            if t >= 3:  # the seed's order lists 3 channels; later calls reach none and draw nothing
                continue
            k = seq[t]
            if failed[k]:
                continue
            ok = values[pos] >= trans[k]
            pos += 1
            if ok:
                reached += 1
                if first_round < 0:
                    first_round = 0 if parallel else t
                if not parallel:
                    break
        if reached:
            delivered += 1
            rounds_total += first_round
            duplicates += reached - 1
    n = p.notifications
    return {"order": order, "multiplier": multiplier, "down": down, "delivered": delivered,
            "delivery_ratio": delivered / n, "calls": calls, "calls_per_notification": calls / n,
            "duplicates": duplicates, "mean_delivery_s": (rounds_total / delivered * p.backoff) if delivered else
            float("nan")}


def compute(p: NotificationsParams | None = None) -> dict[str, Any]:
    p = p or NotificationsParams()
    stream = LazyStream(p.seed)
    base = {o: channel_order(p, o, stream=stream) for o in ORDERS}
    sens = []
    for m in p.multipliers:
        row = {"multiplier": m}
        for o in ORDERS:
            row[o] = (base[o] if m == 1 else channel_order(p, o, m, stream=stream))["delivery_ratio"]
        sens.append(row)
    down = {o: channel_order(p, o, down=p.down, stream=stream) for o in ORDERS}
    single, parallel, cascade = base["single"], base["parallel"], base["cascade"]
    return {"params": p.describe(), "scale": scale(p), "orders": list(base.values()), "sensitivity": sens,
            "down": {"channel": p.down, "runs": list(down.values())},
            "derived": {"cascade_minus_single_points": (cascade["delivery_ratio"] - single["delivery_ratio"]) * 100,
                        "parallel_calls_ratio": parallel["calls"] / cascade["calls"],
                        "parallel_duplicates": parallel["duplicates"],
                        "parallel_extra_per_notification": parallel["duplicates"] / p.notifications,
                        "parallel_mean_delivery_s": parallel["mean_delivery_s"],
                        "cascade_mean_delivery_s": cascade["mean_delivery_s"],
                        "down_cascade_wasted_calls": down["cascade"]["calls"] - cascade["calls"]}}


def render(r: dict[str, Any]) -> str:
    p, sc, d = r["params"], r["scale"], r["derived"]
    out = ["Case N, notifications: back-of-envelope (bildirim/olcek.mjs)",
           f"  notifications per day   {sc['daily']:,.0f}",
           f"  peak notifications/s    {fx(sc['peak_per_s'], 2)}",
           f"  records per day         {js_fixed(sc['gb_per_day'], 2)} GB", "",
           table(["channel", "share", "peak calls/s", "transient", "permanent", f"left after {p['budget']} tries"],
                 [[c["channel"], js_fixed(c["share"], 2), fx(c["peak_calls_per_s"], 2), js_fixed(c["transient"], 2),
                   js_fixed(c["permanent"], 2), js_fixed(c["left_after_budget"], 6)] for c in sc["channels"]]), "",
           f"  {p['budget']} tries on one channel -> blended failure {js_fixed(sc['blended_left'], 6)}, "
           f"delivery {js_fixed(sc['single_channel_delivery'], 4)}",
           f"  threshold {js_fixed(p['threshold'], 4)} -> single channel "
           f"{'passes' if sc['passes_threshold'] else 'fails'}; gap {js_fixed(sc['gap_points'], 2)} points",
           f"  undelivered: {js_fixed(sc['undelivered_peak_per_s'], 2)}/s at peak, "
           f"{sc['undelivered_per_day']:,} per day",
           f"  cascade worst-case delivery = ({p['budget']} - 1) x {p['backoff']:g} s = {sc['cascade_worst_s']:g} s", "",
           f"Channel-order model (bildirim/dagitim.mjs): {p['notifications']:,} notifications, 3 channels, "
           f"budget {p['budget']}, seed {p['seed']}",
           table(["order", "delivery", "calls", "calls/notif", "duplicates", "mean delivery s"],
                 [[o["order"], js_fixed(o["delivery_ratio"], 4), f"{o['calls']:,}",
                   js_fixed(o["calls_per_notification"], 3), f"{o['duplicates']:,}",
                   js_fixed(o["mean_delivery_s"], 2)] for o in r["orders"]]), "",
           table(["failure multiplier"] + [f"{o} delivery" for o in ORDERS],
                 [[f"x{m['multiplier']:g}"] + [js_fixed(m[o], 4) for o in ORDERS] for m in r["sensitivity"]]), "",
           table([f"{r['down']['channel']} channel down"] + list(ORDERS),
                 [["delivery"] + [js_fixed(x["delivery_ratio"], 4) for x in r["down"]["runs"]],
                  ["calls"] + [f"{x['calls']:,}" for x in r["down"]["runs"]]]), "",
           f"  cascade - single delivery = {js_fixed(d['cascade_minus_single_points'], 2)} points",
           f"  parallel's price: calls x{js_fixed(d['parallel_calls_ratio'], 2)}, {d['parallel_duplicates']:,} "
           f"duplicate deliveries, {js_fixed(d['parallel_extra_per_notification'], 2)} extra per notification",
           f"  parallel's gain: mean delivery {js_fixed(d['parallel_mean_delivery_s'], 2)} s, cascade "
           f"{js_fixed(d['cascade_mean_delivery_s'], 2)} s",
           f"  with {r['down']['channel']} down, an open breaker saves the cascade "
           f"{d['down_cascade_wasted_calls']:,} calls (the down run's calls minus the normal run's)"]
    return "\n".join(out)
