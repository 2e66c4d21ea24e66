"""The standalone bot's console (``python <pack> run``): each line says its level once.

Courier's own lines carry ``[Courier] WARNING`` (``core/logs.py``, for ComfyUI's bare log), so the
console's format must not add the level again; other loggers' lines keep theirs.
"""

import logging
import signal
import subprocess
import sys
from pathlib import Path

from comfyui_courier.core.logs import ConsoleFormat, get_logger

PACK_ROOT = Path(__file__).resolve().parent.parent
RUN_S = 60


def test_run_says_the_level_of_a_courier_line_once(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COURIER_DATABASE_URL": "postgresql://u@127.0.0.1:9/db"}
    process = subprocess.Popen([sys.executable, str(PACK_ROOT), "run", "--data-dir", str(tmp_path / "data")],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        while line := process.stdout.readline():  # bounded: the pytest timeout, and the line comes in ms
            lines.append(line)
            if "database:" in line:
                break
        process.send_signal(signal.SIGINT)
        process.wait(RUN_S)
    finally:
        process.kill()
        process.wait()
    (told,) = [line for line in lines if "database:" in line]
    assert " courier.runtime [Courier] ERROR database: cannot reach PostgreSQL" in told, told
    assert told.count("ERROR") == 1, told


def test_other_loggers_keep_their_level():
    def record(name: str, level: int, message: str) -> logging.LogRecord:
        return logging.LogRecord(name, level, __file__, 1, message, None, None)

    console = ConsoleFormat()
    assert console.format(record("telegram.ext", logging.WARNING, "slow")).endswith(" telegram.ext WARNING slow")
    assert console.format(record("courier.bot", logging.WARNING, "[Courier] WARNING x")).endswith(
        " courier.bot [Courier] WARNING x")
    assert get_logger("bot").logger.name == "courier.bot"
