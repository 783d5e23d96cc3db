"""transformers' Trainer (through accelerate) on ccl, on CPU: a tiny GPT-2 made from a config
(nothing downloaded) trains on the counting sequences of tiny_lm.py, data-parallel over ccl's
process group.

    PYTHONPATH=build/bindings/torch .venv/bin/torchrun --standalone --nproc_per_node 2 \\
        examples/torch/hf_trainer.py [--steps 8] [--output /tmp/hf-out]

accelerate takes only "gloo" or "mpi" as a CPU backend name; it uses a process group that
exists already. So the script makes ccl's group first (init_process_group("ccl_torch")) and
leaves TrainingArguments.ddp_backend unset, with use_cpu=True (docs/torch.md says why). Rank 0
prints the group's backend, the model's wrapper and each logged loss; every rank checks that the
parameters are equal on all ranks at the end.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tiny_lm  # noqa: E402


class CountingSequences(torch.utils.data.Dataset):
    """tiny_lm's sequences as a causal-LM dataset (input_ids, labels: the Trainer's format)."""

    def __init__(self, count, cfg):
        inputs, targets = zip(*(tiny_lm.batch(i, cfg) for i in range(count // cfg.batch)))
        self.rows = torch.cat([torch.cat([x, y[:, -1:]], dim=1) for x, y in zip(inputs, targets)])

    def __len__(self):
        return self.rows.shape[0]

    def __getitem__(self, i):
        return {"input_ids": self.rows[i], "labels": self.rows[i]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--output", default=None, help="Trainer's output_dir (default: a temp dir)")
    args = ap.parse_args()
    if args.steps < 1:
        ap.error("--steps must be at least 1")

    import tempfile
    import ccl_torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    dist.init_process_group(ccl_torch.BACKEND)  # first: accelerate then uses this group
    rank, world = dist.get_rank(), dist.get_world_size()
    cfg = tiny_lm.Config(batch=8 * world)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=cfg.vocab, n_positions=cfg.seq + 1,
                                       n_embd=32, n_layer=2, n_head=4))
    output = args.output or tempfile.mkdtemp(prefix="hf-trainer-ccl-")
    training = TrainingArguments(output_dir=output, use_cpu=True, max_steps=args.steps,
                                 per_device_train_batch_size=8, learning_rate=3e-3,
                                 logging_steps=max(1, args.steps // 4), save_strategy="no",
                                 report_to=[], seed=0, disable_tqdm=True,
                                 dataloader_num_workers=0)
    trainer = Trainer(model=model, args=training,
                      train_dataset=CountingSequences(8 * world * args.steps, cfg))
    result = trainer.train()
    wrapped = trainer.model_wrapped
    if rank == 0:
        print(f"group backend: {dist.get_backend()}; accelerate: "
              f"{trainer.accelerator.state.distributed_type}; model wrapped in "
              f"{type(wrapped).__name__}", flush=True)
        for entry in trainer.state.log_history:
            if "loss" in entry:
                print(f"step {entry['step']}: loss {entry['loss']:.4f}", flush=True)
        print(f"train loss {result.training_loss:.4f}", flush=True)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    everyone = [torch.empty_like(flat) for _ in range(world)]
    dist.all_gather(everyone, flat)
    if not all(torch.equal(x, flat) for x in everyone):
        raise SystemExit(f"rank {rank}: the ranks' parameters differ after training")
    if rank == 0:
        print(f"parameters equal on all {world} ranks", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
