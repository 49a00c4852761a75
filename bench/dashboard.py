"""Render docs/grafana-dashboard.json's panels from a real run, for docs/screenshot-metrics.png.

Grafana is not installable here (no Debian, PyPI or npm package), so this does what it would with
the same queries: it starts redis-server, the benchmark's receiver and a real worker serving
``WEBHOOKS_METRICS_PORT``, publishes events for a while to three endpoints (fast, slow, always 503),
scrapes the worker's ``/metrics`` every ``SCRAPE_SECONDS``, evaluates each panel's query on those
scrapes (``rate()`` over ``RATE_WINDOW_SECONDS``, ``histogram_quantile()`` interpolated as Prometheus
does), draws the panels where the dashboard's grid puts them, and has Chromium take the picture.

Run: ``python -m bench.dashboard [--seconds 90] [--out docs/screenshot-metrics.png]``.
"""

from __future__ import annotations

import argparse
import html
import json
import math
import sys
import tempfile
import textwrap
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from bench.harness import BIN, SECRET, free_port, harness, wait_until

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "docs" / "grafana-dashboard.json"
SCRAPE_SECONDS = 2.0
RATE_WINDOW_SECONDS = 20.0
EVENTS_PER_SECOND = 15

Labels = tuple[tuple[str, str], ...]
Scrape = tuple[float, dict[tuple[str, Labels], float]]
Series = dict[str, list[tuple[float, float]]]

PUBLISHER = textwrap.dedent(
    """
    import sys, time
    from webhooks import publish_event
    from webhooks.samples import sample_event_kwargs
    rate, until = float(sys.argv[1]), time.monotonic() + float(sys.argv[2])
    kinds = ["user_created", "company_updated", "form_submitted"]
    n = 0
    while time.monotonic() < until:
        publish_event(kinds[n % 3], **sample_event_kwargs(kinds[n % 3]))
        n += 1
        time.sleep(1 / rate)
    """
)


