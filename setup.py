"""Build the decoder's C loop (tpuperf/_wire_native.c); the rest of the build is pyproject.toml.

A C module that does not build stops the install with the reason, rather than leaving a
slower numpy decoder behind unnoticed. ``TPUPERF_NO_NATIVE=1`` skips the C module on
purpose: tpuperf then decodes with numpy (about half as fast, same results), and
``tpuperf info`` says so.
"""

import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = Extension(
    "tpuperf._wire_native", sources=["tpuperf/_wire_native.c"], extra_compile_args=["-O3"]
)


def _skip_native() -> bool:
    return os.environ.get("TPUPERF_NO_NATIVE", "").strip().lower() in ("1", "true", "yes")


class BuildNative(build_ext):
    """build_ext that says plainly why the C decoder did not build, and how to go without."""

    def run(self) -> None:
        if _skip_native():
            print("tpuperf: TPUPERF_NO_NATIVE is set: not building the C decoder (numpy decodes)")
            self.extensions = []
            return
        super().run()

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except Exception as exc:
            raise RuntimeError(
                f"tpuperf: the C decoder ({ext.sources[0]}) did not build: {str(exc).rstrip('.')}. "
                "Install a C "
                "compiler and the Python headers (e.g. apt-get install gcc python3-dev), or set "
                "TPUPERF_NO_NATIVE=1 to install without it (numpy decodes, about half as fast)."
            ) from exc


setup(ext_modules=[NATIVE], cmdclass={"build_ext": BuildNative})
