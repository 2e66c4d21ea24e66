"""Component health as shown by /courier/health: each part is ok, off, starting or error."""

from __future__ import annotations

import dataclasses
import time

STATES = ("ok", "off", "starting", "error")


@dataclasses.dataclass
class ComponentHealth:
    state: str = "off"
    reason: str = "not started"
    since: float = dataclasses.field(default_factory=time.time)
    details: dict = dataclasses.field(default_factory=dict)


class Health:
    """A small registry the services write to and the health route reads."""

    def __init__(self, *components: str):
        self._components = {name: ComponentHealth() for name in components}

    def set(self, component: str, state: str, reason: str = "", **details) -> None:
        if state not in STATES:
            raise ValueError(f"unknown health state {state!r}")
        self._components[component] = ComponentHealth(state, reason, time.time(), details)

    def state(self, component: str) -> str:
        return self._components[component].state

    def report(self) -> dict:
        return {name: {"state": c.state, "reason": c.reason, **c.details}
                for name, c in self._components.items()}
