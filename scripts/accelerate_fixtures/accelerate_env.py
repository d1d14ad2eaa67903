"""Loads accelerate from a source tree for record.py: the placeholder modules and the two forced
availability probes that record.py's header documents (the only things not real), and the small
helpers both of its modes share. Imported by record.py, never run by itself."""

import enum
import importlib
import importlib.abc
import importlib.machinery
import json
import os
import platform
import sys
import tempfile
import types

PLACEHOLDER_ROOTS = ("huggingface_hub", "safetensors")
TAG_COMMITS = {
    "v0.27.2": "5eb7ab9f6afb0fed38cb54741e243180d6f8bc5d",
    "v1.14.0": "beb0672aa8444ea7647aee056f624effe5996346",
}


# ---------------------------------------------------------------------------------------------
# Placeholders and forced probes (the documented exceptions above)

class _PlaceholderFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves any module under PLACEHOLDER_ROOTS as a placeholder."""

    def __init__(self, roots):
        self.roots = roots

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _placeholder_module(spec.name)

    def exec_module(self, module):
        pass


def _placeholder_module(name):
    module = types.ModuleType(name)
    module.__path__ = []
    module.__version__ = "0.0.0+placeholder"

    def __getattr__(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _placeholder_class(f"{name}.{attr}")

    module.__getattr__ = __getattr__
    return module


def _placeholder_class(qualname):
    def refuse(*_args, **_kwargs):
        raise RuntimeError(f"record.py: placeholder {qualname} was used; the recording is not valid")

    return type(qualname.rsplit(".", 1)[-1], (), {"__new__": refuse, "__call__": refuse})


def install_placeholders():
    roots = list(PLACEHOLDER_ROOTS)
    try:
        importlib.import_module("packaging.version")
    except ImportError:
        roots.append("packaging")
    sys.meta_path.insert(0, _PlaceholderFinder(tuple(roots)))
    return roots


def _always_true(*_args, **_kwargs):
    return True


def force_probes():
    """is_deepspeed_available / is_fp8_available -> True in every module that bound them."""
    import accelerate.utils.imports as imports

    runner = types.ModuleType("deepspeed.launcher.runner")
    runner.DEEPSPEED_ENVIRONMENT_NAME = ".deepspeed_env"
    launcher = types.ModuleType("deepspeed.launcher")
    launcher.runner = runner
    deepspeed = types.ModuleType("deepspeed")
    deepspeed.launcher = launcher
    sys.modules.update({"deepspeed": deepspeed, "deepspeed.launcher": launcher,
                        "deepspeed.launcher.runner": runner})
    for probe in ("is_deepspeed_available", "is_fp8_available"):
        original = getattr(imports, probe, None)
        if original is None:
            continue
        for module in list(sys.modules.values()):
            if module is not None and getattr(module, probe, None) is original:
                setattr(module, probe, _always_true)


def import_accelerate(src):
    sys.path.insert(0, os.path.join(src, "src"))
    placeholders = install_placeholders()
    for module in ("accelerate", "accelerate.commands.launch", "accelerate.utils.launch"):
        importlib.import_module(module)  # every module that binds a probe, before force_probes
    force_probes()
    return placeholders


def versions(src):
    import torch

    import accelerate

    tag = os.path.basename(os.path.normpath(src))
    return {"tag": tag, "commit": TAG_COMMITS.get(tag, "unknown"), "accelerate": accelerate.__version__,
            "python": platform.python_version(), "torch": torch.__version__}


def write_json(path, data):
    """Sorted keys, temp file + rename: a reader never sees half a file."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _jsonable(value):
    if isinstance(value, enum.Enum):
        return value.value
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)
