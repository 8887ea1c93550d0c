"""Moved to :mod:`labkit._tensors` (one definition of walking nested tensors); these
names stay importable from here for code not yet moved over."""

from labkit._tensors import call_tensors, flat_tensors, named_args, named_tensors

__all__ = ["call_tensors", "flat_tensors", "named_args", "named_tensors"]
