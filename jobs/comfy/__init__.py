"""The client of a ComfyUI backend (shapes of v0.3.64), cut by job; import from the module that
defines a name:

- ``records.py``: what ComfyUI replies and sends, as frozen records, and their parsing;
- ``http.py``: ``ComfyHttp``, one method per REST endpoint;
- ``events.py``: the websocket, one per client (``SharedSocket``), its frames routed to
  each prompt's ``Follower``;
- ``client.py``: ``ComfyClient`` (the two above for one backend) and ``run_prompt``, a whole job.

Every failure is a ``ComfyError`` (``jobs/errors.py``).
"""
