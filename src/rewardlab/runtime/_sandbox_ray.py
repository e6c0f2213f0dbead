"""Sandboxes on Ray actors: a `Sandbox` whose runs execute on `actors` Ray actors instead of this process.

`RaySandbox` is a `Sandbox` (the same `run_program`, `run`, `run_many`, `stop`, `close`): only the last step of a run
moves. Each actor holds a `Sandbox` of its own, with its own warm zygotes, on whichever node Ray places it, and runs
up to `per_actor` runs at a time; a run goes to the actor with the fewest runs in flight. `isolation` is what the
first actor's machine provides (a cluster of unlike nodes reports per run, in `Execution.isolation`). Ray must be
installed (the `distributed` extra); a running cluster is joined, else `ray.init()` starts a local one.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from rewardlab.runtime._sandbox_results import Execution, Isolation, Limits, NamespaceMode
from rewardlab.runtime.sandbox import PYTHON, Sandbox


class SandboxActor:
    """The body of one Ray actor: a local `Sandbox` that executes the runs the driver sends."""

    def __init__(self, limits: Limits, settings: dict[str, Any]) -> None:
        self.sandbox = Sandbox(limits, **settings)

    def isolation(self) -> Isolation:
        """The mechanisms in force on this actor's machine."""
        return self.sandbox.isolation

    def execute(self, argv: list[str], files: dict[str, bytes], stdin: bytes, limits: Limits,
                python_script: str | None, trusted_script: bool) -> Execution:
        """One run here (a Python program runs in this machine's sandbox interpreter)."""
        if python_script is not None:
            argv = [self.sandbox.interpreter(PYTHON) or argv[0], *argv[1:]]
        return self.sandbox._execute(argv, files, stdin, self.sandbox.isolation, limits, python_script,
                                     trusted_script)

    def stop(self) -> None:
        """End this actor's runs in flight (`Sandbox.stop`)."""
        self.sandbox.stop()

    def resume(self) -> None:
        """Accept runs again."""
        self.sandbox.resume()

    def close(self) -> None:
        """End this actor's zygotes."""
        self.sandbox.close()


class RaySandbox(Sandbox):
    """A `Sandbox` whose runs execute on `actors` Ray actors (`per_actor` runs at a time on each)."""

    def __init__(self, limits: Limits | None = None, *, actors: int, per_actor: int = 2,
                 namespaces: NamespaceMode = "auto", drop_privileges: bool = True, uid_base: int = 1_600_000_000,
                 read_only_paths: Sequence[str] = (), zygote: bool = True) -> None:
        if actors < 1:
            raise ValueError(f"actors must be >= 1, got {actors}")
        if per_actor < 1:
            raise ValueError(f"per_actor must be >= 1, got {per_actor}")
        super().__init__(limits, namespaces=namespaces, drop_privileges=drop_privileges, uid_base=uid_base,
                         read_only_paths=read_only_paths, zygote=zygote)
        self.actors = actors
        self.per_actor = per_actor
        self._settings = {"namespaces": namespaces, "drop_privileges": drop_privileges, "uid_base": uid_base,
                          "read_only_paths": tuple(read_only_paths), "zygote": zygote}
        self._handles: list[Any] = []
        self._in_flight: list[int] = []
        self._ray_lock = threading.Lock()
        self._isolation: Isolation | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for name in ("_handles", "_in_flight", "_ray_lock", "_isolation"):
            del state[name]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._handles, self._in_flight, self._ray_lock, self._isolation = [], [], threading.Lock(), None

    def _started(self) -> list[Any]:
        """The actors (started on first use)."""
        with self._ray_lock:
            if not self._handles:
                import ray

                if not ray.is_initialized():
                    ray.init(include_dashboard=False, log_to_driver=False)
                remote = ray.remote(num_cpus=0)(SandboxActor).options(max_concurrency=self.per_actor)
                self._handles = [remote.remote(self.limits, self._settings) for _ in range(self.actors)]
                self._in_flight = [0] * self.actors
            return self._handles

    @property
    def isolation(self) -> Isolation:
        """The mechanisms in force on the first actor's machine (asked once)."""
        if self._isolation is None:
            import ray

            self._isolation = ray.get(self._started()[0].isolation.remote())
        return self._isolation

    def _execute(self, argv: list[str], files: dict[str, bytes], stdin: bytes, isolation: Isolation,
                 limits: Limits, python_script: str | None = None, trusted_script: bool = False) -> Execution:
        """The run on the actor with the fewest runs in flight."""
        import ray

        handles = self._started()
        with self._ray_lock:
            index = min(range(len(handles)), key=self._in_flight.__getitem__)
            self._in_flight[index] += 1
        try:
            if self._stopping.is_set():
                return Execution(None, None, b"", b"", b"", 0.0, sandbox_error="stopped: the sandbox was stopped",
                                 isolation=isolation.mechanisms(), limits=limits)
            run = handles[index].execute.remote(argv, files, stdin, limits, python_script, trusted_script)
            return ray.get(run)  # type: ignore[no-any-return]
        finally:
            with self._ray_lock:
                self._in_flight[index] -= 1

    def stop(self) -> None:
        """End every run in flight on every actor, refuse new ones until `resume`."""
        super().stop()
        self._each("stop")

    def resume(self) -> None:
        """Accept runs again on every actor."""
        super().resume()
        self._each("resume")

    def _each(self, method: str) -> None:
        import ray

        with self._ray_lock:
            handles = list(self._handles)
        ray.get([getattr(handle, method).remote() for handle in handles])

    def close(self) -> None:
        """End the actors (and their zygotes); a later run starts new ones."""
        import ray

        with self._ray_lock:
            handles, self._handles, self._in_flight = self._handles, [], []
        if handles:
            ray.get([handle.close.remote() for handle in handles])
            for handle in handles:
                ray.kill(handle)
