"""The Hugging Face stack's device selection on a tpu process, with the real libraries:
accelerate.Accelerator() and the transformers Trainer pick the tpu with no setting, and
from_pretrained(device_map="auto") places the weights on it (torch_tpu/_compat.py explains the
registration accelerate needs). A tiny LlamaForCausalLM trains with the Trainer's defaults
(optimizer adamw_torch_fused, gradient clipping) on tpu and on CPU (use_cpu=True, the same fused
CPU kernels) with the same losses and gradient norms.

Tolerances: losses and gradient norms at rtol 1e-4 (as test_hf.py: float32 summation order over
a few steps).
"""
import os

import pytest
import torch

import torch_tpu

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")
accelerate = pytest.importorskip("accelerate")
from accelerate.state import AcceleratorState  # noqa: E402

VOCAB = 64


@pytest.fixture(autouse=True)
def fresh_accelerate_state():
    # Accelerator/PartialState are process-wide singletons: each test starts from none.
    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def tiny_llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                   pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return transformers.LlamaForCausalLM(cfg)


class Tokens(torch.utils.data.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        ids = torch.randint(3, VOCAB, (12,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def test_accelerator_device_is_tpu():
    acc = accelerate.Accelerator()
    assert acc.device == torch.device("tpu", torch.tpu.current_device())
    model = acc.prepare(torch.nn.Linear(4, 4))
    assert model.weight.device.type == "tpu"


def test_accelerator_cpu_flag_still_means_cpu():
    assert accelerate.Accelerator(cpu=True).device == torch.device("cpu")


def test_device_map_auto_lands_on_tpu(tmp_path):
    tiny_llama().save_pretrained(tmp_path)
    model = transformers.LlamaForCausalLM.from_pretrained(tmp_path, device_map="auto")
    assert {p.device.type for p in model.parameters()} == {"tpu"}
    assert {b.device.type for b in model.buffers()} == {"tpu"}
    reference = transformers.LlamaForCausalLM.from_pretrained(tmp_path)
    for (name, p), q in zip(reference.named_parameters(), model.parameters()):
        assert torch.equal(q.cpu(), p.detach()), name


def test_max_memory_reports_the_tpu():
    from accelerate.utils import get_max_memory

    mem = get_max_memory()
    assert list(mem)[:torch.tpu.device_count()] == list(range(torch.tpu.device_count()))
    assert 0 < mem[0] <= torch.tpu.mem_get_info(0)[1]
    assert get_max_memory({0: "1MB", "cpu": "2MB"}) == {0: 10**6, "cpu": 2 * 10**6}


def train_with_trainer(tmp_path, use_cpu):
    model = tiny_llama()
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), use_cpu=use_cpu, per_device_train_batch_size=2, max_steps=4,
        learning_rate=1e-3, weight_decay=0.01, logging_steps=1, report_to=[], save_strategy="no",
        disable_tqdm=True, dataloader_pin_memory=False)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Tokens())
    assert args.optim == transformers.training_args.OptimizerNames.ADAMW_TORCH_FUSED
    device = "cpu" if use_cpu else "tpu"
    assert args.device.type == device and trainer.accelerator.device.type == device
    trainer.train()
    assert {p.device.type for p in model.parameters()} == {device}
    steps = [h for h in trainer.state.log_history if "loss" in h]
    assert len(steps) == 4
    return [h["loss"] for h in steps], [h["grad_norm"] for h in steps]


def test_trainer_trains_on_tpu_like_cpu(tmp_path):
    cpu_losses, cpu_norms = train_with_trainer(tmp_path / "cpu", use_cpu=True)
    AcceleratorState._reset_state(reset_partial_state=True)
    torch_tpu.metrics.reset()
    tpu_losses, tpu_norms = train_with_trainer(tmp_path / "tpu", use_cpu=False)
    # Every op of the tpu run is native, the fused AdamW step included.
    assert not torch_tpu.metrics.fallback_ops(), torch_tpu.metrics.fallback_ops()
    torch.testing.assert_close(torch.tensor(tpu_losses), torch.tensor(cpu_losses), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.tensor(tpu_norms), torch.tensor(cpu_norms), rtol=1e-4, atol=1e-5)
