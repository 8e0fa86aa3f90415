""" "Will it run?": whether a framework build runs on a GPU with a given software stack.

Plain Python (no database), like the estimator: the rules of
docs/reference/software-compatibility.md §0, each reason naming the rule and the sources it
comes from. A reason is yes, no, or unknown (a stack not reported, a fact the sources did
not confirm): never a guess. The words are sizing.compat_services' (both languages).

- R1/R2 driver: at least the build's toolkit driver (Table 3) runs it; below that but at
  least its CUDA major's minor-version-compatibility floor (Table 2) runs it with a limited
  feature set, and code that must be JIT-compiled from PTX does not run (N2); below the
  floor only the forward-compatibility package would help, on data-center GPUs only (N3).
- R3 architecture: a cubin for CC X.y runs on CC X.z, z ≥ y, same major; PTX for an older
  CC is JIT-compiled for a newer GPU (N10).
- ROCm: the build's release lists the GPU's gfx target (A1, A5; MI350 needs 7.0: V1), and
  the node's ROCm is within the documented window of it (A4) or, for a stated floor, at
  least the floor (V1).
"""

from dataclasses import dataclass, field

from catalog.software import version_key

YES, NO, UNKNOWN = True, False, None

# Feature floors (§4), by compute capability.
BF16_MIN_CC = "8.0"  # F2; PyTorch's is_bf16_supported fast path: CC major ≥ 8 (P7)
FP8_MIN_CC = "8.9"  # F2 (Transformer Engine, per-tensor FP8); vLLM W8A8 too (V2)
FA2_MIN_CUDA = "12.0"  # F1
FA3_MIN_CUDA = "12.3"  # F1
BLACKWELL_MIN_CUDA = "12.8"  # N11: nvcc generates Blackwell cubins from 12.8
CUDA13_MIN_CC = "7.5"  # N12: 13.0 removed offline compilation for Maxwell, Pascal, Volta
FEATURES = ("bf16", "fp8", "flash-attention-2", "flash-attention-3")


@dataclass(frozen=True)
class Build:
    """What is checked: a framework build, or a bare CUDA toolkit (framework "cuda")."""

    framework: str
    version: str
    build: str
    stack: str  # "cuda" or "rocm"
    toolkit: str  # the CUDA or ROCm version it was built with
    archs: tuple[str, ...] = ()  # compute capabilities compiled in (SASS)
    ptx: bool = False  # carries PTX of the newest
    min_compute: str = ""  # a documented floor instead of a list
    toolkit_is_minimum: bool = False  # ROCm: the node's must be at least `toolkit`
    sources: tuple[str, ...] = ()


@dataclass(frozen=True)
class Gpu:
    """A GPU model with one software stack (its nodes that run it)."""

    name: str
    vendor: str  # "nvidia" or "amd"
    target: str  # compute capability (9.0) or gfx target (gfx942)
    driver: str = ""  # empty: unknown
    cuda: str = ""
    rocm: str = ""
    bf16: bool = False  # the catalog's spec (ROCm features)
    fp8: bool = False
    data_center: bool = True  # forward compatibility works on data-center GPUs only (N3)


@dataclass(frozen=True)
class Reference:
    """The tables the rules read: toolkit → (driver, sources); minor-compat floor per
    CUDA major; ROCm release (major.minor) → (gfx targets, sources)."""

    toolkits: dict[str, tuple[str, tuple[str, ...]]]
    floors: dict[int, tuple[str, str]]
    rocm: dict[str, tuple[frozenset[str], tuple[str, ...]]]


@dataclass
class Reason:
    rule: str  # a code the words are looked up by
    ok: bool | None
    params: dict = field(default_factory=dict)
    sources: tuple[str, ...] = ()


@dataclass
class Verdict:
    runs: bool | None
    reasons: list[Reason]


def _ge(a: str, b: str) -> bool:
    return version_key(a) >= version_key(b)


def _major_minor(version: str) -> tuple[int, int]:
    parts = version_key(version) + [0]
    return parts[0], parts[1]


def _mm(version: str) -> str:
    return "{}.{}".format(*_major_minor(version))


def check(build: Build, gpu: Gpu, ref: Reference, features=()) -> Verdict:
    """Whether `build` runs on `gpu` as its stack stands, with every reason."""
    if build.stack == "rocm":
        reasons = _rocm(build, gpu, ref) + [_rocm_feature(f, gpu) for f in features]
    else:
        arch, needs_jit = _architecture(build, gpu)
        reasons = [arch, *_driver(build, gpu, ref, needs_jit)]
        reasons += [_cuda_feature(f, build, gpu) for f in features]
    runs: bool | None
    if any(r.ok is NO for r in reasons):
        runs = NO
    elif any(r.ok is UNKNOWN for r in reasons):
        runs = UNKNOWN
    else:
        runs = YES
    return Verdict(runs, reasons)


