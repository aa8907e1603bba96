"""Reference point for bench_engine.py: Locust's FastHttpUser in a closed loop, no wait.

Each user posts a reservation to a sold-out quota as fast as answers come back (the
seed's 196,429-request normal path). Not part of loadtests/: a closed loop is what the
open-model engine replaces; it is here only to measure against.
"""

import os
import uuid

from locust import constant, events, task
from locust.contrib.fasthttp import FastHttpUser

QUOTA = os.environ.get("BENCH_QUOTA", "bench-sold-out")


class ClosedLoop(FastHttpUser):
    wait_time = constant(0)

    @task
    def reserve(self) -> None:
        with self.client.post(f"/quotas/{QUOTA}/reservations", name="POST reserve", catch_response=True,
                              json={"buyer_id": "b", "quantity": 1, "request_id": uuid.uuid4().hex}) as r:
            if r.status_code == 409:
                r.success()
