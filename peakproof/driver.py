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

import threading
import time
from typing import Any, Callable, Iterator

from .clock import VirtualClock
from .history import FAIL, INFO, OK, History, Op
from .http import CONTRACT_ERRORS, ErrorMap, RequestsTransport, Transport, call, dig, exchange, json_object

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
    :func:`peakproof.http.call`; ``errors`` reads the service's error answers as the contract's
    codes (a driver for another API sets its own :class:`~peakproof.http.ErrorMap`).

    ``auth``: which calls carry :meth:`auth_headers`: ``"admin"`` (the calls made with
    ``admin=True``, with ``--admin-token``) or ``"every"`` (every call: with ``--token`` when
    given, else ``--admin-token``; admin calls always with ``--admin-token``).
    """

    errors: ErrorMap = CONTRACT_ERRORS
    auth: str = "admin"

    def __init__(self, base_url: str, *, session: Any = None, timeout: float = 5.0,
                 history: History | None = None, transport: Transport | None = None,
                 admin_token: str | None = None, token: str | None = None,
                 slow_transport: Transport | None = None) -> None:
        if self.auth not in ("admin", "every"):
            raise ValueError(f"{type(self).__name__}.auth must be 'admin' or 'every'; got {self.auth!r}")
        self.base = base_url.rstrip("/")
        self._slow = slow_transport
        self.timeout = timeout
        self.transport: Transport = transport or RequestsTransport(session, timeout)
        self.history = history if history is not None else History(time.time)
        self.admin_token, self.token = admin_token, token
        self._admin = self.auth_headers(admin_token) if admin_token else None
        every = token or admin_token if self.auth == "every" else None
        self._every = self.auth_headers(every) if every else None

    def auth_headers(self, token: str) -> dict[str, str]:
        """The headers that carry a token (``--token``, ``--admin-token``): ``Authorization: Bearer``
        by default; override for another scheme (``{"Authorization": f"Token {token}"}``,
        ``{"X-Api-Key": token}``). Which calls carry them: :attr:`auth`."""
        return self.admin_headers(token)

    def admin_headers(self, token: str) -> dict[str, str]:
        """The older name of :meth:`auth_headers` (overriding either works)."""
        return {"Authorization": f"Bearer {token}"}

    @property
    def ids(self) -> "IdStore":
        """The ids your service allocated for the harness's (a quota's event id, an order code), shared by
        every instance of this driver class for this base URL in this process: see :class:`IdStore`."""
        return IdStore.of(type(self), self.base)

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

    def _headers(self, admin: bool, headers: dict[str, str] | None) -> dict[str, str] | None:
        auth = self._admin if admin and self._admin else self._every
        if auth is None:
            return headers
        return {**auth, **headers} if headers else auth

    def _call(self, f: str, args: dict[str, Any], method: str, path: str, body: Any, parse: Callable[[Any], Any],
              *, process: Any = 0, intended_time: float | None = None, name: str | None = None,
              admin: bool = False, slow: bool = False, headers: dict[str, str] | None = None) -> Op:
        """One operation of the contract, ``path`` under the base URL. ``headers``: this request's own
        (an ``Idempotency-Key``, a trace id), sent as given, on top of the auth ones (:attr:`auth`)."""
        return call(self.history, self.slow_transport if slow else self.transport, f, args, method, self.base + path,
                    body, process, parse, intended_time=intended_time, headers=self._headers(admin, headers),
                    name=name or f, errors=self.errors)

    def operation(self, f: str, args: dict[str, Any], *, process: Any = 0,
                  intended_time: float | None = None) -> "Operation":
        """One operation of the contract made of several requests (look up, then act): ``with
        self.operation("reserve", args, process=p, intended_time=t) as op: ... op.request(...) ...
        op.ok(value)``. Recorded as one operation with one completion; see :class:`Operation`."""
        return Operation(self, f, args, process, intended_time)

    def side_call(self, f: str, method: str, url: str, body: Any = None, parse: Callable[[Any], Any] = json_object,
                  *, args: dict[str, Any] | None = None, admin: bool = False,
                  keep: Callable[[Any], Any] | None = None, slow: bool = False) -> tuple[Op, Any]:
        """A call of the harness's own (admin, stats, the providers), recorded under :data:`SIDE`.

        ``url`` is absolute (the providers live elsewhere). Returns (op, the parsed value or
        None); the history keeps ``keep(value)`` when given (the providers' record is large).
        ``slow``: through :attr:`slow_transport`. Its errors read through :attr:`errors`, its
        auth as :meth:`_call`'s (for this service's URLs; none for another host's).
        """
        own = url.startswith(self.base)
        op = call(self.history, self.slow_transport if slow else self.transport, f, args or {}, method, url, body, SIDE,
                  parse, headers=self._headers(admin, None) if own else (self._admin if admin else None), name=f,
                  errors=self.errors if own else CONTRACT_ERRORS)
        value = op.value if op.type == OK else None
        if keep is not None and op.type == OK:
            op.value = keep(value)
        return op, value


class Failed(Exception):
    """Ends an :class:`Operation` with the fail or info completion of the request that raised it."""

    def __init__(self, type_: str, code: Any, message: str | None) -> None:
        super().__init__(f"{type_} {code}: {message}")
        self.type, self.code, self.message = type_, code, message


class Operation:
    """One operation made of several requests, recorded as one op with one completion.

    Each :meth:`request` goes through the driver's transport, auth and :attr:`HttpDriver.errors`,
    and returns the parsed value of a 2xx; any other answer ends the operation there, with
    that request's completion by the rule of :func:`peakproof.http.call` (a 4xx fail with its
    code, a timeout or 5xx info). :meth:`ok` gives the operation's value; leaving the block
    without one is info (nothing known), and so is an exception in your code (a
    ``TypeError``/``ValueError``/``KeyError`` reading an answer: "bad_response"). The latency is
    the whole operation's, from its intended time (the load's) or its start. Not
    re-entrant: one operation, one block.
    """

    def __init__(self, driver: HttpDriver, f: str, args: dict[str, Any], process: Any,
                 intended_time: float | None) -> None:
        self.driver, self.f, self.args = driver, f, args
        self.process, self.intended_time = process, intended_time
        self.op: Op | None = None
        self._value: Any = None
        self._done = False
        self.requests = 0

    def __enter__(self) -> "Operation":
        self.op = self.driver.history.invoke(self.process, self.f, self.args, self.intended_time)
        self.op.send_time = time.time()
        return self

    def request(self, method: str, path: str, body: Any = None, parse: Callable[[Any], Any] = json_object, *,
                admin: bool = False, headers: dict[str, str] | None = None, slow: bool = False) -> Any:
        """One request of the operation (``path`` under the base URL): its parsed value, or the
        operation ends with this request's fail / info completion."""
        d = self.driver
        self.requests += 1
        type_, value, message = exchange(d.slow_transport if slow else d.transport, method, d.base + path, body,
                                         d._headers(admin, headers), f"{self.f} ({method} {path.split('?')[0]})",
                                         parse, d.errors)
        if type_ != OK:
            raise Failed(type_, value, message)
        return value

    def ok(self, value: Any) -> None:
        """The operation happened: ``value`` is what the checks read (the case's table)."""
        self._value, self._done = value, True

    def fail(self, code: str, message: str | None = None) -> None:
        """The operation certainly did not happen (a refusal your code recognised): ``code`` is the contract's."""
        raise Failed(FAIL, code, message)

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        history, op = self.driver.history, self.op
        assert op is not None, "Operation used outside a with block"
        if isinstance(exc, Failed):
            history.complete(op, exc.type, exc.code, exc.message)
            return True
        if isinstance(exc, (TypeError, ValueError, KeyError)):
            history.complete(op, INFO, "bad_response", f"{type(exc).__name__}: {exc}"[:300])
            return True
        if exc is not None:  # a bug in the driver: unknown outcome, and the error goes on
            history.complete(op, INFO, "client_error", f"{type(exc).__name__}: {exc}"[:300])
            return False
        if self._done:
            history.complete(op, OK, self._value)
        else:
            history.complete(op, INFO, "no_value", f"{self.f}: the operation's block ended without op.ok(value)")
        return False

    @property
    def result(self) -> Op:
        """The completed op (after the block)."""
        assert self.op is not None and self.op.done, "the operation has not completed"
        return self.op


