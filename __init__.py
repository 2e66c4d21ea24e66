"""ComfyUI Courier: a private Telegram bot in front of ComfyUI.

ComfyUI imports this folder as a package (whatever the folder is called).
Importing does no I/O and starts nothing: inside ComfyUI it only registers our
routes and a cleanup context on the aiohttp app; services start with the app.
"""

from .core._version import __version__

WEB_DIRECTORY = "./js"

__all__ = ["WEB_DIRECTORY", "__version__", "comfy_entrypoint"]


async def comfy_entrypoint():
    """Our nodes, for ComfyUI's v3 loader (which skips this where a NODE_CLASS_MAPPINGS is exported).

    The node modules import ``comfy_api`` (and with it torch), so nothing imports them before ComfyUI
    calls this: the pack stays importable outside ComfyUI (``python <pack> run``).
    """
    from .nodes.extension import CourierExtension

    return CourierExtension()


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
