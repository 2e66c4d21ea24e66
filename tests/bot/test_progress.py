"""Status messages give way to results in the rate limiter (bot/progress.py), on PTB's real AIORateLimiter."""

import asyncio

import pytest

from comfyui_courier.bot.progress import STATUS, STATUS_SLOTS, ResultsFirstLimiter


@pytest.mark.timeout(60)
async def test_a_result_overtakes_a_backlog_of_status_messages():
    limiter = ResultsFirstLimiter(overall_max_rate=2, overall_time_period=1, max_retries=0)
    await limiter.initialize()
    order = []

    def request(name: str, rate_limit_args):
        async def callback():
            order.append(name)
            return True
        return limiter.process_request(callback, (), {}, "sendMessage", {"chat_id": 1}, rate_limit_args)

    backlog = [asyncio.create_task(request(f"status {i}", STATUS)) for i in range(12)]
    await asyncio.sleep(0)  # one turn of the loop: the backlog reaches the limiter first
    await request("result", None)
    for task in backlog:
        task.cancel()
    await asyncio.gather(*backlog, return_exceptions=True)
    await limiter.shutdown()
    assert order[-1] == "result" and 2 <= len(order) - 1 <= 2 + STATUS_SLOTS, order
