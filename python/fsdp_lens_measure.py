"""Measure a model exactly: build it on the meta device and report every module's parameters and buffers.

Run by fsdp-lens's exact mode as `python fsdp_lens_measure.py REQUEST.json`; prints one JSON object on stdout.
REQUEST: {"roots": [dirs for sys.path], "file": model file, "cls": class name, "ctor": Python expression or null}.
`ctor` may call `_cls(file, name)` to reach classes of other project files. No weights are allocated: tensors are
created on the meta device (with `torch.device("meta")` on PyTorch 2, by routing tensor factories on 1.13).
"""
import contextlib
import importlib
import importlib.abc
import importlib.util
import json
import os
import sys
import traceback

EXIT_NO_TORCH = 3
# The oldest release exact mode is tested with: it builds models on the meta device and counts their parameters.
OLDEST_TORCH = (1, 13)
EXIT_FAILED = 4


def fail(code, message, detail=None):
    json.dump({"ok": False, "error": message, "detail": detail}, sys.stdout)
    sys.stdout.write("\n")
    sys.exit(code)


try:
    import torch
    import torch.nn as nn
except Exception as e:  # noqa: BLE001 - any import failure means no usable torch
    fail(
        EXIT_NO_TORCH,
        f"PyTorch is not installed in {sys.executable} (Python {sys.version.split()[0]}); exact mode needs PyTorch "
        f"{'.'.join(map(str, OLDEST_TORCH))} or later: choose a Python that has it (--python, or the fsdpLens.pythonPath setting)",
        f"{type(e).__name__}: {e}",
    )


def release(version):
    """(2, 8) for "2.8.0+cu126"."""
    parts = []
    for x in version.split("+")[0].split(".")[:2]:
        digits = "".join(c for c in x if c.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


if release(torch.__version__) < OLDEST_TORCH:
    fail(
        EXIT_NO_TORCH,
        f"{sys.executable} has PyTorch {torch.__version__}; exact mode needs {'.'.join(map(str, OLDEST_TORCH))} or later",
    )


def summary(e):
    """One line for an exception: its type and first meaningful line, bounded. PyTorch's dispatcher errors run to
    fifty lines listing every backend; their first sentence says which operator could not run where."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if text.startswith("Could not run") and ". " in text:
        text = text[: text.index(". ") + 1] + " (no kernel for it on the meta device in this PyTorch)"
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def where(e):
    """Where the error came from in the user's code: the innermost frame outside torch, as `file:line in fn: code`."""
    frames = traceback.extract_tb(e.__traceback__)
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
    own = [
        f
        for f in frames
        if not f.filename.startswith("<")
        and not os.path.abspath(f.filename).startswith(torch_dir)
        and os.path.abspath(f.filename) != os.path.abspath(__file__)
    ]
    if not own:
        return None
    f = own[-1]
    code = (f.line or "").strip()
    return f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}" + (f": {code[:160]}" if code else "")


FACTORIES = ["empty", "zeros", "ones", "full", "rand", "randn", "randint", "arange", "eye", "tensor", "linspace", "empty_strided"]


@contextlib.contextmanager
def meta_device():
    """Create tensors on the meta device while the model is built."""
    if hasattr(torch, "get_default_device") or release(torch.__version__) >= (2, 0):
        with torch.device("meta"):
            yield
        return
    saved = {}

    def wrap(fn):
        def inner(*args, **kwargs):
            if kwargs.get("device") is None:
                kwargs["device"] = "meta"
            return fn(*args, **kwargs)

        return inner

    for name in FACTORIES:
        if hasattr(torch, name):
            saved[name] = getattr(torch, name)
            setattr(torch, name, wrap(saved[name]))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(torch, name, fn)


# What an FSDP script imports beside the model: names that only wrap, shard or save it, none needed to count its
# parameters. An older PyTorch without them (1.13's torch.distributed.fsdp does not even import on Python 3.11)
# gets placeholders, so that the model itself can still be built.
FSDP_NAMES = {
    "fully_shard", "FSDPModule", "MixedPrecisionPolicy", "CPUOffloadPolicy", "OffloadPolicy", "UnshardHandle",
    "register_fsdp_forward_method", "init_device_mesh", "DeviceMesh", "DTensor", "Shard", "Replicate",
}
STUBBED = []


def placeholder(name):
    """A stand-in for an FSDP name this PyTorch lacks: a class (it can be a base class) whose call returns the module
    it is given, as `fully_shard(model)` does, and an inert object otherwise."""

    def new(cls, *args, **kwargs):
        if args and isinstance(args[0], nn.Module):
            return args[0]
        return object.__new__(cls)

    return type(name, (), {"__new__": new, "__init__": lambda self, *a, **k: None, "__call__": lambda self, *a, **k: None})


