"""The extra loss a training loop adds outside forward (`model.extra_loss`), found and checked.

    fn = extra_loss(section, module, source="s.yaml")     # None when the scenario names none
    total = loss_sum / batch_size + fn(module)            # what one training step minimises

Public CTR code often adds a regularisation term after the model's loss, computed from the
parameters and not from the batch: DeepCTR's `loss + model.get_regularization_loss()`, an L2
penalty on the embedding rows. `fn(module)` returns that term as a scalar tensor; the engine
and the single-process oracle add its gradient once per step (heterps_exec/model/extra_loss.py).
The term must come from the module's parameters (a term of the batch belongs in forward or the
loss) and each of its terms must read the parameters of one stage: a pipeline stage holds only
its own parameters' latest values.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from torch import nn

from heterps_sim.inputs.torch_model.build import import_object
from heterps_sim.inputs.torch_model.capture import check_scalar_with_grad
from heterps_sim.inputs.torch_model.errors import CaptureError, exited, first_line


def extra_loss(section, module: nn.Module, *, source: str,
               search_paths: Sequence[str] = ()) -> Callable | None:
    """The section's extra-loss function, checked on `module` (meta is fine): a scalar that
    depends on the parameters. Raises CaptureError naming model.extra_loss otherwise."""
    if not section.extra_loss:
        return None
    name = section.extra_loss
    fn = import_object(name, source, "model.extra_loss", search_paths)
    if not callable(fn):
        raise CaptureError(f"{source}: model.extra_loss: {name} is not callable")
    try:
        value = fn(module)
    except SystemExit as exc:
        raise CaptureError(f"{source}: model.extra_loss: {name} {exited(exc)}") from None
    except Exception as exc:  # noqa: BLE001 - the user's function failed on the module
        raise CaptureError(f"{source}: model.extra_loss: {name}(module) raised "
                           f"{type(exc).__name__}: {first_line(exc)}") from None
    check_scalar_with_grad(value, f"{source}: model.extra_loss: {name}(module)",
                           "the module's parameters")
    return fn
