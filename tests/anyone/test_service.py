"""AnyoneService refuses to start anon for clear, reported reasons (no anon needed)."""

from comfyui_courier.anyone import AnyoneService
from comfyui_courier.config import Settings
from comfyui_courier.health import Health


async def started(tmp_path, listen=None, **settings):
    health = Health("anyone")
    service = AnyoneService(Settings(**settings), tmp_path, "http://127.0.0.1:8188", health, listen=listen)
    await service.start()
    return service, health.report()["anyone"]


async def test_off_unless_enabled(tmp_path):
    service, report = await started(tmp_path)
    assert report["state"] == "off" and service.process is None


async def test_terms_are_never_agreed_implicitly(tmp_path):
    service, report = await started(tmp_path, anyone_enabled=True)
    assert report["state"] == "error" and "COURIER_ANYONE_AGREE_TO_TERMS" in report["reason"]
    assert service.process is None


async def test_missing_binary_says_how_to_install(tmp_path):
    _, report = await started(tmp_path, anyone_enabled=True, anyone_agree_to_terms=True,
                              anon_binary=str(tmp_path / "nope" / "anon"))
    assert report["state"] == "error" and "install-anon" in report["reason"]


async def test_client_auth_without_clients_does_not_publish(tmp_path):
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "anon").write_text("#!/bin/sh\nexit 1\n")
    service, report = await started(tmp_path, listen="0.0.0.0", anyone_enabled=True,
                                    anyone_agree_to_terms=True, anyone_client_auth=True)
    assert report["state"] == "error" and "no client is authorized" in report["reason"]
    assert service.process is None and service.onion_address is None
    assert "0.0.0.0" in report["warning"]  # listening beyond loopback is reported too


def test_ipv6_loopback_backend(tmp_path):
    service = AnyoneService(Settings(), tmp_path, "http://[::1]:8188")
    assert service.hidden_service.target == "[::1]:8188"
