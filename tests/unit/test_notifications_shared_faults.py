"""The URL properties' examples overlap (an example's end is judged by a finisher while the next runs), so the
providers' faults of one property live in one place: an example's reset keeps what earlier examples still have in
force (their lanes, their dead addresses), and a lane's end or a revived address touches nothing else."""

from __future__ import annotations

from typing import Any

from peakproof.history import OK, History
from peakproof.cases.notifications.properties_lanes import SharedFaults


class Simulator:
    """Stands for the providers' client: what PUT / POST /config would leave the simulator with."""

    def __init__(self) -> None:
        self.model: dict[str, Any] = {"lanes": {}, "dead": {}}
        self.history = History(clock=lambda: 0.0)

    def config(self, *, replace: bool = True, **change: Any) -> Any:
        if replace:
            self.model = {"lanes": {}, "dead": {}}
        for key, value in change.items():
            if key == "lanes":
                for prefix, lane in value.items():
                    if lane:
                        self.model["lanes"][prefix] = lane
                    else:
                        self.model["lanes"].pop(prefix, None)
            else:
                self.model[key] = value
        return self.history.complete(self.history.invoke("harness", "provider_config", change), OK, dict(self.model))


def test_an_example_s_reset_keeps_the_lanes_and_dead_addresses_earlier_examples_still_have() -> None:
    sim, shared = Simulator(), SharedFaults()
    assert shared.lane(sim, "run1-l0-", {"down": ["push", "sms", "email"]})
    assert shared.kill(sim, "run1-", "sms", ["+90555"])
    shared.reset(sim, "run2-")  # the next example starts while run1's finisher waits
    assert sim.model["lanes"] == {"run1-l0-": {"down": ["push", "sms", "email"]}}
    assert sim.model["dead"] == {"sms": ["+90555"]}
    assert shared.lane(sim, "run1-l0-", None)  # run1's timed fault ends
    assert sim.model["lanes"] == {}
    shared.reset(sim, "run3-")
    assert sim.model["lanes"] == {} and sim.model["dead"] == {"sms": ["+90555"]}


def test_a_revived_address_lives_again_and_no_other_address_does() -> None:
    sim, shared = Simulator(), SharedFaults()
    shared.kill(sim, "run1-", "sms", ["+1", "+2"])
    shared.kill(sim, "run2-", "sms", ["+3"])
    assert shared.revive(sim, "run1-", "sms", "+2")
    assert sorted(sim.model["dead"]["sms"]) == ["+1", "+3"]
    assert shared.revive(sim, "run1-", "sms", "+9")  # never dead: nothing changes
    assert sorted(sim.model["dead"]["sms"]) == ["+1", "+3"]
