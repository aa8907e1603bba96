"""What every case's drivers share: one way to turn a call into a completed operation.

A case's driver module (``peakproof/cases/<case>/driver.py``) holds a ``typing.Protocol``
of its operations and two drivers built on these bases:

* :class:`InProcessDriver` runs the reference core in virtual time; :meth:`_do` calls the
  core and completes the op: ok with the value, fail for the core's 4xx errors, info for
  its 5xx ones (the same rule the HTTP side follows).
* :class:`HttpDriver` drives any URL through a :class:`peakproof.http.Transport`;
  :meth:`_call` is the contract's operations, :meth:`side_call` the harness's own calls
  (admin, stats, the providers' record). Both go through the transport and are recorded,
  so a recorded or swapped transport sees everything; side calls carry the process
  :data:`SIDE` and the error budget leaves them out (they observe, they are not the load).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from .clock import VirtualClock
from .history import FAIL, INFO, OK, History, Op
from .http import RequestsTransport, Transport, call, json_object

SIDE = "harness"  # the process of the harness's side calls


class InProcessDriver:
    """Base of the in-process drivers: a virtual clock, a history on it, and :meth:`_do`.

    ``error`` is the target's error type; it carries ``status``, ``code`` and ``message``.
    """

    error: type[Exception] = Exception

    def __init__(self, clock: VirtualClock | None = None, history: History | None = None) -> None:
        self.clock = clock or VirtualClock()
        self.history = history if history is not None else History(self.clock)

    def now(self) -> float:
        return self.clock()

    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def _plugged(self, core: Any, core_factory: Callable[[VirtualClock], Any] | None) -> Any:
        """``core``, or one built by ``core_factory(clock)`` on this driver's clock (a quality test
        plugs a broken core this way), or None: the driver builds the reference."""
        if core is None and core_factory is not None:
            core = core_factory(self.clock)
        return core

    def _do(self, f: str, args: dict[str, Any], fn: Callable[[], Any], process: Any = 0,
            intended_time: float | None = None) -> Op:
        op = self.history.invoke(process, f, args, intended_time)
        try:
            value = fn()
        except self.error as e:
            status = getattr(e, "status", 500)
            return self.history.complete(op, FAIL if status < 500 else INFO, getattr(e, "code", "error"),
                                         getattr(e, "message", str(e)))
        return self.history.complete(op, OK, value)


class HttpDriver:
    """Base of the HTTP drivers: a base URL, a transport, a history in wall-clock time.

    ``session`` is a ``requests.Session``; ``transport`` any :class:`peakproof.http.Transport`
    (the load engine passes its ``GeventTransport`` over geventhttpclient). Outcomes follow
    :func:`peakproof.http.call`.
    """

    def __init__(self, base_url: str, *, session: Any = None, timeout: float = 5.0,
                 history: History | None = None, transport: Transport | None = None,
                 admin_token: str | None = None, slow_transport: Transport | None = None) -> None:
        self.base = base_url.rstrip("/")
        self._slow = slow_transport
        self.timeout = timeout
        self.transport: Transport = transport or RequestsTransport(session, timeout)
        self.history = history if history is not None else History(time.time)
        self.admin_token = admin_token
        self._admin = {"Authorization": f"Bearer {admin_token}"} if admin_token else None

    def now(self) -> float:
        return time.time()

    def advance(self, seconds: float) -> None:
        time.sleep(seconds)  # a URL runs in real time

    @property
    def slow_transport(self) -> Transport:
        """For the few calls that may take minutes (a bulk graph, a large record): 300 s."""
        if self._slow is None:
            self._slow = RequestsTransport(None, max(self.timeout, 300.0))
        return self._slow

    def _call(self, f: str, args: dict[str, Any], method: str, path: str, body: Any, parse: Callable[[Any], Any],
              *, process: Any = 0, intended_time: float | None = None, name: str | None = None,
              admin: bool = False, slow: bool = False) -> Op:
        """One operation of the contract, ``path`` under the base URL."""
        return call(self.history, self.slow_transport if slow else self.transport, f, args, method, self.base + path, body, process, parse,
                    intended_time=intended_time, headers=self._admin if admin else None, name=name or f)

    def side_call(self, f: str, method: str, url: str, body: Any = None, parse: Callable[[Any], Any] = json_object,
                  *, args: dict[str, Any] | None = None, admin: bool = False,
                  keep: Callable[[Any], Any] | None = None, slow: bool = False) -> tuple[Op, Any]:
        """A call of the harness's own (admin, stats, the providers), recorded under :data:`SIDE`.

        ``url`` is absolute (the providers live elsewhere). Returns (op, the parsed value or
        None); the history keeps ``keep(value)`` when given (the providers' record is large).
        ``slow``: through :attr:`slow_transport`.
        """
        op = call(self.history, self.slow_transport if slow else self.transport, f, args or {}, method, url, body, SIDE, parse,
                  headers=self._admin if admin else None, name=f)
        value = op.value if op.type == OK else None
        if keep is not None and op.type == OK:
            op.value = keep(value)
        return op, value


def load_driver(spec: str, protocol: type, **kwargs: Any) -> Any:
    """``package.module:ClassName`` -> an instance built with ``kwargs`` (e.g. base_url), checked
    against the case's driver ``protocol`` (a runtime-checkable ``typing.Protocol``)."""
    import importlib

    from .errors import DriverSpecError

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise DriverSpecError("--driver", "'package.module:ClassName'", spec,
                              "Name the module and the class, e.g. mypkg.drivers:MyTickets.")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise DriverSpecError("--driver", "an importable class", spec, f"Import failed: {e}.") from None
    driver = cls(**kwargs)
    wanted = [m for m in dir(protocol) if not m.startswith("_")] + list(getattr(protocol, "__annotations__", {}))
    missing = sorted({m for m in wanted if not hasattr(driver, m)})
    if missing:
        raise DriverSpecError("--driver", f"a class with the {protocol.__name__} methods", spec,
                              f"It lacks {', '.join(missing)}.")
    return driver


def is_side(op: Op) -> bool:
    """A harness side call (stats, admin, providers' record), not an operation of the load."""
    return op.process == SIDE


__all__ = ["SIDE", "InProcessDriver", "HttpDriver", "is_side", "load_driver", "FAIL", "INFO", "OK"]
