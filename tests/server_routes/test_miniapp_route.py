"""GET /courier/miniapp/: the Mini App's static files, open to anyone (``PUBLIC``), and nothing else."""

from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(30)

MINIAPP = Path(__file__).resolve().parents[2] / "miniapp"
PROXIED = {"X-Forwarded-For": "203.0.113.7"}


@pytest.mark.parametrize(("path", "file", "kind"), [("", "index.html", "text/html"), ("index.html", "index.html",
                         "text/html"), ("app.js", "app.js", "javascript"), ("app.css", "app.css", "text/css")])
async def test_a_stranger_gets_the_page_s_files(courier_api, path, file, kind):
    api = await courier_api({"COURIER_ADMIN_TOKEN": ""})
    status, body, headers = await api.get(f"/courier/miniapp/{path}", token=None, headers=PROXIED)
    assert status == 200 and body == (MINIAPP / file).read_bytes()
    assert kind in headers["Content-Type"] and headers["Referrer-Policy"] == "no-referrer"


@pytest.mark.parametrize("path", ["app.py", "..%2Fconfig.py", "%2e%2e/config.py", ".%2Findex.html", "APP.JS",
                                  "index.html%00"])
async def test_no_other_name_is_served(courier_api, path):
    api = await courier_api()
    status, body, _ = await api.get(f"/courier/miniapp/{path}", token=None)
    assert status == 404 and b"[Courier]" not in (body if isinstance(body, bytes) else b"")


def test_the_page_asks_nothing_of_any_server():
    """No URL to anywhere in the page: it learns only what its own URL carries."""
    for file in MINIAPP.iterdir():
        text = file.read_text()
        assert "http://" not in text and "https://" not in text and "fetch(" not in text, file.name
        assert "XMLHttpRequest" not in text and "WebSocket" not in text, file.name
