from __future__ import annotations

import pytest
import torch

from labkit.train._epoch_means import EpochMeans, as_scalar


def test_weighted_means_over_uneven_batches():
    m = EpochMeans()
    steps = [(torch.tensor(2.0), torch.tensor(0.5), 20), (torch.tensor(4.0), torch.tensor(1.0), 12)]
    for loss, acc, bs in steps:
        m.add({"loss": loss, "acc": acc}, bs)
    got = {k: float(v) for k, v in m.means().items()}
    assert got == pytest.approx({"loss": (2 * 20 + 4 * 12) / 32, "acc": (0.5 * 20 + 12) / 32})
    assert m.last.tolist() == [4.0, 1.0] and m.count == 32
    assert repr(m) == "EpochMeans(names=['loss', 'acc'], count=32)"


def test_reduce_sums_over_processes_before_dividing():
    m = EpochMeans()
    m.add({"loss": torch.tensor(1.0)}, 10)
    seen = []

    def other_rank_adds(t):  # as if a second rank had loss 4.0 over 30 samples
        seen.append(t.clone())
        return t + torch.tensor([4.0 * 30, 30.0])

    assert float(m.means(other_rank_adds)["loss"]) == pytest.approx((10 + 120) / 40)
    assert seen[0].tolist() == [10.0, 10.0]  # one collective: sums and count together


def test_state_roundtrip_and_reset():
    m = EpochMeans()
    m.add({"loss": torch.tensor(3.0)}, 4)
    n = EpochMeans()
    n.load_state_dict(m.state_dict())
    n.add({"loss": torch.tensor(1.0)}, 4)
    assert float(n.means()["loss"]) == pytest.approx(2.0)
    n.reset()
    assert n.means() == {} and n.count == 0
    empty = EpochMeans()
    empty.load_state_dict(EpochMeans().state_dict())
    assert empty.means() == {}


def test_changing_names_within_an_epoch_is_an_error():
    m = EpochMeans()
    m.add({"loss": torch.tensor(1.0)}, 1)
    with pytest.raises(ValueError, match=r"\['loss', 'acc'\] differ from this epoch's \['loss'\]"):
        m.add({"loss": torch.tensor(1.0), "acc": torch.tensor(1.0)}, 1)


def test_metric_values_must_be_one_number():
    dev = torch.device("cpu")
    assert as_scalar("acc", 0.5, dev).item() == 0.5
    assert as_scalar("acc", torch.tensor([[0.25]]), dev).shape == ()
    with pytest.raises(ValueError, match=r"metric 'acc' returned a tensor of shape \(4,\)"):
        as_scalar("acc", torch.ones(4), dev)
    with pytest.raises(TypeError, match="metric 'acc' returned str"):
        as_scalar("acc", "0.5", dev)
