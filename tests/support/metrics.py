"""Prometheus text parsed with ``prometheus_client``'s own parser, so a malformed exposition fails the test."""

from __future__ import annotations

from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Scrape:
    """``types``: family name (counters without ``_total``, as the parser names them) → type;
    ``samples``: (sample name, labels) → value."""

    types: dict[str, str]
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]

    def value(self, name: str, **labels: str) -> float | None:
        """The sample ``name{labels}`` (exactly those labels), or None when it is not exposed."""
        return self.samples.get((name, frozenset(labels.items())))


def parse_metrics(text: str) -> Scrape:
    types: dict[str, str] = {}
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for sample in family.samples:
            key = (sample.name, frozenset(sample.labels.items()))
            assert key not in samples, f"duplicate sample {key}"
            samples[key] = sample.value
    return Scrape(types, samples)


def scrape(url: str) -> Scrape:
    """GET ``url`` (a ``/metrics`` endpoint) and parse it; the answer must be 200 Prometheus text."""
    response = httpx.get(url, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return parse_metrics(response.text)
