import sys

import comfyui_courier


def test_pack_exports_comfyui_entry_points():
    assert comfyui_courier.WEB_DIRECTORY == "./js"
    assert isinstance(comfyui_courier.NODE_CLASS_MAPPINGS, dict)
    assert set(comfyui_courier.NODE_DISPLAY_NAME_MAPPINGS) == set(comfyui_courier.NODE_CLASS_MAPPINGS)


def test_python_telegram_bot_is_not_shadowed():
    import telegram

    assert hasattr(telegram, "Bot"), telegram.__file__
