"""A circuit breaker per channel, shared by every Celery worker process through Redis.

It opens at ``failures`` transient failures (a 503, a refused connection, an answer that never
came) among the channel's last ``window`` calls; a permanent answer (422: that address is dead)
says nothing about the channel and is not counted. Open, the channel is skipped for
``cool_down`` s; then one probe goes through (a Redis token, so two workers never probe at once):
its success closes the breaker, its failure opens it again.

(pybreaker's ``CircuitRedisStorage`` counts *consecutive* failures and takes an excluded exception,
our 422, as a success that resets its count: a dead address between two 503s would keep a sick
channel's breaker closed. A window of the last N calls in a Redis list, updated by one Lua script
per call, is what the team states to its tests: ``--breaker-window N --breaker-failures F``.)
"""

from __future__ import annotations

import logging
import time

import redis

log = logging.getLogger("beacon.breaker")

# KEYS: state hash, window list. ARGV: now. Returns 1 if a call may go to the channel now.
_ALLOWS = """
local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
local now = tonumber(ARGV[1])
if state == 'closed' then return 1 end
if state == 'open' then
  if now < tonumber(redis.call('HGET', KEYS[1], 'open_until') or '0') then return 0 end
  redis.call('HSET', KEYS[1], 'state', 'half_open', 'probe_until', 0)
end
-- half-open: one probe at a time (a probe that never reports back frees the token after a while)
if now < tonumber(redis.call('HGET', KEYS[1], 'probe_until') or '0') then return 0 end
redis.call('HSET', KEYS[1], 'probe_until', now + tonumber(ARGV[2]))
return 2
"""

# KEYS: state hash, window list. ARGV: failed (1; 0 an answer; -1 a 422: it answers a probe, it is not counted),
# window, failures, cool_down, now, probe (1: this call was the half-open breaker's probe).
_RECORD = """
local state = redis.call('HGET', KEYS[1], 'state') or 'closed'
local failed, now = tonumber(ARGV[1]), tonumber(ARGV[5])
if state == 'half_open' then
  if ARGV[6] ~= '1' then return 'unchanged' end  -- only the probe's own answer settles it
  redis.call('DEL', KEYS[2])
  if failed == 1 then
    redis.call('HSET', KEYS[1], 'state', 'open', 'open_until', now + tonumber(ARGV[4]))
    return 'reopened'
  end
  redis.call('HSET', KEYS[1], 'state', 'closed')
  return 'closed'
end
if state == 'open' or failed == -1 then return 'unchanged' end
redis.call('LPUSH', KEYS[2], failed)
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[2]) - 1)
local count = 0
for _, v in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do count = count + tonumber(v) end
if count >= tonumber(ARGV[3]) then
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[1], 'state', 'open', 'open_until', now + tonumber(ARGV[4]))
  return 'opened'
end
return 'unchanged'
"""


class Breakers:
    def __init__(self, client: redis.Redis, window: int, failures: int, cool_down: float, probe_hold: float) -> None:
        self.r, self.window, self.failures, self.cool_down, self.probe_hold = client, window, failures, cool_down, probe_hold
        self._allows = client.register_script(_ALLOWS)
        self._record = client.register_script(_RECORD)

    @staticmethod
    def _keys(channel: str) -> list[str]:
        return [f"beacon:breaker:{channel}", f"beacon:breaker:{channel}:window"]

    def allows(self, channel: str) -> int:
        """May a call go to ``channel`` now? 0 no, 1 yes, 2 yes as the half-open breaker's one probe."""
        answer = int(self._allows(keys=self._keys(channel), args=[time.time(), self.probe_hold]))
        if answer == 2:
            log.info("breaker %s: half-open, this call is its probe", channel)
        return answer

    def record(self, channel: str, outcome: str, probe: bool = False) -> str:
        """Tell the breaker a call's outcome (``ok``, ``transient``, ``unknown``; ``permanent`` is not
        counted, but answers a probe); what it did: opened, reopened, closed or unchanged."""
        failed = -1 if outcome == "permanent" else 1 if outcome in ("transient", "unknown") else 0
        done = self._record(keys=self._keys(channel),
                            args=[failed, self.window, self.failures, self.cool_down, time.time(), int(probe)])
        done = done.decode() if isinstance(done, bytes) else str(done)
        if done != "unchanged":
            log.info("breaker %s: %s (after a call that ended %s)", channel, done, outcome)
        return done
