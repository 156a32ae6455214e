"""Run by test_torchrun.py under torchrun: what a user's script does, unchanged -- the process group
from torchrun's environment with no backend named, a collective, and DDP steps of a small model;
each rank writes what it saw as JSON to $TPU_TORCHRUN_OUT/rank<N>.json (the ranks share torchrun's
stdout, where long lines of two ranks can interleave)."""
import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_tpu  # noqa: F401

torch.tpu.set_device(int(os.environ["LOCAL_RANK"]) % torch.tpu.device_count())
dist.init_process_group()  # torchrun's env:// rendezvous; the tpu backend is the default for tpu tensors
rank, world = dist.get_rank(), dist.get_world_size()

x = torch.full((1 << 16,), float(rank + 1), device="tpu")
dist.all_reduce(x)

torch.manual_seed(0)  # the same model on every rank; each trains on its own rows
model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1)).to("tpu"))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
g = torch.Generator().manual_seed(1)
losses = []
for _ in range(3):
    data = torch.randn(4 * world, 8, generator=g)
    xs, ys = data[rank * 4:(rank + 1) * 4].to("tpu"), data[rank * 4:(rank + 1) * 4].sum(1, keepdim=True).to("tpu")
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(xs), ys)
    loss.backward()
    opt.step()
    dist.all_reduce(loss := loss.detach(), op=dist.ReduceOp.AVG)
    losses.append(loss.item())

pg = dist.group.WORLD
backend = pg._get_backend(torch.device("tpu"))
with open(os.path.join(os.environ["TPU_TORCHRUN_OUT"], f"rank{rank}.json"), "w") as f:
    json.dump({
        "rank": rank, "world": world, "config": str(dist.get_backend_config()), "transport": backend.transport,
        "all_reduce": x[:4].cpu().tolist(), "losses": losses,
        "weight": model.module[0].weight.detach().cpu().flatten().tolist(),
    }, f)
dist.destroy_process_group()
