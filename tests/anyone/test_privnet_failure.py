"""A private network that cannot come up fails fast, retries once, and names the logs of both tries."""

import pytest

from comfyui_courier.anyone.errors import PrivateNetworkError
from comfyui_courier.anyone.privnet import PrivateNetwork

# Stand-ins: keys and fingerprints work, every node dies at launch.
FAKE_GENCERT = """#!/bin/sh
while [ $# -gt 0 ]; do [ "$1" = -c ] && echo "fingerprint 0123456789ABCDEF0123456789ABCDEF01234567" > "$2"; shift; done
"""
FAKE_ANON = """#!/bin/sh
case "$*" in
  *--list-fingerprint*) echo "node 0123 4567 89AB CDEF 0123 4567 89AB CDEF 0123 4567" ;;
  *) echo "[err] cannot start" >&2; exit 1 ;;
esac
"""


async def test_failed_bring_up_reports_both_tries_with_logs(tmp_path):
    for name, text in (("anon", FAKE_ANON), ("anon-gencert", FAKE_GENCERT)):
        (tmp_path / name).write_text(text)
        (tmp_path / name).chmod(0o755)
    net = PrivateNetwork(tmp_path / "anon", tmp_path / "net", attempt_timeout=20)
    with pytest.raises(PrivateNetworkError) as failure:
        await net.start()
    message = str(failure.value)
    assert "try 1:" in message and "try 2:" in message and "exited with rc 1" in message
    assert str(tmp_path / "net" / "try2" / "auth0" / "notice.log") in message
    assert (tmp_path / "net" / "try1" / "auth0" / "stderr.log").read_text() == "[err] cannot start\n"
    assert "[err] cannot start" in message
    assert all(node.process is None or node.process.poll() is not None for node in net.nodes)