class IdStore:
    """Ids your service allocates, mapped from the harness's, for one run of one driver class and URL.

    The harness names what it creates (quota ids ``prop-<12 hex>``, ``opening-<10 hex>``,
    ``preflight-<8 hex>``; recipients and users similarly, always unique per run); a service
    that allocates its own (an event's number, an order code) answers with them, and the
    driver must find them again from any of its instances: the load shares one instance
    between the greenlets of a process (its operations run concurrently), the properties
    build one per machine run and per thread of a burst, a monitor one per tick. All of them
    see this store: ``self.ids``.

    ``put(kind, ours, theirs)`` / ``get(kind, ours)``; ``get_or_create(kind, ours, create)``
    calls ``create()`` once for a key however many threads or greenlets ask at once (the others
    wait for its answer); a ``create`` that returns None or raises stores nothing (the next
    caller tries again). Thread- and greenlet-safe (gevent patches the lock).
    """

    _stores: dict[tuple[type, str], "IdStore"] = {}
    _guard = threading.Lock()

    def __init__(self) -> None:
        self._ids: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str], threading.Lock] = {}

    @classmethod
    def of(cls, driver: type, base: str) -> "IdStore":
        with cls._guard:
            store = cls._stores.get((driver, base))
            if store is None:
                store = cls._stores[(driver, base)] = cls()
            return store

    def get(self, kind: str, ours: str) -> Any:
        return self._ids.get((kind, ours))

    def put(self, kind: str, ours: str, theirs: Any) -> None:
        with self._lock:
            self._ids[(kind, ours)] = theirs

    def get_or_create(self, kind: str, ours: str, create: Callable[[], Any]) -> Any:
        key = (kind, ours)
        if key in self._ids:
            return self._ids[key]
        with self._lock:
            gate = self._pending.setdefault(key, threading.Lock())
        with gate:
            if key not in self._ids:
                theirs = create()
                if theirs is not None:
                    self.put(kind, ours, theirs)
            return self._ids.get(key)

    def __len__(self) -> int:
        return len(self._ids)

    def items(self) -> Iterator[tuple[tuple[str, str], Any]]:
        return iter(list(self._ids.items()))