class MissingDistributed(importlib.abc.MetaPathFinder):
    """Imports `torch.distributed.*` as usual; a module that fails to import becomes a placeholder module, and every
    one answers the FSDP names it lacks with placeholders."""

    def find_spec(self, name, path=None, target=None):
        if not name.startswith("torch.distributed"):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = Guarded(spec.loader)
                return spec
        STUBBED.append(name)
        return importlib.util.spec_from_loader(name, Guarded(None), is_package=True)

    @staticmethod
    def answer_missing_names():
        """The `torch.distributed` modules imported before this finder answer the FSDP names they lack."""
        for k, m in list(sys.modules.items()):
            if k.startswith("torch.distributed") and m is not None:
                answer_missing(m)


def answer_missing(module):
    if "__getattr__" in vars(module):
        return
    name = module.__name__

    def getattr_(attr):
        if attr in FSDP_NAMES:
            STUBBED.append(f"{name}.{attr}")
            return placeholder(attr)
        raise AttributeError(f"module {name!r} has no attribute {attr!r}")

    module.__getattr__ = getattr_


class Guarded(importlib.abc.Loader):
    """Runs a module's own loader; when the module fails to run here, it is left as a placeholder module."""

    def __init__(self, loader):
        self.loader = loader

    def create_module(self, spec):
        return self.loader.create_module(spec) if self.loader and hasattr(self.loader, "create_module") else None

    def exec_module(self, module):
        try:
            if self.loader is None:
                raise ImportError(module.__name__)
            self.loader.exec_module(module)
        except Exception:  # noqa: BLE001 - any failure: the release lacks it or cannot import it here
            STUBBED.append(module.__name__)
            if not hasattr(module, "__path__"):
                module.__path__ = []
            module.__getattr__ = lambda attr: placeholder(attr) if not attr.startswith("__") else missing(attr)
            return
        answer_missing(module)


def missing(attr):
    raise AttributeError(attr)


def module_name(path, roots):
    """The dotted name a file is imported under from one of the roots (so its relative imports work)."""
    path = os.path.abspath(path)
    for root in roots:
        root = os.path.abspath(root)
        if path.startswith(root + os.sep):
            rel = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
            return rel[: -len(".__init__")] if rel.endswith(".__init__") else rel
    return None


def load(path, roots):
    name = module_name(path, roots)
    if name:
        try:
            return importlib.import_module(name)
        except ImportError:
            pass
    spec = importlib.util.spec_from_file_location("fsdp_lens_model_" + str(abs(hash(path))), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        req = json.load(f)
    roots = req.get("roots") or []
    for r in reversed(roots + [os.path.dirname(os.path.abspath(req["file"]))]):
        if r not in sys.path:
            sys.path.insert(0, r)
    finder = MissingDistributed()
    sys.meta_path.insert(0, finder)
    finder.answer_missing_names()
    try:
        module = load(req["file"], roots)
    except BaseException as e:  # noqa: BLE001 - report the user's import error as it is
        fail(EXIT_FAILED, f"importing {req['file']} failed: {summary(e)}", where(e))

    def _cls(path, name):
        return getattr(load(path, roots), name)

    namespace = dict(vars(module))
    namespace["_cls"] = _cls
    try:
        with meta_device():
            model = eval(req["ctor"], namespace) if req.get("ctor") else getattr(module, req["cls"])()
    except BaseException as e:  # noqa: BLE001
        fail(EXIT_FAILED, f"building {req['cls']} failed: {summary(e)}", where(e))
    if not isinstance(model, nn.Module):
        fail(EXIT_FAILED, f"{req['cls']} did not build an nn.Module")

    seen = {}
    modules = []
    for path, m in model.named_modules():
        params = []
        for name, p in m.named_parameters(recurse=False):
            full = f"{path}.{name}" if path else name
            entry = {"name": name, "shape": list(p.shape), "dtype": str(p.dtype).replace("torch.", ""), "requires_grad": bool(p.requires_grad)}
            if id(p) in seen:
                entry["tied_to"] = seen[id(p)]
            else:
                seen[id(p)] = full
            params.append(entry)
        non_persistent = getattr(m, "_non_persistent_buffers_set", set())
        buffers = [
            {"name": name, "shape": list(b.shape), "dtype": str(b.dtype).replace("torch.", ""), "persistent": name not in non_persistent}
            for name, b in m.named_buffers(recurse=False)
            if b is not None
        ]
        modules.append({"path": path, "cls": type(m).__name__, "params": params, "buffers": buffers})
    result = {"ok": True, "torch": torch.__version__, "python": sys.version.split()[0], "modules": modules}
    # The public names the model's code reached for (a private module of torch stubbed on the way is not one).
    public = sorted({n for n in STUBBED if "._" not in n})
    if public:
        result["stubbed"] = public
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
