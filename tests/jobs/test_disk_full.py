"""A full disk on the image server (issue 28, item 4): the user reads that the server ran out of
space, not ComfyUI's errno, and the operator's log says where (the node, its error, the line of code
that raised). Real python-telegram-bot on the Bot API emulator, real PostgreSQL, the fake ComfyUI's
``execution_error`` frame (the real one's shape: ../shared/reference/COMFYUI_API.md)."""

import logging

import pytest

from comfyui_courier.core import i18n
from comfyui_courier.jobs.errors import ExecutionFailed, summarize_execution_error
from comfyui_courier.tests.support.courier import running_courier, shown_text

USER = 2401
FRAME = {"prompt_id": "p", "node_id": "9", "node_type": "CourierTelegramOutput", "executed": ["1"],
         "exception_message": "[Errno 28] No space left on device\n", "exception_type": "OSError",
         "traceback": ['  File "/srv/ComfyUI/execution.py", line 496, in execute\n    output_data = ...\n',
                       '  File "/srv/ComfyUI/custom_nodes/courier/nodes/telegram_output.py", line 88, in execute\n'
                       '    image.save(path)\n'],
         "current_inputs": {}, "current_outputs": {}, "timestamp": 1}


@pytest.mark.parametrize("message", ["[Errno 28] No space left on device",
                                     "PytorchStreamWriter failed writing file data/0: file write failed: "
                                     "No space left on device", "[Errno 122] Disk quota exceeded"])
def test_a_full_disk_is_told_as_the_server_out_of_space(message):
    problem = summarize_execution_error({**FRAME, "exception_message": message})
    assert problem.key == "server_disk_full"
    assert problem.render() == i18n.text("en", "server_disk_full")


def test_the_log_says_where_the_disk_filled():
    detail = ExecutionFailed(FRAME).detail
    assert detail == ("CourierTelegramOutput (node 9) raised OSError: [Errno 28] No space left on device at "
                      'File "/srv/ComfyUI/custom_nodes/courier/nodes/telegram_output.py", line 88, in execute')


@pytest.mark.timeout(120)
async def test_a_job_that_fills_the_disk_fails_in_plain_words(botapi, botapi_bot, pg_database, fake_comfy, tmp_path,
                                                              caplog):
    fake_comfy.fail_next("[Errno 28] No space left on device", "OSError", node_type="CourierTelegramOutput")
    caplog.set_level(logging.WARNING, logger="courier")
    async with running_courier(botapi, botapi_bot, pg_database, fake_comfy.url, tmp_path,
                               COURIER_ALLOWED_USERS=str(USER)):
        botapi_bot.inject_text(USER, "/demo on a full disk")
        failed = i18n.text("en", "failed", name="demo", reason=i18n.text("en", "server_disk_full"))
        await botapi.wait_for(lambda: [call for call in botapi_bot.outbox if shown_text(call) == failed], timeout=60)
    assert not [call for call in botapi_bot.outbox if "Errno" in (shown_text(call) or "")]
    logged = [record.getMessage() for record in caplog.records if "No space left on device" in record.getMessage()]
    assert logged and "CourierTelegramOutput (node" in logged[0] and 'File "fake_comfyui.py"' in logged[0], logged
