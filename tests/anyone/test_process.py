"""anon supervision: parsing canned control-port replies and output, without anon running."""

import pytest

from comfyui_courier.anyone.process import (
    exit_reason,
    parse_bootstrap_phase,
    parse_control_port_file,
    render_torrc,
)


@pytest.mark.parametrize("reply, expected", [
    ('NOTICE BOOTSTRAP PROGRESS=0 TAG=starting SUMMARY="Starting"', (0, "Starting")),
    ('NOTICE BOOTSTRAP PROGRESS=85 TAG=ap_conn_done SUMMARY="Connected to a relay to build circuits"',
     (85, "Connected to a relay to build circuits")),
    ('NOTICE BOOTSTRAP PROGRESS=100 TAG=done SUMMARY="Done"', (100, "Done")),
    (('WARN BOOTSTRAP PROGRESS=5 TAG=conn SUMMARY="Connecting to a relay" WARNING="Connection refused" '
      'REASON=CONNECTREFUSED COUNT=3 RECOMMENDATION=ignore HOSTID="0A3E" HOSTADDR="127.0.0.1:5001"'),
     (5, "Connecting to a relay")),
])
def test_bootstrap_phase(reply, expected):
    assert parse_bootstrap_phase(reply) == expected


def test_control_port_file():
    assert parse_control_port_file("PORT=127.0.0.1:40123\n") == 40123
    with pytest.raises(ValueError):
        parse_control_port_file("UNIX_PORT=/run/anon/control\n")


def test_exit_reason_names_signal_or_last_error():
    assert exit_reason(-9, []) == "anon was killed by signal SIGKILL"
    lines = ["Nov 29 16:16:50.000 [notice] Read configuration file",
             "Nov 29 16:16:50.001 [err] User has not agreed to the terms and conditions. Exiting.",
             "Nov 29 16:16:50.002 [notice] Please read terms and conditions at: https://www.anyone.io/terms"]
    assert exit_reason(1, lines) == "anon exited with rc 1: User has not agreed to the terms and conditions. Exiting."
    assert exit_reason(134, ["free(): invalid size"]) == "anon exited with rc 134: free(): invalid size"
    assert exit_reason(0, []) == "anon exited with rc 0: no output"


def test_torrc_repeats_keys_and_allows_empty_values():
    text = render_torrc([("ExitPolicy", "accept 127.0.0.0/8:*"), ("ExitPolicy", "reject *:*"),
                         ("ServerDNSTestAddresses", "")])
    assert text == "ExitPolicy accept 127.0.0.0/8:*\nExitPolicy reject *:*\nServerDNSTestAddresses\n"
