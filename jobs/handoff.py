"""Result files handed from Telegram Output to the job that follows its prompt, in this process.

When the bot runs inside the ComfyUI that executes its prompt, the node gives the bytes it
saved straight to the waiting job: no ``/view`` round trip. The node runs on ComfyUI's worker
thread and the job on the server's loop, hence the lock. The node hands its files over before
it returns, that is before ComfyUI queues the node's ``executed`` frame, so they are here once
the job has read its prompt to the end.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator


class Handoff:
    """Prompts that jobs of this process follow, and the files their nodes handed over."""

    def __init__(self):
        self._lock = threading.Lock()
        self._expected: dict[str, dict[str, list[bytes]]] = {}  # prompt id -> node id -> files

    @contextlib.contextmanager
    def expect(self, prompt_id: str) -> Iterator[dict[str, list[bytes]]]:
        """While the block runs, nodes of ``prompt_id`` may hand over files: node id -> their bytes."""
        files: dict[str, list[bytes]] = {}
        with self._lock:
            self._expected[prompt_id] = files
        try:
            yield files
        finally:
            with self._lock:
                self._expected.pop(prompt_id, None)

    def expects(self, prompt_id: str) -> bool:
        """Whether a job of this process follows ``prompt_id`` (then ``hand_over`` its files)."""
        with self._lock:
            return prompt_id in self._expected

    def hand_over(self, prompt_id: str, node_id: str, files: list[bytes]) -> bool:
        """Give ``node_id``'s files to the job following ``prompt_id``; False if none does (any more)."""
        with self._lock:
            expected = self._expected.get(prompt_id)
            if expected is None:
                return False
            expected[node_id] = files
        return True
