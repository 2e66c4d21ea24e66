"""Vulture's whitelist: names that look unused to it but are read by a framework or by name.

Run the check with ``.ci/dead-code`` (``.ci/run`` runs it before the tests). A name belongs here only
with the reason of its group; anything else vulture finds is dead code: delete it.
"""
# ruff: noqa
# fmt: off

# ComfyUI's ProgressHandler interface (comfy_execution/progress.py calls these on RunRecorder).
_.set_registry  # unused method (gpu/recorder.py:72)
_.start_handler  # unused method (gpu/recorder.py:77)
_.update_handler  # unused method (gpu/recorder.py:82)
max_value  # unused variable (gpu/recorder.py:82)
_.finish_handler  # unused method (gpu/recorder.py:86)
_.reset  # unused method (gpu/recorder.py:95)

# python-telegram-bot's BaseRateLimiter interface (ExtBot calls it for every request).
_.process_request  # unused method (bot/limiter.py)

# ComfyUI passes every declared input to a node's execute.
require_image  # an input the bot reads from the graph (nodes/telegram_input.py)

# ComfyUI modules and PromptServer stubbed for bench_node's in-process executor (read by ComfyUI).
_.InputContainer  # unused attribute (benchmarks/bench_node.py:213)
_.SubtitleStream  # unused attribute (benchmarks/bench_node.py:214)
last_node_id  # unused variable (benchmarks/bench_node.py:226)
sockets_metadata  # unused variable (benchmarks/bench_node.py:227)
sid  # unused variable (benchmarks/bench_node.py:229)

# Dataclass and NamedTuple fields filled from rows or JSON, shown by to_dict/asdict or in replies.
nodes_done  # unused variable (jobs/comfy/records.py:203)
nodes_total  # unused variable (jobs/comfy/records.py:204)
p95  # unused variable (gpu/stats.py:32)
stdev  # unused variable (gpu/stats.py:35)
since  # unused variable (health.py:15)
benchmark_node  # unused variable (jobs/bench.py:99)
completed  # unused variable (jobs/comfy/records.py:66)
pytorch_version  # unused variable (jobs/comfy/records.py:152)
ram_total  # unused variable (jobs/comfy/records.py:153)
ram_free  # unused variable (jobs/comfy/records.py:154)
queue_remaining  # unused variable (jobs/comfy/records.py:196)
ahead  # unused variable (jobs/comfy/records.py:197)
_.exception_type  # unused attribute (jobs/errors.py:176)
_.exception_message  # unused attribute (jobs/errors.py:177)
expires_at  # unused variable (store/access.py:117)
last_seen_at  # unused variable (store/backends.py:25)
checked_at  # unused variable (store/backends.py:26)
last_error  # unused variable (store/backends.py:27)
lease_until  # unused variable (store/jobs.py:38)
succeeded  # unused variable (store/sessions.py:47)
last_active_at  # unused variable (store/sessions.py:50)
last_served_at  # unused variable (store/users.py:19)

# aiohttp_socks's ProxyConnector reads it for each connect (fresh SOCKS credentials: fresh circuits).
_._proxy_username  # unused attribute (anyone/transport.py)

# Used only by tests today: its production caller comes with the job's progress (issue 32, item 7).
set_progress  # unused function (store/jobs.py)
