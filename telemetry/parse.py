"""Exporter text → per-GPU readings in our units (telemetry-formats.md §1, §2, §4).

Families are keyed on `family.name` (the parser renames counter samples), labels are read by
name (`Hostname`/`hostname` and label order churn), sentinels and non-finite values become
None: a missing value is missing, never zero. A scrape that fails to parse is rejected whole.
"""

import math
import re
from dataclasses import dataclass, field
from typing import NamedTuple

from prometheus_client.parser import text_string_to_metric_families

MIB = 2**20
DCGM_BLANK_INT64 = 9.2e18  # 9223372036854775792..795: BLANK, NOT_FOUND, NOT_SUPPORTED, …
DCGM_BLANK_INT32 = range(2147483632, 2147483636)
DCGM_BLANK_FP64 = 1.4e14  # DCGM's FP64 blanks sit near 2**47


class ScrapeError(ValueError):
    """The body is not usable exporter text (HTML, truncated, garbage)."""


@dataclass
class Reading:
    key: str
    index: int | None = None
    utilization: float | None = None
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    energy_j: float | None = None  # a counter: joules since the GPU's boot
    xid: int | None = None
    # AMD's RAS: uncorrectable ECC errors since the driver loaded (any is a GPU to reset)
    ras_uncorrectable: float | None = None
    _fb: dict = field(default_factory=dict, repr=False)
    _alt: dict = field(default_factory=dict, repr=False)


@dataclass
class Scrape:
    readings: dict[str, Reading]
    problems: list[str]
    gpu_families: int
    # dcgm-exporter's DCGM_FI_DRIVER_VERSION label, where its counters CSV declares it
    driver: str = ""


# What a DCGM field holds decides which blank it can carry (telemetry-formats.md §1): an
# integer field's blanks are near 2**63 (or 2**31), an FP64 field's near 2**47. A counter
# such as the energy in mJ is an integer field: real values never reach 9.2e18, while a
# real FP64-sized limit would cut it off after a few days (and AMD's µJ counter sooner).
INT, FP64, PLAIN = "int", "fp64", "plain"


def _value(raw, problems, name, key, kind=INT):
    value = float(raw)
    if not math.isfinite(value):
        problems.append(f"{name} for {key} is {raw}: ignored")
        return None
    blank = (
        value >= DCGM_BLANK_FP64
        if kind == FP64
        else kind == INT and (value >= DCGM_BLANK_INT64 or int(value) in DCGM_BLANK_INT32)
    )
    if blank:
        problems.append(f"{name} for {key} is a DCGM blank ({raw}): ignored")
        return None
    return value


DCGM_FIELDS = {
    "DCGM_FI_DEV_GPU_UTIL": ("utilization", 1.0, INT),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0, FP64),
    "DCGM_FI_DEV_GPU_TEMP": ("temperature_c", 1.0, INT),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_j", 1e-3, INT),  # mJ, a counter
    "DCGM_FI_DEV_XID_ERRORS": ("xid", 1.0, INT),
}
DCGM_FB = {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED"}
DCGM_ALT_UTIL = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0..1; the MIG-capable utilisation

# AMD's exporter has no blank values; only non-finite ones are dropped.
AMD_FIELDS = {
    "gpu_gfx_activity": ("utilization", 1.0),
    "gpu_used_vram": ("memory_used_mib", 1e6 / MIB),  # MB
    "gpu_total_vram": ("memory_total_mib", 1e6 / MIB),
    "gpu_power_usage": ("power_w", 1.0),
    "gpu_edge_temperature": ("temperature_c", 1.0),
    "gpu_energy_consumed": ("energy_j", 1e-6),  # µJ, a counter served as a gauge
    "gpu_ecc_uncorrect_total": ("ras_uncorrectable", 1.0),  # RAS, AMD's fatal XIDs
}
AMD_FALLBACKS = {
    "gpu_package_power": "power_w",
    "gpu_average_package_power": "power_w",
    "gpu_junction_temperature": "temperature_c",
}


GPU_INDEX = re.compile(r"[0-9]{1,4}")
XID_MAX = 2**31 - 1  # the column is a 32-bit integer


def _index(raw) -> int | None:
    """A GPU index label: ASCII digits only ("²" passes isdigit() and fails int())."""
    return int(raw) if isinstance(raw, str) and GPU_INDEX.fullmatch(raw) else None


def _xid(value, problems, key) -> int | None:
    if not 0 <= value <= XID_MAX:
        problems.append(f"XID {value:g} for {key} is out of range: ignored")
        return None
    return int(value)


class _Strange(Exception):
    """A line the fast reader does not recognise: prometheus_client's parser decides."""


class _Sample(NamedTuple):  # a tuple: built for every line, so it must be cheap
    name: str
    labels: dict
    value: float


@dataclass
class _Family:
    name: str
    samples: list


_LINE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+-?[0-9]+)?[ \t]*")
_NAME, _QUOTED = r"[a-zA-Z_][a-zA-Z0-9_]*", r'"(?:[^"\\]|\\.)*"'
_LABEL = re.compile(rf'[ \t]*({_NAME})[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*')
# The whole label list, each label followed by a comma or the end: checked in one pass
# (in C), then the pairs read in another, instead of a Python loop per label.
_ONE = rf"[ \t]*{_NAME}[ \t]*=[ \t]*{_QUOTED}[ \t]*"
_LABEL_LIST = re.compile(rf"(?:{_ONE},)*(?:{_ONE})?")
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
_ESCAPE = re.compile(r"\\.")