# --- NVIDIA ------------------------------------------------------------------------------


def _architecture(build: Build, gpu: Gpu) -> tuple[Reason, bool]:
    """(the reason, whether this GPU runs it only through PTX JIT)."""
    if gpu.vendor != "nvidia":
        return Reason("vendor_mismatch", NO, {"stack": "CUDA", "gpu": gpu.name}), False
    cc = gpu.target
    major, minor = _major_minor(cc)
    if build.archs:
        sass = [
            a for a in build.archs if _major_minor(a)[0] == major and _major_minor(a)[1] <= minor
        ]
        if sass:
            best = max(sass, key=version_key)
            return Reason("arch_sass", YES, {"cc": cc, "sm": best},
                          (*build.sources, "N10")), False  # fmt: skip
        newest = max(build.archs, key=version_key)
        if build.ptx and _ge(cc, newest):
            return Reason("arch_ptx", YES, {"cc": cc, "ptx": newest},
                          (*build.sources, "N10")), True  # fmt: skip
        return Reason("arch_missing", NO, {"cc": cc, "archs": ", ".join(build.archs)},
                      (*build.sources, "N10")), False  # fmt: skip
    if major >= 10 and not _ge(build.toolkit, BLACKWELL_MIN_CUDA):
        return Reason("arch_blackwell_toolkit", NO, {"cc": cc, "toolkit": build.toolkit,
                      "min": BLACKWELL_MIN_CUDA}, ("N11", *build.sources)), False  # fmt: skip
    if build.min_compute:
        if _ge(cc, build.min_compute):
            return Reason("arch_floor", YES, {"cc": cc, "min": build.min_compute},
                          build.sources), False  # fmt: skip
        return Reason("arch_below_floor", NO, {"cc": cc, "min": build.min_compute},
                      build.sources), False  # fmt: skip
    # a bare toolkit: which GPUs it can compile for
    if _major_minor(build.toolkit)[0] >= 13 and not _ge(cc, CUDA13_MIN_CC):
        return Reason("arch_cuda13_dropped", NO, {"cc": cc, "toolkit": build.toolkit},
                      ("N12",)), False  # fmt: skip
    return Reason("arch_toolkit", YES, {"cc": cc, "toolkit": build.toolkit}, ("N11", "N12")), False


def _driver(build: Build, gpu: Gpu, ref: Reference, needs_jit: bool) -> list[Reason]:
    if gpu.vendor != "nvidia":
        return []
    toolkit = _mm(build.toolkit)
    major = _major_minor(toolkit)[0]
    found = ref.toolkits.get(toolkit)
    floor, floor_source = ref.floors.get(major, ("", ""))
    if found is None:
        return [Reason("toolkit_unknown", UNKNOWN, {"toolkit": toolkit})]
    driver_min, sources = found
    if not gpu.driver and not gpu.cuda:
        return [Reason("stack_unknown", UNKNOWN, {})]
    if gpu.driver:
        meets, within_floor = _ge(gpu.driver, driver_min), bool(floor) and _ge(gpu.driver, floor)
        # a driver of a newer major family is above this major's floor and its own
        params = {"driver": gpu.driver, "toolkit": toolkit, "min": driver_min, "floor": floor,
                  "major": major}  # fmt: skip
    else:  # only the header's "CUDA Version" is known: the highest the driver supports
        meets = _ge(gpu.cuda, toolkit)
        within_floor = _major_minor(gpu.cuda)[0] >= major
        params = {"cuda": gpu.cuda, "toolkit": toolkit, "min": driver_min, "floor": floor,
                  "major": major}  # fmt: skip
    if meets:
        return [Reason("driver_meets" if gpu.driver else "cuda_meets", YES, params, sources)]
    if within_floor:
        if needs_jit:
            return [Reason("minor_compat_no_ptx", NO, params, ("N2",))]
        return [Reason("minor_compat", YES, params, (floor_source, "N2"))]
    package = "cuda-compat-{}-{}".format(*_major_minor(toolkit))
    rule = "forward_compat" if gpu.data_center else "forward_compat_not_this_gpu"
    return [Reason(rule, NO, {**params, "package": package}, ("N3", floor_source))]


