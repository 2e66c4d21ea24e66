"""ComfyUI nodes of the pack, one per module, on ComfyUI's v3 schema (``comfy_api.v0_0_2``: a
numbered version, where ``latest`` "may change without warning").

The node modules import ``comfy_api``, which imports torch and ComfyUI's command line, so only the
pack's ``comfy_entrypoint`` imports them (through ``extension.py``, which lists them). Logic the
ComfyUI test double shares lives in plain modules (``prefix.py``).
"""