def _unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(0), m.group(0)), value)


def _labels(raw: str | None) -> dict:
    if not raw:
        return {}
    if _LABEL_LIST.fullmatch(raw) is None:
        raise _Strange
    pairs = _LABEL.findall(raw)
    labels = dict(pairs) if "\\" not in raw else {n: _unescape(v) for n, v in pairs}
    if len(labels) != len(pairs):  # a label named twice
        raise _Strange
    return labels


def _fast_families(text: str) -> list[_Family]:
    """The exporters' plain text format, read strictly: one sample per line, families by
    name (a counter's `_total` sample belongs to its family). Anything unusual raises
    `_Strange`, and prometheus_client's full parser reads the body instead."""
    counters: set[str] = set()
    families: dict[str, _Family] = {}
    # An exporter repeats each GPU's label list on every family: read each list once.
    # (Samples share the dict; readers only read it.)
    label_lists: dict[str | None, dict] = {}
    for line in text.split("\n"):
        if not line or line.isspace():
            continue
        if line[0] == "#":
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE" and parts[3].strip() == "counter":
                counters.add(parts[2].removesuffix("_total"))
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise _Strange
        name, raw_labels, raw_value = match.groups()
        if name.endswith("_total") and name[:-6] in counters:
            name = name[:-6]
        try:  # whole numbers stay exact, as prometheus_client keeps them
            value = int(raw_value) if raw_value.lstrip("+-").isdigit() else float(raw_value)
        except ValueError as exc:
            raise _Strange from exc
        family = families.get(name)
        if family is None:
            family = families[name] = _Family(name, [])
        labels = label_lists.get(raw_labels)
        if labels is None:
            labels = label_lists[raw_labels] = _labels(raw_labels)
        family.samples.append(_Sample(name, labels, value))
    return list(families.values())


def _families(text):
    try:
        return _fast_families(text)
    except _Strange:
        pass
    try:
        return list(text_string_to_metric_families(text))
    except (ValueError, IndexError, TypeError) as exc:
        # Never the body itself: it ends up in health_detail, which staff read.
        raise ScrapeError(f"unparseable exporter text ({type(exc).__name__})") from exc


class _Scan:
    """What a reader gathers from one body, whichever exporter wrote it: readings by GPU
    key, the problems met, and how many GPU families it had."""

    def __init__(self):
        self.readings: dict[str, Reading] = {}
        self.problems: list[str] = []
        self.seen: set = set()
        self.gpu_families = 0
        self.driver = ""

    def reading(self, name: str, key: str, identity: tuple, index) -> Reading:
        """The GPU's reading that a sample of series `identity` adds to (made on its first
        sample, its index from the `index` label); a repeated series is a problem, and the
        last one is kept."""
        if identity in self.seen:
            self.problems.append(f"duplicate series {name} for {key}: last one kept")
        self.seen.add(identity)
        reading = self.readings.get(key)
        if reading is None:  # not setdefault: that builds a Reading for every sample
            reading = self.readings[key] = Reading(key=key)
        if reading.index is None:
            reading.index = _index(index)
        return reading

    def scrape(self) -> Scrape:
        return Scrape(self.readings, self.problems, self.gpu_families, self.driver)


