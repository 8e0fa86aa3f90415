"""The fast reader of exporter text agrees with prometheus_client's parser wherever it
answers, and hands everything unusual to it."""

import contextlib
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from telemetry.parse import _fast_families, _Strange
from telemetry.simulator import EnergyMeter, SimGpu, SimNode, Story, render_amd, render_dcgm

FIXTURES = Path(__file__).parent / "fixtures"


def _same(value):
    return "nan" if isinstance(value, float) and math.isnan(value) else value


def _reference(text):
    return [
        (f.name, [(s.labels, _same(s.value)) for s in f.samples])
        for f in text_string_to_metric_families(text)
    ]


def _fast(text):
    return [(f.name, [(s.labels, _same(s.value)) for s in f.samples]) for f in _fast_families(text)]


def _bodies():
    node = SimNode(
        "node-1", "dcgm", "NVIDIA H100", 81559, [SimGpu(i, f"GPU-{i}", "running") for i in range(8)]
    )
    story, meter = Story(), EnergyMeter()
    yield render_dcgm(node, 1.8e9, meter=meter, story=story)
    yield render_amd(node, 1.8e9, meter=meter)
    for path in sorted(FIXTURES.glob("*.prom")):
        yield path.read_text()


@pytest.mark.parametrize("body", list(_bodies()))
def test_it_reads_the_exporters_text_as_prometheus_client_does(body):
    assert _fast(body) == _reference(body)


LABEL_VALUE = st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(LABEL_VALUE, min_size=1, max_size=3),
    number=st.one_of(st.floats(allow_nan=False), st.integers(-(2**63), 2**63)),
)
def test_escaped_label_values_and_any_number_agree(values, number):
    escaped = [v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") for v in values]
    labels = ",".join(f'l{i}="{v}"' for i, v in enumerate(escaped))
    text = f"# TYPE m gauge\nm{{{labels}}} {number!r}\n"
    assert _fast(text) == _reference(text)


@pytest.mark.parametrize(
    "body",
    [
        'm {a="b"} 1\n',  # space before the labels
        'm{a="b",a="c"} 1\n',  # a repeated label
        "m{a=b} 1\n",  # an unquoted value
        'm{a="b"} abc\n',
        "<html>502</html>\n",
    ],
)
def test_anything_unusual_goes_to_prometheus_client(body):
    with pytest.raises(_Strange):
        _fast_families(body)


SPACE = st.sampled_from(["", " ", "\t", "  "])


@settings(max_examples=200, deadline=None)
@given(
    names=st.lists(st.sampled_from(["a", "b", "gpu", "UUID", "_x"]), min_size=1, max_size=4),
    spaces=st.lists(SPACE, min_size=16, max_size=16),
    trailing_comma=st.booleans(),
    junk=st.sampled_from(["", ",", ",,", " x", '"', "=", "a"]),
)
def test_any_label_list_layout_agrees_or_is_handed_over(names, spaces, trailing_comma, junk):
    """Spacing, trailing commas, repeated names and junk between labels: the fast reader
    gives prometheus_client's answer or hands the body over, never a different answer."""
    s = iter(spaces * 2)
    pairs = [f'{next(s)}{n}{next(s)}={next(s)}"v{i}"{next(s)}' for i, n in enumerate(names)]
    labels = ",".join(pairs) + ("," if trailing_comma else "") + junk
    text = f"# TYPE m gauge\nm{{{labels}}} 1\n"
    try:
        expected = _reference(text)
    except Exception:  # noqa: BLE001  (prometheus_client refuses it: so must we)
        with pytest.raises(_Strange):
            _fast_families(text)
        return
    with contextlib.suppress(_Strange):  # handed over: prometheus_client's answer is used
        assert _fast(text) == expected
