"""The shipped compatibility reference: what "Will it run?" checks, each row with its
source (the keys of docs/reference/software-compatibility.md §7) and the date it was read.

Plain data, no Django: migration 0002 and `manage.py compatibility_reference_load` copy it
into the tables staff extend in the admin (a staff row is never overwritten by a newer
shipped table). JAX and TensorFlow are not here: no source for their builds could be cited
(the note in NOT_COVERED says so in every answer).
"""

from datetime import date

READ_ON = date(2026, 12, 5)  # when the sources below were read (the reference's compile date)

# key → where (docs/reference/software-compatibility.md §7)
SOURCES = {
    "N1": "docs.nvidia.com/cuda/archive/13.2.2/cuda-toolkit-release-notes/index.html, "
          "Tables 2 and 3",
    "N1b": "docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html (13.4 Update 1)",
    "N2": "docs.nvidia.com/deploy/cuda-compatibility/minor-version-compatibility.html",
    "N3": "docs.nvidia.com/deploy/cuda-compatibility/forward-compatibility.html",
    "N8": "developer.nvidia.com/cuda-gpus",
    "N10": "docs.nvidia.com/cuda/cuda-c-programming-guide/index.html#binary-compatibility",
    "N11": "docs.nvidia.com/cuda/blackwell-compatibility-guide",
    "N12": "docs.nvidia.com/cuda/archive/13.0.0/cuda-toolkit-release-notes/"
           "index.html#deprecated-architectures",
    "P1": "pytorch/builder release/2.4, release/2.5: manywheel/build_cuda.sh",
    "P2": "pytorch/pytorch .ci/manywheel/build_cuda.sh @ 00c7a380b8",
    "P3": "pytorch/pytorch RELEASE.md, Release Compatibility Matrix",
    "P4": "github.com/pytorch/pytorch/pull/164471, /pull/175253, /issues/172352, "
          "/issues/172663",
    "P5": "github.com/pytorch/pytorch/issues/157517, /pull/157558, /issues/160269, "
          "/pull/147607",
    "P6": "pytorch.org/get-started/previous-versions",
    "P7": "pytorch/pytorch torch/cuda/__init__.py @ 17e3b6a97a (_check_cubins, "
          "is_bf16_supported)",
    "P9": "moi90/pytorch_compute_capabilities table.md (cuobjdump of conda packages)",
    "P10": "github.com/pytorch/pytorch/issues/155790",
    "F1": "Dao-AILab/flash-attention README.md",
    "F2": "nvidia.github.io/TransformerEngine/support_matrix.html",
    "V1": "docs.vllm.ai/en/latest/getting_started/installation/gpu/ (lastmod 2026-09-24)",
    "V2": "docs.vllm.ai/en/v0.32.0/features/quantization/llm_compressor/fp8/",
    "A1": "ROCm/ROCm docs/compatibility/compatibility-matrix-historical-6.0.csv",
    "A2": "rocm.docs.amd.com/en/7.13.0-preview/reference/gpu-specs.html",
    "A4": "rocm.docs.amd.com/projects/install-on-linux/en/docs-6.3.0/reference/"
          "user-kernel-space-compat-matrix.html",
    "A5": "github.com/ROCm/legacy-rocm-build/releases/tag/rocm-7.2.2",
    "A8": "github.com/ROCm/hipFFT/releases/tag/rocm-7.0.0",
    "catalog": "AnchorGPU's catalog: the GPU model's BF16 and FP8 as staff entered them",
}  # fmt: skip

# The minor-version-compatibility floor of each CUDA major (Table 2, N2): a driver at least
# this runs any toolkit of that major with a limited feature set. The current tables give
# branches (12.x ≥ 525); older editions said 525.60.13 (§8): the current one is used.
MINOR_COMPAT_FLOOR = {11: ("450.80.02", "N2"), 12: ("525", "N2"), 13: ("580", "N2")}

# CUDA toolkit → the driver its GA release needs on Linux x86_64 (Table 3, N1). 12.7 has no
# row (no such toolkit); 13.3/13.4 name a branch only (R610, R615: N1b).
CUDA_TOOLKITS = [
    ("11.8", "520.61.05", "N1"),
    ("12.0", "525.60.13", "N1"),
    ("12.1", "530.30.02", "N1"),
    ("12.2", "535.54.03", "N1"),
    ("12.3", "545.23.06", "N1"),
    ("12.4", "550.54.14", "N1"),
    ("12.5", "555.42.02", "N1"),
    ("12.6", "560.28.03", "N1"),
    ("12.8", "570.26", "N1"),
    ("12.9", "575.51.03", "N1"),
    ("13.0", "580.65.06", "N1"),
    ("13.1", "590.44.01", "N1"),
    ("13.2", "595.45.04", "N1"),
    ("13.3", "610", "N1b"),
    ("13.4", "615", "N1b"),
]