def dcgm_scrape(families) -> Scrape:
    """dcgm-exporter's families (each with `name` and `samples` of `labels` and `value`),
    from a body or from a time-series engine's answer, read as one scrape."""
    scan = _Scan()
    problems = scan.problems
    for family in families:
        name = family.name
        known = name in DCGM_FIELDS or name in DCGM_FB or name == DCGM_ALT_UTIL
        if not known and not name.startswith("DCGM_"):
            continue
        scan.gpu_families += 1
        if not known:
            continue
        for sample in family.samples:
            labels = sample.labels
            key = labels.get("UUID") or labels.get("uuid")
            if not key:
                problems.append(f"{name} sample without UUID: skipped")
                continue
            if not scan.driver:
                scan.driver = labels.get("DCGM_FI_DRIVER_VERSION", "")
            mig = labels.get("GPU_I_ID")
            identity = (name, key, mig, labels.get("err_code"))
            reading = scan.reading(name, key, identity, labels.get("gpu"))
            kind = DCGM_FIELDS[name][2] if name in DCGM_FIELDS else INT
            value = _value(
                sample.value, problems, name, key, FP64 if name == DCGM_ALT_UTIL else kind
            )
            if value is None:
                continue
            if name in DCGM_FB:
                # MIG slices of one GPU add up; a repeated series replaces itself.
                reading._fb[(name, mig)] = value
            elif name == DCGM_ALT_UTIL:
                reading._alt[mig] = value * 100
            else:
                attr, scale, _kind = DCGM_FIELDS[name]
                if attr == "xid":
                    value = _xid(value, problems, key)
                    if value is None:
                        continue
                setattr(reading, attr, value if attr == "xid" else value * scale)
    for reading in scan.readings.values():
        used = [v for (n, _), v in reading._fb.items() if n == "DCGM_FI_DEV_FB_USED"]
        free = [v for (n, _), v in reading._fb.items() if n == "DCGM_FI_DEV_FB_FREE"]
        reserved = [v for (n, _), v in reading._fb.items() if n == "DCGM_FI_DEV_FB_RESERVED"]
        if used:
            reading.memory_used_mib = sum(used)
            if free:
                reading.memory_total_mib = sum(used) + sum(free) + sum(reserved)
        if reading.utilization is None and reading._alt:
            reading.utilization = max(reading._alt.values())
    return scan.scrape()


def amd_key(labels) -> str | None:
    """Serial, else the exporter's GPU UUID, else the GPU id (serials are empty on VMs)."""
    if labels.get("serial_number") or labels.get("gpu_uuid"):
        return labels.get("serial_number") or labels.get("gpu_uuid")
    index = _index(labels.get("gpu_id"))
    return f"gpu_id:{index}" if index is not None else None


def amd_scrape(families, prefix: str = "") -> Scrape:
    """The AMD exporter's families, from a body or an engine's answer, as one scrape."""
    scan = _Scan()
    problems = scan.problems
    for family in families:
        name = family.name
        if prefix and name.startswith(prefix):
            name = name[len(prefix) :]
        if not name.startswith("gpu_") or name == "gpu_nodes_total":
            continue
        scan.gpu_families += 1
        if name not in AMD_FIELDS and name not in AMD_FALLBACKS:
            continue
        for sample in family.samples:
            labels = sample.labels
            if labels.get("gpu_partition_id", "0") not in ("0", "NA", ""):
                continue  # partition metrics are reported on partition 0 only
            key = amd_key(labels)
            if not key:
                problems.append(f"{name} sample without serial_number, gpu_uuid or gpu_id: skipped")
                continue
            reading = scan.reading(name, key, (name, key), labels.get("gpu_id"))
            value = _value(sample.value, problems, name, key, PLAIN)
            if value is None:
                continue
            if name in AMD_FIELDS:
                attr, scale = AMD_FIELDS[name]
                setattr(reading, attr, value * scale)
            else:
                reading._alt.setdefault(AMD_FALLBACKS[name], value)
    for reading in scan.readings.values():
        for attr, value in reading._alt.items():
            if getattr(reading, attr) is None:
                setattr(reading, attr, value)
    return scan.scrape()


def parse_exporter(text: str, *, exporter: str, prefix: str = "") -> Scrape:
    return families_scrape(_families(text), exporter=exporter, prefix=prefix)


def families_scrape(families, *, exporter: str, prefix: str = "") -> Scrape:
    """One scrape's families read by its exporter's reader: the one definition of what a
    series means, whether the families came from a body we fetched or from an engine."""
    if exporter == "amd":
        return amd_scrape(families, prefix=prefix)
    return dcgm_scrape(families)


class Family(NamedTuple):
    """A family as an engine's answer gives it (the shape `_families` yields)."""

    name: str
    samples: list


Sample = _Sample  # one sample of a Family: name, labels, value


# The families each reader uses, for asking an engine for just those series.
DCGM_FAMILIES = (*DCGM_FIELDS, *sorted(DCGM_FB), DCGM_ALT_UTIL)
AMD_FAMILIES = (*AMD_FIELDS, *AMD_FALLBACKS)
