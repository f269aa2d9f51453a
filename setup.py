"""setuptools entry point: the native module is built by cffi from build_vulkan.py (see that file)."""
from setuptools import setup

setup(cffi_modules=["build_vulkan.py:ffibuilder"])
