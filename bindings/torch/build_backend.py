"""setuptools' build backend for `pip install ./bindings/torch`, unchanged but for one thing:
setup.py must compile against the torch the user has, and pip builds in an isolated environment
where that torch is not importable. setup.py asks the user's interpreter directly (torch_config.py
run with pip's isolation variables removed); nothing here differs from setuptools.build_meta."""
from setuptools.build_meta import *  # noqa: F401,F403
from setuptools.build_meta import __all__  # noqa: F401
