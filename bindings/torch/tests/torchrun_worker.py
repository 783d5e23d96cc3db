"""Run by torchrun (tests/CMakeLists.txt): init_process_group(ccl_torch.BACKEND) with env://, as a user
would, then one of each kind of collective."""
import torch
import torch.distributed as dist

import ccl_torch

dist.init_process_group(ccl_torch.BACKEND)
rank, size = dist.get_rank(), dist.get_world_size()
t = torch.full((1000,), float(rank))
dist.all_reduce(t)
assert torch.equal(t, torch.full((1000,), float(sum(range(size))))), t
outs = [torch.empty(3) for _ in range(size)]
dist.all_gather(outs, torch.full((3,), float(rank)))
assert all(torch.equal(o, torch.full((3,), float(r))) for r, o in enumerate(outs))
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank} of {size}: ok")
