"""examples/dlrm.py on the device vs the same script on PyTorch CPU: EmbeddingBag features, MLPs,
the bmm pairwise interaction and BCE-with-logits, trained with Adam, in both eager modes and with
zero CPU-fallback ops.

Tolerances: every op matches CPU to float32 rounding; over a few Adam steps the differences
compound through Adam's normalisation, so losses and parameters are compared at rtol 1e-4 /
atol 1e-5 (as in test_training.py).
"""
import os
import sys

import pytest
import torch

import torch_tpu

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
import dlrm  # noqa: E402

SMALL = dlrm.DLRMConfig(cardinalities=[60, 40, 20, 10], embedding_dim=8, bottom_mlp=[16], top_mlp=[16])


def test_training_matches_cpu(mode):
    cpu_model, cpu_losses, _ = dlrm.train("cpu", 8, batch_size=32, cfg=SMALL, progress=False)
    torch_tpu.metrics.reset()
    dev_model, dev_losses, _ = dlrm.train("tpu", 8, batch_size=32, cfg=SMALL, progress=False)
    assert not torch_tpu.metrics.fallback_ops(), torch_tpu.metrics.fallback_ops()
    torch.testing.assert_close(torch.tensor(dev_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-5)
    for (name, p_cpu), p_dev in zip(cpu_model.named_parameters(), dev_model.parameters()):
        assert p_dev.device.type == "tpu"
        torch.testing.assert_close(p_dev.detach().cpu(), p_cpu.detach(), rtol=1e-4, atol=1e-5,
                                   msg=lambda m: f"{name}: {m}")
    # The embeddings were trained (EmbeddingBag's backward reached them).
    torch.manual_seed(0)  # the initial weights of dlrm.train(seed=0)
    fresh = dlrm.DLRM(SMALL)
    assert not torch.equal(cpu_model.embeddings[0].weight.detach(), fresh.embeddings[0].weight)


def test_forward_matches_cpu_on_one_batch(no_fallback):
    torch.manual_seed(0)
    model = dlrm.DLRM(SMALL)
    dense, sparse, labels = dlrm.SyntheticClicks(SMALL, 16, 1)[0]
    expected = model(dense, sparse)
    dev = model.to("tpu")
    actual = dev(dense.to("tpu"), [tuple(t.to("tpu") for t in bags) for bags in sparse])
    torch.testing.assert_close(actual.cpu(), expected)


def test_it_learns_the_synthetic_clicks():
    # Not a CPU comparison: the script's claim that the model beats the base rate.
    model, losses, _ = dlrm.train("tpu", 60, batch_size=128, cfg=SMALL, lr=2e-2, progress=False)
    loss, acc, base = dlrm.evaluate(model.eval(), "tpu", batch_size=512, batches=2)
    assert loss < base - 0.05, (loss, base)


def test_synthetic_batches_are_reproducible():
    a = dlrm.SyntheticClicks(SMALL, 8, 3, seed=1)
    b = dlrm.SyntheticClicks(SMALL, 8, 3, seed=1)
    (d1, s1, l1), (d2, s2, l2) = a[2], b[2]
    assert torch.equal(d1, d2) and torch.equal(l1, l2)
    assert all(torch.equal(t1, t2) for b1, b2 in zip(s1, s2) for t1, t2 in zip(b1, b2))
    # Each feature's indices are padded to the batch's capacity (static shapes), at weight 0.
    assert all(idx.numel() == 8 * SMALL.max_bag and w.numel() == idx.numel() for idx, _, w in s1)
    with pytest.raises(IndexError):
        a[3]


def test_checkpoint_resume_continues_exactly(tmp_path, no_fallback):
    """Save after step 3, resume to step 6: the same losses and weights as 6 uninterrupted steps
    (Adam's state round-trips; the batches depend only on their step)."""
    full_model, full_losses, _ = dlrm.train("tpu", 6, batch_size=32, cfg=SMALL, progress=False)
    ckpt = str(tmp_path / "dlrm.pt")
    _, first, _ = dlrm.train("tpu", 3, batch_size=32, cfg=SMALL, progress=False, save=ckpt)
    assert first == full_losses[:3]
    resumed_model, rest, _ = dlrm.train("tpu", 6, batch_size=32, cfg=SMALL, progress=False, resume=ckpt)
    assert rest == full_losses[3:]
    for (name, a), b in zip(full_model.state_dict().items(), resumed_model.state_dict().values()):
        assert torch.equal(a.cpu(), b.cpu()), name
