"""Only here to declare the C extensions; everything else lives in pyproject.toml."""
from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("audit._suffix", sources=["audit/_suffix.c"], extra_compile_args=["-O3"]),
        Extension("audit._neardup", sources=["audit/_neardup.c"], extra_compile_args=["-O3"]),
        Extension("audit._spans", sources=["audit/_spans.c"], extra_compile_args=["-O3"]),
        Extension("audit._chars", sources=["audit/_chars.c"], extra_compile_args=["-O3"]),
    ]
)
