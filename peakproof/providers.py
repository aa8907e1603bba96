"""The push / SMS / e-mail provider simulator: the seed's failure model, and the ground truth.

Failures (seed BI5/BI6, times ``multiplier``): a *permanent* failure belongs to an
address (the same address always fails on that channel: a hash decides, seeded), a
*transient* one to a call (a seeded draw). A channel can be forced ``down`` (every call
fails transiently), calls can take ``latency`` seconds, and ``ack_lost`` is the share of
calls that deliver but whose answer never arrives (the caller sees a timeout).

Every accepted delivery is recorded once per (channel, idempotency key): a repeated call
with the same key is acknowledged again without a second delivery, the way real
providers' idempotency keys work. That record, not the target's own status, is what the
notification checks judge. Served over HTTP by ``peakproof serve providers``.
"""

from __future__ import annotations

import hashlib
import random
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

CHANNELS = ("push", "sms", "email")
OPENAPI_PATH = Path(__file__).with_name("providers_openapi.json")
TRANSIENT = {"push": 0.05, "sms": 0.02, "email": 0.01}  # BI5
PERMANENT = {"push": 0.06, "sms": 0.02, "email": 0.01}  # BI6


@dataclass
class ProviderConfig:
    """The simulator's whole failure model (``PUT /config`` replaces it, from the configuration the
    simulator was started with; ``POST /config`` changes some fields).

    ``dead``: addresses that always fail permanently on a channel (beyond the seeded share
    ``permanent`` x ``multiplier``): the nemesis kills a recipient's address this way.

    ``lanes``: faults for some recipients only, keyed by a prefix of their ids (the longest that
    matches wins): each lane's ``multiplier``, ``down``, ``ack_lost`` and ``latency`` replace the
    model's for calls to its recipients. The URL properties drive several independent groups of
    recipients (lanes) in one example, each with its own faults, so that their waits overlap.
    """

    multiplier: float = 1.0
    down: tuple[str, ...] = ()
    ack_lost: float = 0.0
    latency: float = 0.0
    seed: int = 20260730
    transient: dict[str, float] = field(default_factory=lambda: dict(TRANSIENT))
    permanent: dict[str, float] = field(default_factory=lambda: dict(PERMANENT))
    dead: dict[str, tuple[str, ...]] = field(default_factory=dict)
    lanes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"multiplier": self.multiplier, "down": list(self.down), "ack_lost": self.ack_lost,
                "latency": self.latency, "seed": self.seed, "transient": dict(self.transient),
                "permanent": dict(self.permanent), "dead": {c: list(a) for c, a in self.dead.items()},
                "lanes": {prefix: {**lane, **({"down": list(lane["down"])} if "down" in lane else {})}
                          for prefix, lane in self.lanes.items()}}

    def for_recipient(self, recipient_id: str) -> "ProviderConfig":
        """The model that answers a call to ``recipient_id``: its lane's faults over the rest (or the model)."""
        if not self.lanes:
            return self
        from dataclasses import replace

        prefix = max((p for p in self.lanes if recipient_id.startswith(p)), key=len, default=None)
        return self if prefix is None else replace(self, **self.lanes[prefix], lanes={})

    def updated(self, doc: Any) -> "ProviderConfig":
        """This configuration with ``doc``'s fields applied; ValueError / TypeError say what is wrong."""
        from dataclasses import replace

        if not isinstance(doc, dict):
            raise TypeError(f"the configuration must be a JSON object; got {type(doc).__name__}")
        unknown = sorted(set(doc) - set(self.to_json()))
        if unknown:
            raise ValueError(f"unknown field(s) {', '.join(unknown)}; expected some of {', '.join(self.to_json())}")
        out = replace(self)
        for k in ("multiplier", "ack_lost", "latency"):
            if k in doc:
                v = float(doc[k])
                if v < 0 or (k == "ack_lost" and v > 1):
                    raise ValueError(f"{k} must be >= 0{' and <= 1' if k == 'ack_lost' else ''}; got {doc[k]!r}")
                setattr(out, k, v)
        if "seed" in doc:
            out.seed = int(doc["seed"])
        if "down" in doc:
            out.down = tuple(_channels(doc["down"], "down"))
        for k in ("transient", "permanent"):
            if k in doc:
                rates = doc[k]
                if not isinstance(rates, dict) or set(rates) - set(CHANNELS):
                    raise ValueError(f"{k} must map channels ({', '.join(CHANNELS)}) to rates; got {rates!r:.80}")
                setattr(out, k, {**getattr(self, k), **{c: float(r) for c, r in rates.items()}})
        if "dead" in doc:
            dead = doc["dead"]
            if not isinstance(dead, dict):
                raise TypeError(f"dead must map channels to lists of addresses; got {dead!r:.80}")
            _channels(list(dead), "dead")
            out.dead = {c: tuple(str(a) for a in addresses) for c, addresses in dead.items()}
        if "lanes" in doc:
            out.lanes = dict(self.lanes)
            for prefix, lane in _lanes(doc["lanes"]):
                if lane:
                    out.lanes[prefix] = lane
                else:  # null or {}: the lane's faults end, its recipients answer as everyone's
                    out.lanes.pop(prefix, None)
        return out


