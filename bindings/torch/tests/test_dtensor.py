"""DeviceMesh and DTensor on ccl, through examples/torch/tensor_parallel.py: init_device_mesh
("cpu", (dp, tp)) makes ccl groups for both axes; the small language model with
parallelize_module (ColwiseParallel, RowwiseParallel, SequenceParallel, PrepareModuleInput)
composed with FSDP2 (FSDP x TP) at 4 ranks equals the one-process reference, with and without
sequence parallelism, and TP over all 4 ranks alone."""
import unittest

import torch.distributed as dist

from ccl_torch_testing import run_ranks

STEPS = 3


def check(rank, size, kwargs):
    import ccl_torch
    import tensor_parallel
    import tiny_lm
    from torch.distributed.device_mesh import init_device_mesh
    tp = kwargs.get("tp", 2)
    mesh = init_device_mesh("cpu", (size // tp, tp), mesh_dim_names=("dp", "tp"))
    for axis in ("dp", "tp"):
        group = mesh[axis].get_group()
        assert dist.get_backend(group) == ccl_torch.BACKEND, (axis, dist.get_backend(group))
        assert ccl_torch.backend_of(group).size() == mesh[axis].size()
    params, losses = tensor_parallel.train(STEPS, **kwargs)
    want, want_losses = tiny_lm.train_reference(STEPS)
    diff = tiny_lm.max_difference(params, want)
    assert diff <= 2e-5, (kwargs, diff)
    for got, expected in zip(losses, want_losses):
        assert abs(got - expected) <= 1e-4, (losses, want_losses)
    if rank == 0:
        print(f"{kwargs} at {size} ranks: largest parameter difference {diff:.3g}", flush=True)


class DTensorParallel(unittest.TestCase):
    def test_fsdp_x_tp_sequence_parallel(self):
        run_ranks(check, 4, {"tp": 2}, timeout=300)

    def test_fsdp_x_tp_without_sequence_parallel(self):
        run_ranks(check, 4, {"tp": 2, "sequence_parallel": False}, timeout=300)

    def test_tp_alone_over_four(self):
        run_ranks(check, 4, {"tp": 4, "fsdp": False}, timeout=300)


if __name__ == "__main__":
    unittest.main()
