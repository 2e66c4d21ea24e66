"""AnyoneService refuses to start anon for clear, reported reasons (no anon needed)."""

from comfyui_courier.anyone import AnyoneService
from comfyui_courier.core.config import Settings
from comfyui_courier.core.health import Health


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


def fake_anon(tmp_path):
    """An executable ``anon`` that exits at once (found where install-anon puts it)."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "anon").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "bin" / "anon").chmod(0o755)


async def test_client_auth_is_on_by_default_and_never_publishes_without_a_client(tmp_path):
    """No keys and an anon that cannot make them: no client can be provisioned, so nothing is published."""
    fake_anon(tmp_path)
    service, report = await started(tmp_path, listen="0.0.0.0", anyone_enabled=True, anyone_agree_to_terms=True)
    assert report["state"] == "error" and "no hidden-service keys" in report["reason"]
    assert service.process is None and service.onion_address is None and report["client_auth"] is True
    assert service.gateway._runner is None  # stopped again
    assert "0.0.0.0" in report["warning"]  # listening beyond loopback is reported too


async def test_opting_out_of_client_auth_is_loud(tmp_path, caplog):
    fake_anon(tmp_path)
    (tmp_path / "anyone" / "hs").mkdir(parents=True)  # keys made before (the stand-in anon makes none)
    (tmp_path / "anyone" / "hs" / "hostname").write_text("a" * 56 + ".anon\n")
    service, _ = await started(tmp_path, anyone_enabled=True, anyone_agree_to_terms=True,
                                    anyone_client_auth=False)
    try:
        assert service.process is not None  # published (anon itself is a stand-in here)
        assert "CLIENT AUTHORIZATION IS OFF" in service.health()["warning"]
        assert any("CLIENT AUTHORIZATION IS OFF" in r.getMessage() and r.levelname == "WARNING"
                   for r in caplog.records)
        assert not list((service.hidden_service.dir / "authorized_clients").iterdir())
        assert len(service.gateway.policy.credentials) == 1  # the gateway still wants a credential
    finally:
        await service.stop()


async def test_hidden_service_points_at_the_gateway_not_at_comfyui(tmp_path):
    fake_anon(tmp_path)
    (tmp_path / "anyone" / "hs").mkdir(parents=True)
    (tmp_path / "anyone" / "hs" / "hostname").write_text("a" * 56 + ".anon\n")
    service, _ = await started(tmp_path, anyone_enabled=True, anyone_agree_to_terms=True)
    try:
        assert "warning" not in service.health()
        ports = [v for k, v in service.process.options if k == "HiddenServicePort"]
        assert ports == [f"80 {service.gateway.address}"] and "8188" not in ports[0]
        assert service.hidden_service.clients() == ["bot-host"]  # provisioned for this host's bot
        assert (tmp_path / "anyone" / "client_auth" / "bot-host.auth_private").read_text().startswith("a" * 56)
    finally:
        await service.stop()
    assert service.gateway._runner is None


def test_ipv6_loopback_backend(tmp_path):
    service = AnyoneService(Settings(), tmp_path, "http://[::1]:8188")
    assert service.gateway.target == "http://[::1]:8188"