def driver_class(spec: str, protocol: type) -> type:
    """``package.module:ClassName`` (or ``path/to/file.py:ClassName``) -> the class, checked
    against the case's ``protocol``: every operation it names must be a method of the class."""
    import importlib
    import importlib.util
    import sys
    from pathlib import Path

    from .errors import DriverSpecError

    module_name, sep, attr = spec.rpartition(":")
    if not sep or not module_name or not attr:
        raise DriverSpecError("--driver", "'package.module:ClassName' or 'path/to/driver.py:ClassName'", spec,
                              "Name the module and the class, e.g. mypkg.drivers:MyTickets.")
    try:
        if module_name.endswith(".py"):  # a file: imported under its own name, its folder first on the path
            path = Path(module_name).resolve()
            if not path.is_file():
                raise ImportError(f"no file {path}")
            if str(path.parent) not in sys.path:  # its own imports (helpers beside it) resolve
                sys.path.insert(0, str(path.parent))
            import hashlib

            # a name of its own: two drivers both called driver.py must not replace each other
            name = f"_peakproof_driver_{path.stem}_{hashlib.sha1(str(path).encode()).hexdigest()[:8]}"
            module = sys.modules.get(name)
            if module is None:
                loader_spec = importlib.util.spec_from_file_location(name, path)
                module = importlib.util.module_from_spec(loader_spec)  # type: ignore[arg-type]
                sys.modules[name] = module
                try:
                    loader_spec.loader.exec_module(module)  # type: ignore[union-attr]
                except BaseException:
                    del sys.modules[name]
                    raise
        else:
            module = importlib.import_module(module_name)
        cls = getattr(module, attr)
    except (ImportError, AttributeError, SyntaxError) as e:
        raise DriverSpecError("--driver", "an importable class", spec,
                              f"Import failed: {type(e).__name__}: {e}. The module must be importable from here "
                              "(on PYTHONPATH, installed, or a .py file path).") from None
    if not isinstance(cls, type):
        raise DriverSpecError("--driver", "a class", spec, f"{attr} is a {type(cls).__name__}.")
    missing = [m for m in operations(protocol) if not callable(getattr(cls, m, None))]
    if missing:
        raise DriverSpecError("--driver", f"a class with every operation of {protocol.__name__}", spec,
                              f"It lacks {', '.join(missing)} (peakproof driver new <case> writes a skeleton "
                              f"with all of them).")
    wrong = [f"{m}({', '.join(lacks)})" for m in operations(protocol) for lacks in [_unaccepted(protocol, cls, m)]
             if lacks]
    if wrong:
        raise DriverSpecError("--driver", f"operations that take the arguments {protocol.__name__} names", spec,
                              f"These do not take: {'; '.join(wrong)} (the harness passes them; see "
                              f"peakproof driver new <case>).")
    return cls


