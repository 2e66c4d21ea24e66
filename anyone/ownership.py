"""What each bot-host credential owns behind the gateway: its prompt ids, client ids and files.

The gateway's policy (gateway_policy.py) lets a credential cancel, read or delete only what it owns. Each
credential has its own tables, each bounded on its own (``REMEMBERED`` entries, the oldest
forgotten first), so one credential's traffic never evicts another's entries. A prompt id is
owned once ComfyUI accepted the prompt (never on the caller's word), a file once the caller's
upload was stored under that name or its prompt wrote it. The tables live in memory: after a
restart of the backend a credential owns nothing older (ComfyUI forgot its queue and history too).
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict

REMEMBERED = 100_000  # entries of each kind per credential, oldest forgotten first

FileRef = tuple[str, str, str]  # (type, subfolder, filename), as /view and /upload/image name a file


class _Bounded(OrderedDict):
    """A bounded set: past ``REMEMBERED`` entries the oldest go."""

    def add(self, key) -> None:
        self[key] = True
        self.move_to_end(key)
        while len(self) > REMEMBERED:
            self.popitem(last=False)


@dataclasses.dataclass
class Holdings:
    """One credential's: prompt ids ComfyUI accepted from it, client ids it used first, files it wrote."""

    prompts: _Bounded = dataclasses.field(default_factory=_Bounded)
    client_ids: _Bounded = dataclasses.field(default_factory=_Bounded)
    files: _Bounded = dataclasses.field(default_factory=_Bounded)


class Ledger:
    """Holdings per credential digest (only digests the gateway accepted ever get any)."""

    def __init__(self) -> None:
        self._by: dict[str, Holdings] = {}

    def of(self, caller: str) -> Holdings:
        return self._by.setdefault(caller, Holdings())

    def _others(self, caller: str) -> list[Holdings]:
        return [held for who, held in self._by.items() if who != caller]

    def claim_client(self, client_id: str, caller: str) -> bool:
        """Bind ``client_id`` to ``caller`` unless another credential uses it."""
        if any(client_id in held.client_ids for held in self._others(caller)):
            return False
        self.of(caller).client_ids.add(client_id)
        return True

    def client_of(self, caller: str, client_id: object) -> bool:
        return isinstance(client_id, str) and client_id in self.of(caller).client_ids

    def accepted(self, caller: str, prompt_id: str) -> None:
        """ComfyUI queued ``prompt_id`` for ``caller``: it is the caller's alone from now on (another
        credential's entry can only be a prompt ComfyUI forgot, e.g. across a restart)."""
        for held in self._others(caller):
            held.prompts.pop(prompt_id, None)
        self.of(caller).prompts.add(prompt_id)

    def owns(self, caller: str, prompt_id: object) -> bool:
        return isinstance(prompt_id, str) and prompt_id in self.of(caller).prompts

    def wrote(self, caller: str, file: FileRef) -> None:
        self.of(caller).files.add(file)

    def has_file(self, caller: str, file: FileRef) -> bool:
        return file in self.of(caller).files