LANE_FAULTS = ("multiplier", "down", "ack_lost", "latency")


def _lanes(value: Any) -> list[tuple[str, dict[str, Any]]]:
    """``lanes`` of a configuration change, checked: (prefix, its faults, parsed) pairs; an empty lane ends it."""
    if not isinstance(value, dict) or not all(isinstance(p, str) and p for p in value):
        raise TypeError(f"lanes must map recipient id prefixes to faults; got {value!r:.80}")
    out = []
    for prefix, doc in value.items():
        doc = doc or {}
        if not isinstance(doc, dict) or set(doc) - set(LANE_FAULTS):
            raise ValueError(f"lane {prefix!r}: expected some of {', '.join(LANE_FAULTS)} (or null to end it); "
                             f"got {doc!r:.80}")
        parsed = ProviderConfig().updated({k: v for k, v in doc.items()})
        out.append((prefix, {k: getattr(parsed, k) for k in doc}))
    return out


def _channels(value: Any, what: str) -> list[str]:
    if not isinstance(value, (list, tuple)) or any(c not in CHANNELS for c in value):
        raise ValueError(f"{what} must be a list of channels from {', '.join(CHANNELS)}; got {value!r:.80}")
    return list(value)


@dataclass(frozen=True)
class ProviderCall:
    channel: str
    idempotency_key: str
    event_id: str
    recipient_id: str
    to: str
    at: float
    outcome: str  # ok | transient | permanent | ack_lost (delivered, answer lost) | duplicate (already delivered)
    message: dict[str, Any]
    latency: float = 0.0  # s the answer took: beyond the caller's timeout it was never heard