def _cuda_feature(feature: str, build: Build, gpu: Gpu) -> Reason:
    cc = gpu.target
    if gpu.vendor != "nvidia":
        return Reason("feature_unchecked", UNKNOWN, {"feature": feature})
    if feature == "bf16":
        ok = _ge(cc, BF16_MIN_CC)
        return Reason("bf16", ok, {"cc": cc, "min": BF16_MIN_CC}, ("F2", "P7"))
    if feature == "fp8":
        ok = _ge(cc, FP8_MIN_CC)
        return Reason("fp8", ok, {"cc": cc, "min": FP8_MIN_CC}, ("F2", "V2"))
    major = _major_minor(cc)[0]
    if feature == "flash-attention-2":
        if not _ge(build.toolkit, FA2_MIN_CUDA):
            return Reason("fa_toolkit", NO, {"feature": "FlashAttention-2",
                          "toolkit": build.toolkit, "min": FA2_MIN_CUDA}, ("F1",))  # fmt: skip
        if major in (8, 9):
            return Reason("fa2", YES, {"cc": cc}, ("F1",))
        if major >= 10:
            return Reason("fa2_blackwell", UNKNOWN, {"cc": cc}, ("F1",))
        return Reason("fa2_older", NO, {"cc": cc}, ("F1",))
    if feature == "flash-attention-3":
        if not _ge(build.toolkit, FA3_MIN_CUDA):
            return Reason("fa_toolkit", NO, {"feature": "FlashAttention-3",
                          "toolkit": build.toolkit, "min": FA3_MIN_CUDA}, ("F1",))  # fmt: skip
        ok = _major_minor(cc) == (9, 0)
        return Reason("fa3", ok, {"cc": cc}, ("F1",))
    return Reason("feature_unchecked", UNKNOWN, {"feature": feature})


# --- AMD ---------------------------------------------------------------------------------


def _rocm(build: Build, gpu: Gpu, ref: Reference) -> list[Reason]:
    if gpu.vendor != "amd":
        return [Reason("vendor_mismatch", NO, {"stack": "ROCm", "gpu": gpu.name})]
    release = _mm(build.toolkit)
    gfx = gpu.target
    # MI350 needs ROCm 7.0 (V1): the build's own ROCm, or for a stated floor the node's
    rocm_of_gfx950 = gpu.rocm if build.toolkit_is_minimum else build.toolkit
    if gfx == "gfx950" and rocm_of_gfx950 and not _ge(rocm_of_gfx950, "7.0"):
        target = Reason("gfx950_needs_7", NO, {"gfx": gfx, "rocm": rocm_of_gfx950}, ("V1",))
    elif build.toolkit_is_minimum:  # a floor for every GPU it names (vLLM: ROCm ≥ 6.3)
        target = Reason("rocm_floor_gpu", YES, {"gfx": gfx, "rocm": build.toolkit},
                        build.sources)  # fmt: skip
    elif (listed := ref.rocm.get(release)) is None:
        target = Reason("gfx_release_unread", UNKNOWN, {"gfx": gfx, "rocm": release})
    elif gfx in listed[0]:
        target = Reason("gfx_listed", YES, {"gfx": gfx, "rocm": release}, listed[1])
    else:
        target = Reason("gfx_not_listed", UNKNOWN, {"gfx": gfx, "rocm": release}, listed[1])
    if not gpu.rocm:
        return [target, Reason("stack_unknown", UNKNOWN, {})]
    have = gpu.rocm
    if build.toolkit_is_minimum:
        ok = _ge(have, build.toolkit)
        return [target, Reason("rocm_floor", ok, {"rocm": have, "min": build.toolkit},
                               build.sources)]  # fmt: skip
    (b_major, b_minor), (n_major, n_minor) = _major_minor(build.toolkit), _major_minor(have)
    ok = b_major == n_major and abs(b_minor - n_minor) <= 2
    return [target, Reason("rocm_window" if ok else "rocm_outside_window", ok,
                           {"rocm": have, "build": build.toolkit}, ("A4",))]  # fmt: skip


def _rocm_feature(feature: str, gpu: Gpu) -> Reason:
    if gpu.vendor != "amd":
        return Reason("feature_unchecked", UNKNOWN, {"feature": feature})
    if feature in ("bf16", "fp8"):
        ok = gpu.bf16 if feature == "bf16" else gpu.fp8
        return Reason("feature_catalog", ok, {"feature": feature.upper(), "gpu": gpu.name},
                      ("catalog",))  # fmt: skip
    return Reason("feature_unchecked", UNKNOWN, {"feature": feature})
