"""A Lab's data and loaders: what ``data`` becomes, the DataModule, the first batch, the dry run.

:class:`LabData` is one of the parts :class:`~labkit.train.Lab` delegates to (as
Lightning's ``Trainer`` delegates to its connectors); it keeps no state of its own and
reads the Lab's ``data``, ``batch_size``, ``num_workers``, ``step`` and ``loss``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    import lightning.pytorch as pl

    from labkit.train.lab import Lab
    from labkit.train.module import StepFn


def prepare(data: object, step: StepFn | None) -> tuple[Any, StepFn | None, list[str]]:
    """``(data, step, notes)`` as the Lab keeps them: one PyG graph with masks becomes node
    classification data (a note when it has no ``val_mask``); data that knows its batches'
    step (``data.lab_step``) gives the step when none was given."""
    notes: list[str] = []
    if type(data).__module__.startswith("torch_geometric."):
        from labkit.gnn.data import for_lab  # one graph with masks: node classification

        notes = check_masks(data)
        data = for_lab(data)
    if step is None:
        step = getattr(data, "lab_step", None)  # data that knows its batches' step
    return data, step, notes


class LabData:
    """The data side of a :class:`~labkit.train.Lab` (see the module docstring).

    Args:
        lab: The Lab whose data this reads.
    """

    def __init__(self, lab: Lab) -> None:
        self.lab = lab

    def datamodule(self, seed: int = 0) -> pl.LightningDataModule:
        """The data as a ``LightningDataModule`` (:func:`labkit.train.data.as_datamodule`)."""
        from labkit.train.data import as_datamodule

        lab = self.lab
        if lab.data is None:
            raise ValueError("this Lab has no data: Lab(model, (train, val), loss=...)")
        dm: pl.LightningDataModule = as_datamodule(
            lab.data, batch_size=lab.batch_size, num_workers=lab.num_workers, seed=seed
        )
        return dm

    def first_batch(self) -> object:
        """The first training batch, drawing none of the user's random numbers."""
        from labkit.train.data import first_batch

        dm = self.datamodule()
        with torch.random.fork_rng(devices=[]):  # setup's random_split draws none of the user's
            if self.lab._is_lightning() and hasattr(dm, "setup"):
                dm.setup("fit")  # a user's LightningDataModule builds its datasets here
            return first_batch(dm.train_dataloader())

    def check(self, dm: pl.LightningDataModule | None = None) -> None:
        """One train and one val batch through the model and loss (``Lab.check``)."""
        lab = self.lab
        if lab._is_lightning():
            return  # a user LightningModule's step is its own; Lightning's sanity check runs
        from labkit.train.data import first_batch
        from labkit.train.guards import dry_run
        from labkit.train.module import default_step, dict_batch_note

        dm = dm if dm is not None else self.datamodule()
        with torch.random.fork_rng(devices=[]):
            train = first_batch(dm.train_dataloader())
        loss = lab._binding.plain_loss()
        step: Callable[..., Any] = lab.step or default_step
        dry_run(lab.model, train, step=step, loss=loss, stage="train")
        note = dict_batch_note(train, lab.step, loss)  # a dict batch: which keys went where
        if note is not None and lab.last_run is not None and not lab.last_run.done:
            lab.last_run.notes.append(note)  # named in the notes of the fit running this check
        val_loader = getattr(dm, "val", None) if hasattr(dm, "train") else None
        if val_loader is None and not hasattr(dm, "train"):
            val_loader = dm.val_dataloader() if _overrides(dm, "val_dataloader") else None
        if val_loader is not None and not (isinstance(val_loader, list) and not val_loader):
            with torch.random.fork_rng(devices=[]):
                val = first_batch(val_loader)
            dry_run(lab.model, val, step=step, loss=loss, stage="val")


def train_batches(dm: object) -> int | None:
    """Batches per epoch of a labkit DataModule's train loader (None: unknown)."""
    loader = getattr(dm, "train", None)
    try:
        return len(loader) if loader is not None else None
    except TypeError:
        return None


def _overrides(dm: object, name: str) -> bool:
    import lightning.pytorch as pl

    return getattr(type(dm), name) is not getattr(pl.LightningDataModule, name)


def check_masks(data: Any) -> list[str]:  # a PyG Data or dataset
    """One PyG graph (a ``Data``, or a dataset of one graph) must say which nodes train;
    returns a note when it has no ``val_mask`` (no validation runs)."""
    from torch_geometric.data.data import BaseData  # data is PyG's: it is imported

    graph = data
    if not isinstance(graph, BaseData):  # a dataset (its attributes reach its graphs)
        try:
            graph = data[0] if len(data) == 1 else None
        except (TypeError, IndexError, KeyError):
            graph = None
    if graph is None or not hasattr(graph, "edge_index"):
        return []  # many graphs: graph-level batches, not node classification
    missing = [m for m in ("train_mask", "val_mask") if getattr(graph, m, None) is None]
    if "train_mask" in missing:
        nodes = getattr(graph, "num_nodes", "?")
        raise ValueError(
            f"this graph ({nodes} nodes) has no {' and no '.join(missing)}: Lab trains node "
            "classification on the nodes of data.train_mask (and validates on data.val_mask). "
            "Add boolean masks of length num_nodes (e.g. torch_geometric.transforms."
            "RandomNodeSplit()(data)), or pass a DataLoader of graphs"
        )
    if missing:
        return [
            "the graph has no val_mask: no validation runs (val_* curves stay empty); add "
            "one to see val_loss"
        ]
    return []
