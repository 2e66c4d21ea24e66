"""Command line: ``python <pack folder> <command>`` (the folder name does not matter).

Run as a folder, Python puts the pack's own directory on sys.path, where its
subpackages could shadow other modules; so we drop that entry and import the
pack by path under the fixed name ``comfyui_courier``, as the tests do.
"""

import importlib.util
import os
import sys

if not __package__:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.util.spec_from_file_location(
        "comfyui_courier", os.path.join(here, "__init__.py"), submodule_search_locations=[here])
    package = importlib.util.module_from_spec(spec)
    sys.modules["comfyui_courier"] = package
    spec.loader.exec_module(package)
    from comfyui_courier.cli import main
else:
    from .cli import main

sys.exit(main(sys.argv[1:]))