# PyTorch's Linux x86_64 wheels (§3): (torch version, build, toolkit, the compute
# capabilities compiled in (SASS), whether PTX of the newest is carried, sources).
_A = "5.0;6.0;7.0;7.5;8.0;8.6;9.0"  # cu12.1–12.6 wheels (P1, P9, P4)
_CU118 = "3.7;5.0;6.0;7.0;7.5;8.0;8.6;9.0"  # cu118 (P1, P9)
_CU128_27 = "7.5;8.0;8.6;9.0;10.0;12.0"  # 2.7 (sm_70 dropped: P5 #147607)
_CU128_28 = "7.0;7.5;8.0;8.6;9.0;10.0;12.0"  # 2.8–2.10 (sm_70 re-added: P5 #157558)
_CU129 = "7.0;7.5;8.0;8.6;9.0;10.0;12.0"  # 2.8, +PTX (P2)
_CU13 = "7.5;8.0;8.6;9.0;10.0;12.0"  # 13.x, +PTX on Linux (P4)
PYTORCH_CUDA = [
    ("2.4", "cu118", "11.8", _CU118, False, "P3, P1"),
    ("2.4", "cu121", "12.1", _A, False, "P3, P1"),
    ("2.4", "cu124", "12.4", _A, False, "P3, P1"),
    ("2.5", "cu118", "11.8", _CU118, False, "P3, P1"),
    ("2.5", "cu121", "12.1", _A, False, "P3, P1"),
    ("2.5", "cu124", "12.4", _A, False, "P3, P1"),
    ("2.6", "cu118", "11.8", _CU118, False, "P3, P9"),
    ("2.6", "cu124", "12.4", _A, False, "P3, P9"),
    ("2.6", "cu126", "12.6", _A, False, "P3, P9"),
    ("2.7", "cu118", "11.8", _CU118, False, "P3, P9"),
    ("2.7", "cu126", "12.6", _A, False, "P3, P9"),
    ("2.7", "cu128", "12.8", _CU128_27, False, "P3, P5, P10"),
    ("2.8", "cu126", "12.6", _A, False, "P3, P2"),
    ("2.8", "cu128", "12.8", _CU128_28, False, "P3, P2, P5"),
    ("2.8", "cu129", "12.9", _CU129, True, "P3, P2"),
    ("2.9", "cu126", "12.6", _A, False, "P3, P4"),
    ("2.9", "cu128", "12.8", _CU128_28, False, "P3, P4"),
    ("2.9", "cu130", "13.0", _CU13, True, "P3, P4"),
    ("2.10", "cu126", "12.6", _A, False, "P3, P4"),
    ("2.10", "cu128", "12.8", _CU128_28, False, "P3, P4"),
    ("2.10", "cu130", "13.0", _CU13, True, "P3, P4"),
    ("2.11", "cu126", "12.6", _A, False, "P3, P4"),
    ("2.11", "cu128", "12.8", _CU128_27, False, "P3, P4"),  # Volta dropped (#172352)
    ("2.11", "cu130", "13.0", _CU13, True, "P3, P4"),
    ("2.12", "cu126", "12.6", _A, False, "P3"),
    ("2.12", "cu130", "13.0", _CU13, True, "P3"),
    ("2.12", "cu132", "13.2", _CU13, True, "P3"),
    ("2.13", "cu126", "12.6", _A, False, "P3"),
    ("2.13", "cu130", "13.0", _CU13, True, "P3"),
    ("2.13", "cu132", "13.2", _CU13, True, "P3"),
    ("2.14", "cu126", "12.6", _A, False, "P3"),
    ("2.14", "cu130", "13.0", _CU13, True, "P3"),
    ("2.14", "cu132", "13.2", _CU13, True, "P3"),
]

# PyTorch's ROCm wheels (§3): (torch version, build, ROCm release, sources). Only those the
# matrix confirms; 2.14's "ROCm 7.14" is left out until its spelling is confirmed.
PYTORCH_ROCM = [
    ("2.4", "rocm6.1", "6.1", "P3"),
    ("2.5", "rocm6.1", "6.1", "P3, P6"),
    ("2.5", "rocm6.2", "6.2", "P3, P6"),
    ("2.6", "rocm6.1", "6.1", "P3, P6"),
    ("2.6", "rocm6.2.4", "6.2.4", "P3, P6"),
    ("2.7", "rocm6.3", "6.3", "P3"),
    ("2.8", "rocm6.4", "6.4", "P3"),
    ("2.9", "rocm6.4", "6.4", "P3"),
    ("2.10", "rocm7.1", "7.1", "P3"),
    ("2.11", "rocm7.2", "7.2", "P3"),
    ("2.12", "rocm7.2", "7.2", "P3"),
    ("2.13", "rocm7.2", "7.2", "P3"),
]

# vLLM (V1, latest docs of 2026-09-24; V2 is the v0.32.0 edition): CUDA wheels need CC ≥ 7.5,
# Blackwell needs a CUDA ≥ 12.8 wheel; ROCm ≥ 6.3, MI350 (gfx950) ROCm ≥ 7.0. Its wheels'
# own architecture lists were not read: the floor is the check.
VLLM_VERSION = "0.32"
VLLM_CUDA = [("cu128", "12.8"), ("cu129", "12.9"), ("cu130", "13.0")]
VLLM_MIN_COMPUTE = "7.5"
VLLM_ROCM_MIN = "6.3"

# ROCm release → the gfx targets its compatibility matrix lists (A1: 6.0.0–6.3.3; A5: 7.2.x;
# V1/A8: gfx950 from 7.0). Where a release's column was not read, the target is "not
# confirmed": the answer says so instead of yes or no.
ROCM_TARGETS = [
    ("6.0", "gfx90a;gfx942", "A1"),
    ("6.1", "gfx90a;gfx942", "A1"),
    ("6.2", "gfx90a;gfx942", "A1"),
    ("6.3", "gfx90a;gfx942", "A1"),
    ("7.0", "gfx950", "V1, A8"),
    ("7.2", "gfx942;gfx950", "A5"),
]

# What is not checked, and why: named in every answer.
NOT_COVERED = {
    "jax": "JAX: no source for its CUDA/ROCm builds was read; not checked.",
    "tensorflow": "TensorFlow: no source for its builds was read; not checked.",
}
