"""Build of dpframe's compiled kernels (everything else is in pyproject.toml).

``dpframe._backends._sums`` adds clamped values in whole grid steps per cell, exactly in
int64; its exactness needs IEEE double arithmetic without fused multiply-adds, hence the
flags (see the comment at the top of the C file). ``dpframe._backends._bounded`` groups
rows by (privacy unit, cell) in 32-bit keys for bounded counts (no floating point).
"""

import sys

from setuptools import Extension, setup

if sys.platform == "win32":
    flags = ["/O2", "/fp:precise"]
else:
    flags = ["-O3", "-ffp-contract=off", "-fno-fast-math"]

setup(
    ext_modules=[
        Extension(
            "dpframe._backends._sums",
            sources=["dpframe/_backends/_sums.c"],
            depends=["dpframe/_backends/_buffers.h"],
            extra_compile_args=flags,
        ),
        Extension(
            "dpframe._backends._bounded",
            sources=["dpframe/_backends/_bounded.c"],
            depends=["dpframe/_backends/_buffers.h"],
            extra_compile_args=flags,
        ),
    ]
)