def _unaccepted(protocol: type, cls: type, name: str) -> list[str]:
    """The protocol's parameters of ``name`` that the class's method cannot take."""
    import inspect

    try:
        want = inspect.signature(getattr(protocol, name)).parameters
        have = inspect.signature(getattr(cls, name)).parameters
    except (TypeError, ValueError):
        return []
    if any(p.kind is p.VAR_KEYWORD for p in have.values()):
        return []
    return [n for n in want if n != "self" and n not in have]


def operations(protocol: type) -> list[str]:
    """The methods a protocol names (its operations), in their order of declaration."""
    return [m for m in vars(protocol) if not m.startswith("_") and callable(vars(protocol)[m])]


def construct(cls: type, base_url: str, **keywords: Any) -> Any:
    """``cls(base_url, **keywords)``, passing only the keywords its constructor takes (a driver
    may take ``history``, ``transport``, ``timeout``, ``admin_token``, ``token`` and the case's own, e.g.
    ``provider_url``; one that takes ``**options`` gets them all)."""
    import inspect

    from .errors import DriverSpecError

    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        params = {}
    if not any(p.kind is p.VAR_KEYWORD for p in params.values()):
        keywords = {k: v for k, v in keywords.items() if k in params}
    try:
        return cls(base_url, **keywords)
    except TypeError as e:
        raise DriverSpecError("--driver", "a class built as Cls(base_url, history=..., transport=..., timeout=..., "
                              "admin_token=...)", cls.__name__, f"Building it failed: {e}.") from None


def translate(doc: Any, fields: dict[str, Any], *, at: str = "") -> dict[str, Any]:
    """A service's JSON object as the contract's: ``{ours: theirs}``, where theirs is a dotted path,
    or ``(path, mapping_or_function)`` to convert the value too (a dict maps status words;
    a function converts, e.g. :func:`peakproof.timefmt.parse_time` for any ISO 8601 time).
    ``at``: the object sits under this path (``{"hold": {...}}``: ``at="hold"``). Fields the
    service omits are None; a value a mapping does not know raises ValueError (the op is info)."""
    src = dig(doc, at)
    if not isinstance(src, dict):
        raise TypeError(f"expected a JSON object{f' under {at!r}' if at else ''}, got {type(src).__name__}")
    out: dict[str, Any] = {}
    for ours, theirs in fields.items():
        convert = None
        if isinstance(theirs, tuple):
            theirs, convert = theirs
        value = dig(src, theirs)
        if value is not None and isinstance(convert, dict):
            if value not in convert:
                raise ValueError(f"{theirs} = {value!r} is none of {sorted(convert)}")
            value = convert[value]
        elif value is not None and convert is not None:
            value = convert(value)
        out[ours] = value
    return out


def is_side(op: Op) -> bool:
    """A harness side call (stats, admin, providers' record), not an operation of the load."""
    return op.process == SIDE


__all__ = ["SIDE", "InProcessDriver", "HttpDriver", "Operation", "Failed", "IdStore", "ErrorMap", "is_side", "driver_class",
           "construct", "operations", "translate", "dig", "FAIL", "INFO", "OK"]
