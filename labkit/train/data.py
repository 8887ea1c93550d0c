"""Turn what a user has (loaders, datasets, a DataModule, a PyG dataset) into a DataModule.

Accepted forms of ``data``:

- a ``LightningDataModule``: used as is;
- a ``DataLoader`` or a ``Dataset``: training data only;
- a pair ``(train, val)`` of DataLoaders or Datasets (``val`` may be None);
- a PyTorch Geometric dataset (``torch_geometric.data.Dataset``): batched with PyG's own
  ``DataLoader``; the GNN helpers build richer splits on top of :func:`register_adapter`.

Datasets are wrapped in DataLoaders with ``batch_size``; the training loader shuffles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Any

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, RandomSampler, Sampler

# (predicate, adapter) pairs tried before the built-in forms; see register_adapter
_ADAPTERS: list[tuple[Callable[[Any], bool], Callable[..., pl.LightningDataModule]]] = []


def register_adapter(
    accepts: Callable[[Any], bool], adapt: Callable[..., pl.LightningDataModule]
) -> None:
    """Teach :func:`as_datamodule` a new kind of data (used by ``labkit.gnn``).

    Args:
        accepts: ``accepts(data) -> bool``.
        adapt: ``adapt(data, batch_size=..., num_workers=...) -> LightningDataModule``.
    """
    _ADAPTERS.insert(0, (accepts, adapt))


def _is_pyg_dataset(data: object) -> bool:
    return any(
        c.__module__.startswith("torch_geometric.") and c.__name__ == "Dataset"
        for c in type(data).__mro__
    )


class TrainDataModule(pl.LightningDataModule):
    """A DataModule over a training loader only (no validation loop runs).

    Args:
        train: Training DataLoader.
    """

    def __init__(self, train: Iterable[Any]) -> None:
        super().__init__()
        self.train = train
        self.val: Iterable[Any] | None = None

    def train_dataloader(self) -> Iterable[Any]:
        return self.train

    def __repr__(self) -> str:
        return f"TrainDataModule(train={_describe(self.train)})"


class PairDataModule(TrainDataModule):
    """A DataModule over a training loader and a validation loader.

    Args:
        train: Training DataLoader.
        val: Validation DataLoader.

    Example:
        >>> dm = PairDataModule(DataLoader(train_ds, batch_size=32), None)  # doctest: +SKIP
    """

    def __init__(self, train: Iterable[Any], val: Iterable[Any] | None) -> None:
        super().__init__(train)
        self.val = val

    def val_dataloader(self) -> Iterable[Any] | None:
        return self.val

    def __repr__(self) -> str:
        return f"PairDataModule(train={_describe(self.train)}, val={_describe(self.val)})"


def _describe(loader: object) -> str:
    if loader is None:
        return "None"
    try:
        n: int | str = len(loader) if isinstance(loader, Sized) else "?"
    except TypeError:  # a DataLoader over an IterableDataset without a length
        n = "?"
    bs = getattr(loader, "batch_size", None)
    return f"{type(loader).__name__}(batches={n}, batch_size={bs})"


class EpochShuffleSampler(Sampler[int]):
    """Shuffles with a generator seeded by ``seed + epoch``: the order of an epoch depends
    on nothing that ran before it, so a resumed run sees the batches an uninterrupted one saw.

    Lightning calls :meth:`set_epoch` before every epoch (as for ``DistributedSampler``).

    Args:
        n: Dataset length.
        seed: Base seed.

    Example:
        >>> s = EpochShuffleSampler(5, seed=0); s.set_epoch(1)
        >>> sorted(s) == list(range(5))
        True
    """

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n = n
        self.seed = seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        g = torch.Generator().manual_seed(self.seed + self.epoch)
        return iter(torch.randperm(self.n, generator=g).tolist())

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"EpochShuffleSampler(n={self.n}, seed={self.seed}, epoch={self.epoch})"


def resumable(loader: Iterable[Any], seed: int) -> Iterable[Any]:
    """A plain shuffling ``DataLoader`` rebuilt with :class:`EpochShuffleSampler`; others as is."""
    if not isinstance(loader, DataLoader) or type(loader) is not DataLoader:
        return loader
    if not isinstance(loader.sampler, RandomSampler):
        return loader
    if loader.sampler.generator is not None or loader.sampler.replacement:
        return loader  # the user chose the randomness: keep it
    return DataLoader(
        loader.dataset,
        batch_size=loader.batch_size,
        drop_last=loader.drop_last,
        sampler=EpochShuffleSampler(len(loader.dataset), seed),  # type: ignore[arg-type]  # map-style: sized
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        timeout=loader.timeout,
        worker_init_fn=loader.worker_init_fn,
        persistent_workers=loader.persistent_workers,
    )


def _loader(
    obj: object, *, batch_size: int, shuffle: bool, num_workers: int, pyg: bool, seed: int
) -> object:
    if isinstance(obj, DataLoader):
        return resumable(obj, seed) if shuffle else obj
    if obj is None or not isinstance(obj, Dataset | list):
        return obj
    data: Any = obj  # a map-style Dataset has __len__, which torch's Dataset type omits
    if pyg:
        from torch_geometric.loader import DataLoader as PygLoader

        return PygLoader(data, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers)
    if shuffle and not isinstance(data, IterableDataset):
        sampler = EpochShuffleSampler(len(data), seed)
        return DataLoader(data, batch_size=batch_size, sampler=sampler, num_workers=num_workers)
    return DataLoader(data, batch_size=batch_size, num_workers=num_workers)


def as_datamodule(
    data: object, *, batch_size: int = 32, num_workers: int = 0, seed: int = 0
) -> pl.LightningDataModule:
    """Wrap ``data`` into a ``LightningDataModule``.

    Args:
        data: See the module docstring for the accepted forms.
        batch_size: Batch size for Datasets (DataLoaders keep their own).
        num_workers: Loader worker processes for Datasets.
        seed: Base seed of the training shuffle (see :class:`EpochShuffleSampler`).

    Returns:
        A LightningDataModule.

    Raises:
        TypeError: naming the type when ``data`` is none of the accepted forms.
    """
    if isinstance(data, pl.LightningDataModule):
        return data
    for accepts, adapt in _ADAPTERS:
        if accepts(data):
            return adapt(data, batch_size=batch_size, num_workers=num_workers)
    if isinstance(data, tuple | list) and len(data) == 2 and not isinstance(data[0], int | float):
        train, val = data
    else:
        train, val = data, None
    pyg = _is_pyg_dataset(train)
    kw: dict[str, Any] = {"batch_size": batch_size, "num_workers": num_workers, "seed": seed}
    train_loader = _iterable("train", _loader(train, shuffle=True, pyg=pyg, **kw))
    val_loader = _iterable("val", _loader(val, shuffle=False, pyg=pyg, **kw))
    if train_loader is None:
        raise TypeError(f"Lab data: the train part is None; {_ACCEPTED}")
    if val_loader is None:
        return TrainDataModule(train_loader)
    return PairDataModule(train_loader, val_loader)


_ACCEPTED = (
    "give a DataLoader, a Dataset, a (train, val) pair of them, a LightningDataModule or a "
    "PyG dataset"
)


def _iterable(name: str, obj: object) -> Iterable[Any] | None:
    """``obj`` when it can be iterated (or None); else a TypeError naming the part."""
    if obj is not None and not isinstance(obj, Iterable):
        raise TypeError(f"Lab data: the {name} part is a {type(obj).__name__}; {_ACCEPTED}")
    return obj


def first_batch(loader: Iterable[Any]) -> object:
    """The first batch of ``loader`` (the iterator is dropped afterwards)."""
    it = iter(loader)
    try:
        return next(it)
    except StopIteration:
        raise ValueError(f"the data loader {_describe(loader)} yields no batch") from None
    finally:
        del it
