"""What a checkpoint directory is trusted with: data, never code.

A checkpoint directory holds heterps's own files (`latest`: a step name; the PS's `LATEST`,
`meta.json` and `.npz` row files, read with numpy's pickle-free loader) and the trainers'
torch.distributed.checkpoint (DCP) folders. DCP writes its `.metadata` with pickle and its
non-tensor values with `torch.save`; reading either with plain pickle runs whatever a crafted
file names. Here both are read so that only data can come back:

- `.metadata` through `MetadataUnpickler`, which admits DCP's own metadata classes
  (torch.distributed.checkpoint.metadata, filesystem._StorageInfo), torch.Size, torch dtypes
  and layouts, and paths - and refuses anything else with a message naming it;
- tensors and other values with `torch.load(weights_only=True)` (torch's own restricted
  unpickler; DCP already loads tensors that way, `TrustedLoadPlanner` does it for the rest).

`TrustedReader` / `TrustedLoadPlanner` replace DCP's defaults in `dcp.load`, and the
launcher reads the metadata of the step it would resume from before any rank starts
(`check_step`), so a crafted directory is one line of bad input, exit 2.
"""

from __future__ import annotations

import io
import pickle
from pathlib import Path

import torch
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint import metadata as dcp_metadata
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

METADATA = ".metadata"


class CheckpointTrustError(ValueError):
    """A checkpoint file asks for something a checkpoint never holds; str() says what."""


def _dcp_class(name: str):
    obj = getattr(dcp_metadata, name, None)
    return obj if isinstance(obj, type) and obj.__module__ == dcp_metadata.__name__ else None


def _admitted(module: str, name: str):
    """The object `module.name` may stand for in DCP metadata, or None."""
    if "." in name:  # pickle would walk attributes: a.b.c reaches anything
        return None
    if module == dcp_metadata.__name__:
        return _dcp_class(name)
    if module == "torch.distributed.checkpoint.filesystem" and name == "_StorageInfo":
        from torch.distributed.checkpoint.filesystem import _StorageInfo
        return _StorageInfo
    if module == "torch":
        obj = getattr(torch, name, None)
        return obj if obj is torch.Size or isinstance(obj, torch.dtype) else None
    if module == "torch.serialization" and name == "_get_layout":
        from torch.serialization import _get_layout
        return _get_layout
    if module == "pathlib" and name in ("PosixPath", "WindowsPath", "PurePosixPath",
                                        "PureWindowsPath", "Path"):
        import pathlib
        return getattr(pathlib, name)
    if module == "collections" and name == "OrderedDict":
        import collections
        return collections.OrderedDict
    if module == "builtins" and name in ("set", "frozenset", "slice"):
        import builtins
        return getattr(builtins, name)
    return None


class MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP metadata and nothing else (see the module's docstring)."""

    def __init__(self, file, source: str):
        super().__init__(file)
        self.source = source

    def find_class(self, module: str, name: str):
        obj = _admitted(module, name)
        if obj is None:
            raise CheckpointTrustError(
                f"{self.source}: refers to {module}.{name}, which DCP metadata never holds; "
                "refusing to load it (a checkpoint directory is trusted with data only)")
        return obj


def read_metadata(path: str | Path) -> dcp_metadata.Metadata:
    """The DCP Metadata in file `path`, unpickled with `MetadataUnpickler`."""
    data = Path(path).read_bytes()
    try:
        meta = MetadataUnpickler(io.BytesIO(data), str(path)).load()
    except CheckpointTrustError:
        raise
    except Exception as exc:  # noqa: BLE001 - any damage is one message
        raise CheckpointTrustError(f"{path}: not readable DCP metadata ({type(exc).__name__}: "
                                   f"{exc})") from None
    if not isinstance(meta, dcp_metadata.Metadata):
        raise CheckpointTrustError(f"{path}: holds a {type(meta).__name__}, not DCP Metadata")
    return meta


def check_step(step_dir: str | Path) -> None:
    """Read the DCP metadata of checkpoint folder `step_dir` the way the ranks will."""
    path = Path(step_dir) / METADATA
    if not path.is_file():
        raise CheckpointTrustError(f"{path}: missing (not a complete DCP checkpoint)")
    read_metadata(path)


class TrustedReader(FileSystemReader):
    """DCP's file reader, with `.metadata` read by `MetadataUnpickler`."""

    def read_metadata(self, *args, **kwargs) -> dcp_metadata.Metadata:
        path = self._get_metadata_path(kwargs.get("rank"))
        with self.fs.create_stream(path, "rb") as fh:
            meta = MetadataUnpickler(fh, str(path)).load()
        if not isinstance(meta, dcp_metadata.Metadata):
            raise CheckpointTrustError(f"{path}: holds a {type(meta).__name__}, not DCP Metadata")
        if getattr(meta, "storage_meta", None) is None:
            meta.storage_meta = dcp_metadata.StorageMeta()
        meta.storage_meta.load_id = self.load_id
        return meta


class TrustedLoadPlanner(DefaultLoadPlanner):
    """DCP's default load planner, with non-tensor values read by torch's weights-only
    unpickler (DCP's own uses weights_only=False)."""

    def load_bytes(self, read_item, value: io.BytesIO) -> None:
        obj = torch.load(value, weights_only=True)
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], obj)
        else:
            self.state_dict[read_item.dest_index.fqn] = obj
