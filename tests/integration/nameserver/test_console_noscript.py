"""The console without JavaScript: each page says how to read its view and links the fragment the name server
renders, which opens as plain HTML (dev mode). On a real name server."""

from __future__ import annotations

import re

import httpx
import pytest

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("page", ["/console/", "/console/operations", "/console/audit"])
def test_a_page_without_javascript_links_its_server_rendered_view(cluster, page: str) -> None:
    html = httpx.get(cluster.ns_url + page, timeout=10).text
    noscript = re.search(r"<noscript>(.*?)</noscript>", html, re.S)
    assert noscript, html
    link = re.search(r'href="(/console/fragments/[^"]+)"', noscript.group(1))
    assert link, noscript.group(1)
    fragment = httpx.get(cluster.ns_url + link.group(1), timeout=10)
    assert fragment.status_code == 200 and "loading…" not in fragment.text, fragment.text
    assert re.search(r"<(table|p|section)\b", fragment.text), fragment.text
