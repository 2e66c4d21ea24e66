"""ComfyUI Courier: a private Telegram bot in front of ComfyUI.

ComfyUI imports this folder as a package (whatever the folder is called).
Importing does no I/O and starts nothing: inside ComfyUI it only registers our
routes and a cleanup context on the aiohttp app; services start with the app.
"""

from ._version import __version__
from .nodes import NODE_CLASS_MAPPINGS, NODE_DISPLAY_NAME_MAPPINGS

WEB_DIRECTORY = "./js"

__all__ = ["NODE_CLASS_MAPPINGS", "NODE_DISPLAY_NAME_MAPPINGS", "WEB_DIRECTORY", "__version__"]


def _attach_to_comfyui() -> None:
    try:
        from server import PromptServer  # ComfyUI's own module; absent outside ComfyUI
    except ImportError:
        return
    if getattr(PromptServer, "instance", None) is None:
        return
    from .host import attach

    attach(PromptServer.instance)


_attach_to_comfyui()
