"""Only here to declare the C extensions; everything else lives in pyproject.toml."""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "audit._suffix",
            sources=[f"audit/{name}.c" for name in ("_suffix", "_suffix_longest", "_suffix_documents", "_suffix_restricted", "_suffix_held", "_suffix_counts", "_suffix_keys")],
            depends=["audit/_suffix.h"],
            extra_compile_args=["-O3", "-fvisibility=hidden"],  # the files share functions; the module exports only PyInit
        ),
        Extension(
            "audit._neardup",
            sources=[f"audit/{name}.c" for name in ("_neardup", "_neardup_bands", "_neardup_agreement", "_neardup_field", "_neardup_regions")],
            depends=["audit/_neardup.h"],
            extra_compile_args=["-O3", "-fvisibility=hidden"],
        ),
        Extension("audit._spans", sources=["audit/_spans.c"], extra_compile_args=["-O3"]),
        Extension("audit._chars", sources=["audit/_chars.c"], extra_compile_args=["-O3"]),
        Extension("audit._figures", sources=["audit/_figures.c"], extra_compile_args=["-O3"]),
    ]
)
