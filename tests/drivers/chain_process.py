"""A simulated serial chain in a process of its own, at real-time priority, for the tests whose
client is a manufacturer's SDK or another process (``armd calibrate``) and that still reach
into the servos' tables.

A chain served from the test's own process shares the interpreter lock with the SDK, which polls
for a reply in a loop holding it: on a loaded machine the scheduler could take the core from the
SDK's thread while it held the lock, and the chain's thread, ready to answer, waited for it (a
Feetech read timed out with nothing received beside `stress-ng --cpu 2`). A servo's firmware does
not wait for its client: here neither does the chain. Its process runs at `SIM_PRIORITY` (the
chain's thread inherits it), as every ``armd sim-device`` does in the tests, so what is left
between a request and its reply is the kernel's pty path, which `PtyStallProbe` times.

`ChainProcess(cls, *args, **kwargs)` builds ``cls(*args, **kwargs)`` (a `PtyChain`) in a
process of its own and serves it until closed; `port` is the pty to open. The test hooks
cross over a pipe: `read_table`, `write_table`, `inject_hardware_error` and
`set_faults` (fields of a device's injected faults). `cls` may be any importable callable that
returns a chain (one that also sets up its motors, say). Use as a context manager.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
from collections.abc import Callable
from typing import Any, Self

from drivers.serial_bus.pty_chain import PtyChain
from tests.realtime import at_sim_priority

__all__ = ["ChainProcess"]

START_TIMEOUT_S = 30.0  # the first one starts the fork server, which imports the chains
CALL_TIMEOUT_S = 10.0

# A fork server (a clean single-threaded process, started once per test process, that imports
# these) forks each chain's process: no fork of the threaded test process, and no interpreter
# started and modules imported again per test (0.3 s of CPU each).
_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(
    ["tests.drivers.chain_process", "drivers.dynamixel.sim", "drivers.feetech.sim"]
)


class ChainProcess:
    """``cls(*args, **kwargs)`` served in a process of its own (see the module docstring)."""

    def __init__(self, cls: Callable[..., PtyChain[Any, Any]], *args: Any, **kwargs: Any) -> None:
        self._conn, theirs = _CONTEXT.Pipe()
        self._process = _CONTEXT.Process(
            target=_serve, args=(theirs, cls, args, kwargs), name="chain-process", daemon=True
        )
        self._process.start()
        theirs.close()
        self.port: str = self._receive(START_TIMEOUT_S)

    def read_table(self, device_id: int, address: int, length: int) -> bytes:
        return bytes(self._call("read_table", device_id, address, length))

    def write_table(self, device_id: int, address: int, data: bytes) -> Any:
        return self._call("write_table", device_id, address, data)

    def inject_hardware_error(self, device_id: int, bits: int) -> None:
        self._call("inject_hardware_error", device_id, bits)

    def set_faults(self, device_id: int, **fields: Any) -> None:
        """Set fields of device `device_id`'s injected faults (`LinkFaults` and its kind's)."""
        self._call("set_faults", device_id, fields)

    def close(self) -> None:
        """Stop serving and end the process. Idempotent."""
        if not self._conn.closed:
            self._conn.close()  # the process's end of the pipe reads EOF
        self._process.join(timeout=5.0)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, name: str, *args: Any) -> Any:
        self._conn.send((name, args))
        return self._receive(CALL_TIMEOUT_S)

    def _receive(self, timeout_s: float) -> Any:
        if not self._conn.poll(timeout_s):
            raise TimeoutError(f"the chain's process gave no answer in {timeout_s} s")
        ok, value = self._conn.recv()
        if not ok:
            raise RuntimeError(f"in the chain's process: {value}")
        return value


def _serve(
    conn: multiprocessing.connection.Connection,
    cls: Callable[..., PtyChain[Any, Any]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> None:
    """The process: the chain at `SIM_PRIORITY`, its hooks answered until the pipe closes."""
    with at_sim_priority(), conn:
        try:
            chain = cls(*args, **kwargs)
            chain.start()
        except Exception as exc:  # said to the test, which raises it
            conn.send((False, repr(exc)))
            return
        try:
            conn.send((True, chain.port))
            while True:
                try:
                    name, call_args = conn.recv()
                except EOFError:
                    return
                try:
                    conn.send((True, _hook(chain, name, call_args)))
                except Exception as exc:  # likewise
                    conn.send((False, repr(exc)))
        finally:
            chain.stop()


def _hook(chain: PtyChain[Any, Any], name: str, args: tuple[Any, ...]) -> Any:
    if name == "set_faults":
        device_id, fields = args
        with chain.device(device_id) as device:
            for field, value in fields.items():
                if not hasattr(device.faults, field):
                    raise AttributeError(f"{type(device.faults).__name__} has no field {field!r}")
                setattr(device.faults, field, value)
        return None
    if name not in ("read_table", "write_table", "inject_hardware_error"):
        raise AttributeError(f"no hook {name!r}")
    return getattr(chain, name)(*args)