class ProviderSim:
    """Thread-safe; ``clock`` is the time deliveries are stamped with (virtual or wall)."""

    def __init__(self, config: ProviderConfig | None = None, clock: Callable[[], float] = time.time) -> None:
        self.config = config or ProviderConfig()
        self.clock = clock
        self._rnd = random.Random(self.config.seed)
        self._mutex = threading.Lock()
        self.calls: list[ProviderCall] = []
        self.deliveries: dict[tuple[str, str], ProviderCall] = {}

    def permanently_fails(self, channel: str, address: str, config: ProviderConfig | None = None) -> bool:
        cfg = config or self.config
        if address in cfg.dead.get(channel, ()):
            return True
        rate = min(1.0, cfg.permanent[channel] * cfg.multiplier)
        digest = hashlib.blake2b(f"{cfg.seed}|{channel}|{address}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2**64 < rate

    def send(self, channel: str, to: str, idempotency_key: str, event_id: str, recipient_id: str,
             message: dict[str, Any], forced: str | None = None) -> str:
        """One provider call. Returns ok | transient | permanent | ack_lost.

        ``forced`` replaces the failure model's draw (a property test decides the answer);
        deduplication by (channel, key) applies either way.
        """
        return self.call(channel, to, idempotency_key, event_id, recipient_id, message, forced)[0]

    def answered(self, index: int, took: float) -> None:
        """The answer to call ``index`` left after ``took`` s: its record's latency is what the caller waited
        at least, never less than the configured delay (a served simulator whose event loop was busy answers
        later than it slept; a caller that gave up meanwhile never heard it, and the checks must know)."""
        with self._mutex:
            c = self.calls[index]
            if took > c.latency:
                self.calls[index] = replace(c, latency=round(took, 6))

    def call(self, channel: str, to: str, idempotency_key: str, event_id: str, recipient_id: str,
             message: dict[str, Any], forced: str | None = None) -> tuple[str, int]:
        """:meth:`send`, and the call's index in the record (for :meth:`answered`)."""
        if channel not in CHANNELS:
            raise ValueError(f"channel must be one of {', '.join(CHANNELS)}; got {channel!r}")
        cfg = self.config.for_recipient(recipient_id)
        with self._mutex:
            now = self.clock()
            prior = self.deliveries.get((channel, idempotency_key))
            if prior is not None:
                outcome = "duplicate"
            elif forced is not None:
                outcome = forced
            elif channel in cfg.down:
                outcome = "transient"
            elif self.permanently_fails(channel, to, cfg):  # a dead address always answers so (the seed's order)
                outcome = "permanent"
            elif self._rnd.random() < min(1.0, cfg.transient[channel] * cfg.multiplier):
                outcome = "transient"
            else:
                outcome = "ack_lost" if cfg.ack_lost and self._rnd.random() < cfg.ack_lost else "ok"
            call = ProviderCall(channel, idempotency_key, event_id, recipient_id, to, now, outcome, message,
                                cfg.latency)
            self.calls.append(call)
            index = len(self.calls) - 1
            if outcome in ("ok", "ack_lost"):
                self.deliveries[(channel, idempotency_key)] = call
        return ("ok" if outcome == "duplicate" else outcome), index

    def record(self) -> dict[str, Any]:
        """The ground truth as plain data (what ``GET /calls`` serves)."""
        with self._mutex:
            return {"calls": [c.__dict__ for c in self.calls]}


# -- served over HTTP ------------------------------------------------------------------------


def provider_app(sim: ProviderSim, timeout_for_lost_acks: float = 30.0) -> Any:
    """A raw ASGI app: POST /{push|sms|email}, GET /calls, GET/PUT/POST /config, GET /openapi.json,
    GET /health (the contract: ``peakproof/providers_openapi.json``)."""
    import asyncio
    import json

    started_with = replace(sim.config)  # what PUT /config resets to (the options it was served with)

    async def app(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "lifespan":
            while True:
                m = await receive()
                if m["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif m["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            m = await receive()
            body += m.get("body", b"")
            if not m.get("more_body"):
                break
        path, method = scope["path"].rstrip("/"), scope["method"]
        status, doc = 404, {"error": "not_found", "message": f"no route {method} {path}"}
        if method == "GET" and path == "/health":
            status, doc = 200, {"status": "ok"}
        elif method == "GET" and path == "/calls":
            # off the event loop: thousands of calls take tens of ms to encode, and answers in flight meanwhile
            # left late (a caller's timeout fired on an answer the record said took 0.1 s: a false FAIL)
            data = await asyncio.to_thread(lambda: json.dumps(sim.record()).encode())
            await _answer(send, 200, data)
            return
        elif method == "GET" and path == "/openapi.json":
            status, doc = 200, json.loads(OPENAPI_PATH.read_text(encoding="utf-8"))
        elif method == "GET" and path == "/config":
            status, doc = 200, sim.config.to_json()
        elif method in ("PUT", "POST") and path == "/config":
            # PUT replaces the whole failure model (what every run does first); POST changes some of it
            try:
                base = started_with if method == "PUT" else sim.config
                sim.config = base.updated(json.loads(body or b"{}"))
                status, doc = 200, sim.config.to_json()
            except (ValueError, TypeError) as e:
                status, doc = 400, {"error": "invalid_request", "message": f"{e}. Nothing was changed."}
        elif method == "POST" and path.lstrip("/") in CHANNELS:
            channel = path.lstrip("/")
            headers = dict(scope["headers"])
            try:
                req = json.loads(body)
                key = headers.get(b"idempotency-key", b"").decode() or req["idempotency_key"]
                outcome, index = sim.call(channel, req["to"], key, req["event_id"], req["recipient_id"],
                                          req["message"])
                arrived = time.monotonic()
            except (ValueError, KeyError, TypeError) as e:
                status, doc = 400, {"error": "invalid_request", "message": f"{type(e).__name__}: {e}"}
            else:
                if sim.calls[index].latency:  # as configured for its recipient
                    await asyncio.sleep(sim.calls[index].latency)
                if outcome == "ack_lost":  # delivered, but the answer never comes: the caller times out
                    await asyncio.sleep(timeout_for_lost_acks)
                    return
                status, doc = {"ok": (200, {"status": "delivered"}),
                               "transient": (503, {"error": "unavailable", "message": "try again"}),
                               "permanent": (422, {"error": "undeliverable", "message": "bad address"})}[outcome]
                took = time.monotonic() - arrived  # when the answer left: the caller waited at least this (timed
                await _answer(send, status, json.dumps(doc).encode())  # after the send, a descheduled server
                sim.answered(index, took)  # would record more than its caller waited); not what was configured
                return
        await _answer(send, status, json.dumps(doc).encode())

    return app


async def _answer(send: Callable, status: int, data: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]})
    await send({"type": "http.response.body", "body": data})
