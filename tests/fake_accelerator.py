"""A second device on a CPU-only machine, for tests: code that mixes devices fails here as it would on CUDA.

CI has no GPU, and the course's device mistakes (a batch left on the CPU while ``train`` moved the model, a
teacher left on the CPU while the student moved) only show on one. Inside ``with FakeAccelerator() as device:``
``device`` (``torch.device("cuda")`` by default) is a device like CUDA, simulated on the CPU by a
``TorchFunctionMode``:

- a tensor is *on the device* when it was made there: moved by ``.to(device)`` / ``.cuda()`` (a copy, as on a
  GPU), created by a factory with ``device=device``, or computed from tensors on the device; its ``.device``
  says ``device``, its ``.cpu()`` / ``.to("cpu")`` is a copy back on the host, its ``.numpy()`` raises;
- every other tensor is on the host, and an operation that mixes the two raises the ``RuntimeError`` that
  CUDA raises ("Expected all tensors to be on the same device"), except, as on CUDA, host tensors of zero
  dimensions (scalars), copies (``copy_``, ``to``), and host indices of ``x[index]``;
- the values are the CPU's, so ``.item()``, boolean masks and the printed numbers work and are those of a CPU
  run; ``lecture_lib.runtime.default_device`` (and every module's imported name for it) returns ``device``.

Which tensors are on the device is tracked by storage (a view of a tensor on the device is on the device); the
storages are kept alive until the ``with`` block ends, so that no host tensor reuses an address. It is slow
(Python runs for every operation): for tiny models and a few steps.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

import lecture_lib.runtime

MISMATCH = "Expected all tensors to be on the same device"
_MOVES = {torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.cuda}
# Cross-device copies are allowed, and so is what nn.Module.to does to swap a parameter's data.
_COPIES = {
    torch.Tensor.copy_,
    torch.Tensor.__setitem__,
    torch._has_compatible_shallow_copy_type,
    torch.Tensor.data.__set__,
    torch.Tensor.grad.__set__,
}
# A packed sequence keeps its batch sizes (and pad_packed_sequence its lengths) on the host, by design.
_PACKING = {torch._pack_padded_sequence, torch._pad_packed_sequence}
_GETTERS = {torch.Tensor.device.__get__, torch.Tensor.is_cuda.__get__, torch.Tensor.is_cpu.__get__}


class FakeAccelerator(TorchFunctionMode):
    """``with FakeAccelerator() as device:`` a simulated accelerator ``device``; see the module's docstring."""

    def __init__(self, device: str = "cuda") -> None:
        super().__init__()
        self.device = torch.device(device)
        self._storages: dict[int, torch.UntypedStorage] = {}
        self._host: dict[int, torch.UntypedStorage] = {}  # host tensors that device operations take by design
        self._patched: list[tuple[Any, str, Any]] = []
        self._warnings = warnings.catch_warnings()

    # ---------------------------------------------------------------- entering and leaving

    def __enter__(self) -> torch.device:
        original = lecture_lib.runtime.default_device
        for name, module in list(sys.modules.items()):
            if name.startswith("lecture_lib") and getattr(module, "default_device", None) is original:
                self._patched.append((module, "default_device", original))
                setattr(module, "default_device", lambda: self.device)
        self._warnings.__enter__()  # bf16 autocast on "cuda" is switched off, with a warning: the CPU computes
        warnings.filterwarnings("ignore", message="CUDA is not available.*autocast")
        warnings.filterwarnings("ignore", message="PyTorch was compiled without cuDNN")
        super().__enter__()
        return self.device

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self._warnings.__exit__(*exc)
        for module, name, value in self._patched:
            setattr(module, name, value)
        self._patched.clear()
        self._storages.clear()
        self._host.clear()

    # ---------------------------------------------------------------- which tensors are on the device

    def on_device(self, t: torch.Tensor) -> bool:
        """Whether ``t`` is on the simulated device."""
        return _key(t) in self._storages

    def _is_ours(self, device: Any) -> bool:
        if device is None or isinstance(device, torch.Tensor):
            return False
        try:
            device = torch.device(device)
        except (TypeError, RuntimeError):
            return False
        return device.type == self.device.type

    # ---------------------------------------------------------------- the mode

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func in _GETTERS:
            mine = self.on_device(args[0])
            if func == torch.Tensor.device.__get__:
                return self.device if mine else func(*args)
            return mine if func == torch.Tensor.is_cuda.__get__ else not mine
        if func == torch.Tensor.grad.__get__:
            grad = func(*args)
            return self._mark(grad) if grad is not None and self.on_device(args[0]) else grad
        if func == torch.Tensor.numpy and self.on_device(args[0]):
            raise TypeError(
                f"can't convert {self.device.type} device type tensor to numpy. "
                "Use Tensor.cpu() to copy the tensor to host memory first."
            )
        if func in _MOVES:
            return self._move(func, args[0], list(args[1:]), kwargs)
        if func in _PACKING:
            data, sizes = func(*args, **kwargs)
            self._host[_key(sizes)] = sizes.untyped_storage()
            return (self._mark(data) if self.on_device(args[0]) else data), sizes

        tensors = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        made_here = self._is_ours(kwargs.get("device"))
        if made_here:
            kwargs["device"] = "cpu"
        if func == torch.Tensor.__getitem__:  # a device tensor may be indexed by host indices, not the reverse
            ours = [args[0]] if self.on_device(args[0]) else []
            strays = [] if ours else [t for t in tensors[1:] if self.on_device(t)]
        else:
            ours = [t for t in tensors if self.on_device(t)]
            strays = [
                t
                for t in tensors
                if not self.on_device(t) and t.dim() > 0 and t.numel() > 0 and _key(t) not in self._host
            ]
            if not ours or func in _COPIES:
                strays = []
        if strays:
            raise RuntimeError(
                f"{MISMATCH}, but found at least two devices, {self.device} and cpu! "
                f"(in {getattr(func, '__qualname__', func)}: a tensor of shape "
                f"{tuple(strays[0].shape)} on the other device; simulated by tests/fake_accelerator.py)"
            )
        result = func(*args, **kwargs)
        if made_here or (ours and func not in _COPIES):
            self._mark(result)
        return result

    def _move(self, func, t: torch.Tensor, rest: list, kwargs: dict) -> torch.Tensor:
        """``.to``, ``.cuda()``, ``.cpu()``: a copy when the tensor changes (simulated) device, as on a GPU."""
        target = {torch.Tensor.cuda: self.device, torch.Tensor.cpu: torch.device("cpu")}.get(func)
        dtype, memory_format = kwargs.get("dtype"), kwargs.get("memory_format")
        target = kwargs.get("device", target)
        for arg in rest:
            if isinstance(arg, (str, torch.device)):
                target = arg
            elif isinstance(arg, torch.dtype):
                dtype = arg
            elif isinstance(arg, torch.Tensor):
                target, dtype = (self.device if self.on_device(arg) else "cpu"), arg.dtype
        options = {k: v for k, v in (("dtype", dtype), ("memory_format", memory_format)) if v is not None}
        moved = t.to(**options) if options else t
        here = self.on_device(t)
        going = here if target is None else self._is_ours(target)
        if going == here:
            return self._mark(moved) if here else moved
        if moved.untyped_storage().data_ptr() == t.untyped_storage().data_ptr():
            moved = moved.clone()
        return self._mark(moved) if going else moved

    def _mark(self, result: Any) -> Any:
        if isinstance(result, torch.Tensor):
            if result.layout == torch.strided and result.untyped_storage().data_ptr():
                self._storages[_key(result)] = result.untyped_storage()
        elif isinstance(result, (tuple, list)):
            for item in result:
                self._mark(item)
        elif isinstance(result, dict):
            for item in result.values():
                self._mark(item)
        return result


def _key(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr() if t.layout == torch.strided else id(t)