def scrape(port: int) -> dict[tuple[str, Labels], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def run(seconds: float, workdir: Path) -> list[Scrape]:
    """Deliver for ``seconds`` (then half as long to drain) and return the timed scrapes."""
    scrapes: list[Scrape] = []
    with harness(workdir) as bench:
        registry = workdir / "endpoints.yaml"
        endpoints = [("crm", bench.endpoint_url("crm", 20)), ("erp", bench.endpoint_url("erp", 250))]
        endpoints.append(("legacy", bench.endpoint_url("legacy", 5, status=503)))
        registry.write_text(
            yaml.safe_dump(
                {"endpoints": [{"id": i, "url": u, "secret": SECRET, "events": ["all"]} for i, u in endpoints]}
            )
        )
        port = free_port()
        env = {
            "PATH": str(BIN),
            "WEBHOOKS_BROKER_URL": bench.redis_url,
            "WEBHOOKS_REGISTRY": str(registry),
            "WEBHOOKS_ALLOW_PRIVATE_NETWORKS": "true",
            "WEBHOOKS_RETRY_BACKOFF": "5",
            "WEBHOOKS_RETRY_BACKOFF_MAX": "20",
            "WEBHOOKS_METRICS_PORT": str(port),
            "WEBHOOKS_METRICS_ADDRESS": "127.0.0.1",
        }
        bench.start("worker", [str(BIN / "celery"), "-A", "webhooks", "worker", "--loglevel", "WARNING"], env)
        wait_until(lambda: answers(port), timeout=60, what="the worker's metrics port")
        bench.start("publisher", [sys.executable, "-c", PUBLISHER, str(EVENTS_PER_SECOND), str(seconds)], env)
        started = time.monotonic()
        while (now := time.monotonic() - started) < seconds * 1.5:
            scrapes.append((now, scrape(port)))
            time.sleep(SCRAPE_SECONDS)
    return scrapes


def answers(port: int) -> bool:
    try:
        return bool(scrape(port))
    except OSError:
        return False


def _matching(sample: dict[tuple[str, Labels], float], name: str, keep: Callable[[dict[str, str]], bool]):
    return {labels: value for (n, labels), value in sample.items() if n == name and keep(dict(labels))}


def rate_by(scrapes: list[Scrape], name: str, by: tuple[str, ...], keep=lambda labels: True) -> Series:
    """``sum by (by) (rate(name[window]))`` at each scrape that has a scrape ``window`` seconds before it."""
    series: Series = {}
    for index, (t, sample) in enumerate(scrapes):
        earlier = [(t0, s0) for t0, s0 in scrapes[:index] if t - t0 >= RATE_WINDOW_SECONDS]
        if not earlier:
            continue
        t0, s0 = earlier[-1]
        before = _matching(s0, name, keep)
        sums: dict[str, float] = {}
        for labels, value in _matching(sample, name, keep).items():
            key = " ".join(dict(labels)[b] for b in by) or "all"
            sums[key] = sums.get(key, 0.0) + (value - before.get(labels, 0.0)) / (t - t0)
        for key, value in sums.items():
            series.setdefault(key, []).append((t, value))
    return series


def quantile(q: float, buckets: list[tuple[float, float]]) -> float:
    """Prometheus' histogram_quantile: linear interpolation inside the bucket the rank falls in."""
    buckets = sorted(buckets)
    total = buckets[-1][1]
    if total <= 0:
        return math.nan
    rank, lower, below = q * total, 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower
            return lower + (bound - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = bound, count
    return lower


def latency(scrapes: list[Scrape]) -> Series:
    rates = rate_by(scrapes, "webhooks_attempt_duration_seconds_bucket", ("le",))
    series: Series = {}
    times = sorted({t for points in rates.values() for t, _ in points})
    for t in times:
        buckets = [(float(le), dict(points).get(t, 0.0)) for le, points in rates.items()]
        for q in (0.5, 0.95, 0.99):
            series.setdefault(f"p{int(q * 100)}", []).append((t, quantile(q, buckets)))
    return series


def gauge(scrapes: list[Scrape], name: str, legend: str) -> Series:
    return {legend: [(t, sample.get((name, ()), 0.0)) for t, sample in scrapes]}


def panel_series(scrapes: list[Scrape]) -> dict[int, Series]:
    """Each panel's query (by id, as in the dashboard JSON), evaluated on the scrapes."""
    attempts = rate_by(scrapes, "webhooks_attempts_total", ("endpoint",))
    failed = rate_by(scrapes, "webhooks_attempts_total", ("endpoint",), lambda labels: labels["outcome"] != "delivered")
    share = {
        endpoint: [(t, dict(failed.get(endpoint, [])).get(t, 0.0) / v) for t, v in points if v > 0]
        for endpoint, points in attempts.items()
    }
    return {
        1: gauge(scrapes, "webhooks_queue_length", "queue"),
        2: gauge(scrapes, "webhooks_retries_waiting", "retries waiting"),
        3: gauge(scrapes, "webhooks_inbox_length", "inbox"),
        4: gauge(scrapes, "webhooks_oldest_waiting_seconds", "oldest due"),
        5: rate_by(scrapes, "webhooks_deliveries_total", ("outcome",)),
        6: rate_by(scrapes, "webhooks_attempts_total", ("endpoint", "outcome")),
        7: latency(scrapes),
        8: share,
        9: gauge(scrapes, "webhooks_queue_length", "queue")
        | gauge(scrapes, "webhooks_retries_waiting", "retries waiting")
        | gauge(scrapes, "webhooks_inbox_length", "inbox"),
    }


COLOURS = ["#73bf69", "#f2cc0c", "#8ab8ff", "#ff780a", "#f2495c", "#5794f2", "#b877d9", "#fade2a", "#19730e"]


def svg_chart(series: Series, width: int, height: int, unit: str, *, axes: bool = True) -> str:
    points = [(t, v) for values in series.values() for t, v in values if not math.isnan(v)]
    if not points:
        return f'<svg width="{width}" height="{height}"><text x="10" y="20" fill="#ccc">No data</text></svg>'
    t_min, t_max = min(t for t, _ in points), max(t for t, _ in points)
    v_max = max(v for _, v in points) * 1.1 or 1.0
    left, bottom = (48, 22) if axes else (0, 0)

    def x(t: float) -> float:
        return left + (t - t_min) / max(t_max - t_min, 1e-9) * (width - left - 8)

    def y(v: float) -> float:
        return 6 + (1 - v / v_max) * (height - bottom - 6)

    parts = [f'<svg width="{width}" height="{height}" font-size="11" fill="#ccc">']
    for step in range(5 if axes else 0):
        value = v_max * step / 4
        parts.append(f'<line x1="{left}" x2="{width - 8}" y1="{y(value):.1f}" y2="{y(value):.1f}" stroke="#333"/>')
        parts.append(f'<text x="4" y="{y(value) + 4:.1f}">{_fmt(value, unit)}</text>')
    for step in range(5 if axes else 0):
        t = t_min + (t_max - t_min) * step / 4
        parts.append(f'<text x="{min(x(t) - 10, width - 40):.1f}" y="{height - 6}">{int(t)} s</text>')
    for colour, (_, values) in zip(COLOURS * 3, sorted(series.items()), strict=False):
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in values if not math.isnan(v))
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
    parts.append("</svg>")
    return "".join(parts)


def _fmt(value: float, unit: str) -> str:
    if unit == "percentunit":
        return f"{value * 100:.0f}%"
    if unit == "s":
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"
    if unit == "ops":
        return f"{value:.1f}/s"
    return f"{value:.0f}"


def page(dashboard: dict, series: dict[int, Series], scrapes: int) -> str:
    column, row = 1200 / 24, 34
    blocks = []
    for panel in dashboard["panels"]:
        grid, unit = panel["gridPos"], panel["fieldConfig"]["defaults"]["unit"]
        width, height = int(grid["w"] * column) - 8, int(grid["h"] * row) - 8
        data = series[panel["id"]]
        if panel["type"] == "stat":
            last = next(iter(data.values()))[-1][1] if data else 0.0
            body = f'<div class="stat">{html.escape(_fmt(last, unit))}</div>'
            body += svg_chart(data, width - 16, height - 78, unit, axes=False)
        else:
            legend = " ".join(
                f'<span style="color:{c}">&#9644; {html.escape(n)}</span>'
                for c, n in zip(COLOURS * 3, sorted(data), strict=False)
            )
            body = svg_chart(data, width - 16, height - 58, unit) + f'<div class="legend">{legend}</div>'
        blocks.append(
            f'<div class="panel" style="left:{grid["x"] * column:.0f}px;top:{grid["y"] * row + 40}px;'
            f'width:{width}px;height:{height}px"><div class="title">{html.escape(panel["title"])}</div>{body}</div>'
        )
    note = (
        f"{html.escape(dashboard['title'])}: the panels of docs/grafana-dashboard.json drawn by bench/dashboard.py "
        f"from {scrapes} scrapes of a real worker (not Grafana; rate windows {RATE_WINDOW_SECONDS:.0f} s)"
    )
    return f"""<!doctype html><html><head><style>
body {{ background:#111217; color:#ccc; font-family: sans-serif; margin:0; }}
.head {{ padding:10px 12px; font-size:15px; }}
.panel {{ position:absolute; background:#181b1f; border:1px solid #2c3235; border-radius:3px; padding:8px; }}
.title {{ font-size:13px; font-weight:600; margin-bottom:6px; color:#d8d9da; }}
.stat {{ font-size:32px; color:#73bf69; font-weight:600; }}
.legend {{ font-size:11px; margin-top:4px; }} .legend span {{ margin-right:10px; }}
</style></head><body><div class="head">{note}</div>{"".join(blocks)}</body></html>"""


def screenshot(document: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        tab = browser.new_page(viewport={"width": 1208, "height": 1040})
        tab.set_content(document)
        tab.screenshot(path=str(out), full_page=True)
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=90.0, help="How long to publish events.")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshot-metrics.png")
    args = parser.parse_args()
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    with tempfile.TemporaryDirectory(prefix="webhooks-dashboard-") as workdir:
        scrapes = run(args.seconds, Path(workdir))
    screenshot(page(dashboard, panel_series(scrapes), len(scrapes)), args.out)
    last = scrapes[-1][1]
    delivered = sum(
        v for (n, labels), v in last.items() if n == "webhooks_attempts_total" and ("outcome", "delivered") in labels
    )
    print(f"{len(scrapes)} scrapes; {delivered:.0f} delivered attempts in the last; wrote {args.out}")


if __name__ == "__main__":
    main()
