"""The operator's time-series engine over the Prometheus HTTP API: Prometheus, VictoriaMetrics
(single-node, or a cluster's `…/select/<account>/prometheus`) and Mimir answer the same
`/api/v1/query` and, where they scrape themselves, `/api/v1/targets`.

Only what the remote telemetry source asks: raw samples (a range vector in an instant query,
which every engine answers with the stored samples and their own timestamps) and the
targets' last scrape. Any failure (connection, timeout, an error status, a body that is not
the API's JSON) is an `EngineError`: the engine's fault, never a node's.
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
from django.conf import settings

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class EngineError(Exception):
    """The engine could not be read: not a statement about any node."""


@dataclass
class Series:
    labels: dict[str, str]
    points: list[
        tuple[int, str]
    ]  # (milliseconds since the epoch, the value as the engine wrote it)


@dataclass
class Target:
    labels: dict[str, str]
    health: str  # up | down | unknown
    last_error: str
    last_scrape: datetime | None
    duration_s: float | None


def at_ms(ms: int) -> datetime:
    """An engine's millisecond timestamp as an aware datetime, exactly."""
    return EPOCH + timedelta(milliseconds=ms)


def ms_of(at: datetime) -> int:
    return (at - EPOCH) // timedelta(milliseconds=1)


def label_value(value: str) -> str:
    """A PromQL double-quoted string's contents."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def regex_alternatives(values) -> str:
    """An RE2 alternation that matches exactly these values (for a `=~` matcher)."""
    escaped = ("".join(c if c.isalnum() or c == "_" else "\\" + c for c in v) for v in values)
    return "|".join(sorted(escaped))


class Engine:
    """A client of one engine's API, configured by PROMETHEUS_* (docs/configuration.md)."""

    def __init__(self, conf: dict | None = None):
        conf = conf or settings.ANCHORGPU["PROMETHEUS"]
        self.base = conf["URL"].rstrip("/")
        headers = {"Accept": "application/json"}
        if conf.get("BEARER_TOKEN"):
            headers["Authorization"] = f"Bearer {conf['BEARER_TOKEN']}"
        if conf.get("TENANT"):
            headers["X-Scope-OrgID"] = conf["TENANT"]
        auth = (conf["USERNAME"], conf["PASSWORD"]) if conf.get("USERNAME") else None
        verify = conf.get("CA_FILE") or conf.get("TLS_VERIFY", True)
        self.client = httpx.Client(
            headers=headers, auth=auth, verify=verify, timeout=conf.get("TIMEOUT", 10.0)
        )

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def _get_json(self, response) -> dict:
        try:
            body = json.loads(response.content)
        except ValueError as exc:
            raise EngineError(
                f"HTTP {response.status_code}: the engine's answer is not JSON"
            ) from exc
        if not isinstance(body, dict) or body.get("status") != "success":
            error = body.get("error") if isinstance(body, dict) else None
            raise EngineError(f"HTTP {response.status_code}: {error or 'no success status'}")
        return body.get("data") or {}

    def _call(self, method: str, path: str, **kwargs) -> dict:
        try:
            response = self.client.request(method, self.base + path, **kwargs)
        except httpx.TimeoutException as exc:
            raise EngineError(f"no answer within {self.client.timeout.read:g} s") from exc
        except httpx.HTTPError as exc:
            raise EngineError(f"{type(exc).__name__}: {exc}".strip().rstrip(":")) from exc
        return self._get_json(response)

    def samples(self, selector: str, *, start: datetime, end: datetime) -> list[Series]:
        """The raw samples of the series `selector` picks in [start, end): a range vector
        evaluated a millisecond before `end` (engines differ on a window's left edge, so
        the edges are cut here), sent as a form (a shard's matcher is long)."""
        window_ms = ms_of(end) - ms_of(start)
        evaluated = ms_of(end) - 1
        data = self._call(
            "POST",
            "/api/v1/query",
            data={
                "query": f"{selector}[{window_ms}ms]",
                "time": f"{evaluated / 1000:.3f}",
                "nocache": "1",  # VictoriaMetrics: never a cached answer for a re-pull
            },
        )
        if data.get("resultType") != "matrix":
            raise EngineError(f"expected a matrix, got {data.get('resultType')!r}")
        low, high = ms_of(start), ms_of(end)
        found = []
        for item in data.get("result") or []:
            points = []
            for ts, value in item.get("values") or []:
                ms = round(float(ts) * 1000)
                if low <= ms < high:
                    points.append((ms, value))
            if points:
                found.append(Series(item.get("metric") or {}, points))
        return found

    def range_query(
        self, query: str, *, start: datetime, end: datetime, step: timedelta
    ) -> list[Series]:
        """`query` evaluated at start, start + step, … up to end (`/api/v1/query_range`),
        sent as a form; VictoriaMetrics is told not to move `start` onto a multiple of
        `step` (it does so only to cache the answer)."""
        data = self._call(
            "POST",
            "/api/v1/query_range",
            data={
                "query": query,
                "start": f"{ms_of(start) / 1000:.3f}",
                "end": f"{ms_of(end) / 1000:.3f}",
                "step": f"{step.total_seconds():g}",
                "nocache": "1",
            },
        )
        if data.get("resultType") != "matrix":
            raise EngineError(f"expected a matrix, got {data.get('resultType')!r}")
        return [
            Series(
                item.get("metric") or {},
                [(round(float(ts) * 1000), value) for ts, value in item.get("values") or []],
            )
            for item in data.get("result") or []
        ]

    def targets(self) -> list[Target] | None:
        """The engine's active scrape targets, or None where it serves no targets API (a
        VictoriaMetrics cluster's vmselect, Mimir: their agents scrape)."""
        try:
            response = self.client.get(self.base + "/api/v1/targets", params={"state": "active"})
        except httpx.HTTPError as exc:
            raise EngineError(f"{type(exc).__name__}: {exc}".strip().rstrip(":")) from exc
        if response.status_code in (400, 404, 405):
            return None
        data = self._get_json(response)
        targets = []
        for item in data.get("activeTargets") or []:
            last = item.get("lastScrape")
            try:
                last_scrape = datetime.fromisoformat(last) if last else None
            except ValueError:
                last_scrape = None
            targets.append(
                Target(
                    labels=item.get("labels") or {},
                    health=item.get("health") or "unknown",
                    last_error=item.get("lastError") or "",
                    last_scrape=last_scrape,
                    duration_s=item.get("lastScrapeDuration"),
                )
            )
        return targets
