#!/usr/bin/env python3
"""3D parallelism on ccl's torch backend: a small transformer-like language model trained with
tensor (tp) × pipeline (pp) × data (dp) parallelism, and the same training in one process.

    PYTHONPATH=<ccl build>/bindings/torch torchrun --standalone --nproc_per_node 8 \\
        --redirects 1 --tee 1 examples/parallel3d/train_3d.py            # tp 2 x pp 2 x dp 2
    PYTHONPATH=<ccl build>/bindings/torch python3 examples/parallel3d/train_3d.py --reference

The model: a vocabulary-parallel embedding, `--blocks` blocks, each an attention part (a
column-parallel projection to each head's query, key and value, causal softmax attention inside
each head, which needs no communication since a tp rank holds whole heads, and a row-parallel
output projection) and an MLP part (column-parallel, GELU, row-parallel), each with a residual
and no layer norm; then a column-parallel output layer whose logits are gathered, and the
cross-entropy of the next token. ccl_torch.mesh.DeviceMesh places the ranks and makes the
groups; ccl_torch.tensor_parallel splits the layers over the tp group; the blocks are divided
into pp stages that pass activations and their gradients per micro-batch with isend/recv in
the order of ccl's 1F1B schedule (pipeline_schedule); each dp replica gets its own slice of the
deterministic global batch and the gradients are averaged over the dp group; then plain SGD.
`--reference` trains the unsplit model (plain torch.nn modules) from the same initial weights on
the same global batches, so both print the same losses. examples/parallel3d/README.md says more.
"""
import argparse
import datetime
import math
import sys
import time
from dataclasses import dataclass, fields

import torch
import torch.nn.functional as F


@dataclass
class Config:
    tp: int = 2
    pp: int = 2
    dp: int = 2
    vocab: int = 32
    dim: int = 16
    heads: int = 4
    seq: int = 8
    blocks: int = 2
    microbatches: int = 2
    micro_batch_size: int = 2
    steps: int = 20
    lr: float = 0.5
    seed: int = 0
    schedule: str = "1f1b"
    sequence_parallel: bool = False

    @property
    def global_batch(self):
        """Sequences per step: every dp replica's micro-batches."""
        return self.dp * self.microbatches * self.micro_batch_size

    def check(self):
        def need(ok, text):
            if not ok:
                raise ValueError(f"train_3d: {text}")
        for f in ("tp", "pp", "dp", "vocab", "dim", "heads", "seq", "blocks", "microbatches",
                  "micro_batch_size"):
            need(getattr(self, f) >= 1, f"{f} must be at least 1")
        need(self.dim % self.heads == 0, f"heads {self.heads} must divide dim {self.dim}")
        need(self.heads % self.tp == 0, f"tp {self.tp} must divide heads {self.heads}")
        need(self.vocab % self.tp == 0, f"tp {self.tp} must divide vocab {self.vocab}")
        need(self.blocks % self.pp == 0, f"pp {self.pp} must divide blocks {self.blocks}")
        need(not self.sequence_parallel or self.seq % self.tp == 0,
             f"tp {self.tp} must divide seq {self.seq} with sequence parallelism")
        need(self.schedule in ("1f1b", "gpipe"), "schedule must be 1f1b or gpipe")


# ------------------------------------------------------------------------------------- the data

def global_batch(cfg, step):
    """(inputs, targets) of one step, each [seq, global_batch] (sequence first): sequences that
    follow x' = (5x + 3) mod vocab, with one token in ten replaced at random (so the loss cannot
    reach zero). The same on every rank and in the reference."""
    gen = torch.Generator().manual_seed(1000 * cfg.seed + step)
    n, length = cfg.global_batch, cfg.seq + 1
    tokens = torch.empty(length, n, dtype=torch.long)
    tokens[0] = torch.randint(0, cfg.vocab, (n,), generator=gen)
    for t in range(1, length):
        tokens[t] = (5 * tokens[t - 1] + 3) % cfg.vocab
        noise = torch.rand(n, generator=gen) < 0.1
        tokens[t] = torch.where(noise, torch.randint(0, cfg.vocab, (n,), generator=gen),
                                tokens[t])
    return tokens[:-1], tokens[1:]


def microbatch(cfg, batch, dp_index, m):
    """Micro-batch m of dp replica dp_index: its columns of the global batch."""
    inputs, targets = batch
    first = (dp_index * cfg.microbatches + m) * cfg.micro_batch_size
    cols = slice(first, first + cfg.micro_batch_size)
    return inputs[:, cols], targets[:, cols]


# ---------------------------------------------------------------------------- the full weights

def block_names(i):
    return [f"blocks.{i}.{n}" for n in ("qkv.weight", "qkv.bias", "proj.weight", "proj.bias",
                                        "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias")]


def full_parameters(cfg):
    """The initial unsplit parameters by name, from cfg.seed alone. qkv's rows are per head
    [head][query|key|value][head dim], so a tp rank's block of rows holds whole heads."""
    gen = torch.Generator().manual_seed(cfg.seed)
    d, v = cfg.dim, cfg.vocab
    out_scale = (2 * cfg.blocks) ** -0.5  # the layers that write into the residual stream

    def normal(*shape, scale):
        return torch.randn(*shape, generator=gen) * scale

    p = {"embed.weight": normal(v, d, scale=1.0)}
    for i in range(cfg.blocks):
        qkv_w, qkv_b, proj_w, proj_b, fc1_w, fc1_b, fc2_w, fc2_b = block_names(i)
        p[qkv_w] = normal(3 * d, d, scale=d ** -0.5)
        p[qkv_b] = normal(3 * d, scale=0.02)
        p[proj_w] = normal(d, d, scale=out_scale * d ** -0.5)
        p[proj_b] = normal(d, scale=0.02)
        p[fc1_w] = normal(4 * d, d, scale=d ** -0.5)
        p[fc1_b] = normal(4 * d, scale=0.02)
        p[fc2_w] = normal(d, 4 * d, scale=out_scale * (4 * d) ** -0.5)
        p[fc2_b] = normal(d, scale=0.02)
    p["head.weight"] = normal(v, d, scale=d ** -0.5)
    p["head.bias"] = normal(v, scale=0.02)
    return p


def causal_attention(qkv, head_dim):
    """[seq, batch, heads * 3 * head_dim] (per head: query, key, value) -> [seq, batch, heads *
    head_dim]: softmax attention of each position over itself and the ones before, per head."""
    s, b, width = qkv.shape
    heads = width // (3 * head_dim)
    q, k, v = qkv.reshape(s, b, heads, 3, head_dim).unbind(dim=3)
    scores = torch.einsum("sbhd,tbhd->bhst", q, k) / math.sqrt(head_dim)
    future = torch.triu(torch.ones(s, s, dtype=torch.bool), diagonal=1)
    weights = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)
    return torch.einsum("bhst,tbhd->sbhd", weights, v).reshape(s, b, heads * head_dim)


# -------------------------------------------------------------------------- the unsplit model

class Block(torch.nn.Module):
    """One block of the unsplit model (plain torch.nn layers)."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg.dim
        self.head_dim = d // cfg.heads
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.proj(causal_attention(self.qkv(x), self.head_dim))
        return x + self.fc2(F.gelu(self.fc1(x)))


class FullModel(torch.nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed = torch.nn.Embedding(cfg.vocab, cfg.dim)
        self.blocks = torch.nn.ModuleList(Block(cfg) for _ in range(cfg.blocks))
        self.head = torch.nn.Linear(cfg.dim, cfg.vocab)
        with torch.no_grad():
            for name, value in full_parameters(cfg).items():
                self.get_parameter(name).copy_(value)

    def forward(self, ids, targets):
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        logits = self.head(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def reference(cfg):
    """The same training without parallelism in this process: (loss per step, final parameters
    by name)."""
    cfg.check()
    model = FullModel(cfg)
    losses = []
    for step in range(cfg.steps):
        model.zero_grad(set_to_none=True)
        loss = model(*global_batch(cfg, step))
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= cfg.lr * p.grad
        losses.append(loss.item())
    return losses, {n: p.detach().clone() for n, p in model.named_parameters()}


# ------------------------------------------------------------------------- the parallel model

class ParallelBlock(torch.nn.Module):
    """Block over the tp group: this rank's heads (qkv column-parallel, proj row-parallel) and
    its slice of the MLP's hidden features."""

    def __init__(self, cfg, group, full, i):
        super().__init__()
        from ccl_torch import tensor_parallel as tpl
        sp = cfg.sequence_parallel
        qkv_w, qkv_b, proj_w, proj_b, fc1_w, fc1_b, fc2_w, fc2_b = block_names(i)
        self.head_dim = cfg.dim // cfg.heads
        self.qkv = tpl.ColumnParallelLinear.from_full(full[qkv_w], full[qkv_b], group,
                                                      sequence_parallel=sp)
        self.proj = tpl.RowParallelLinear.from_full(full[proj_w], full[proj_b], group,
                                                    sequence_parallel=sp)
        self.fc1 = tpl.ColumnParallelLinear.from_full(full[fc1_w], full[fc1_b], group,
                                                      sequence_parallel=sp)
        self.fc2 = tpl.RowParallelLinear.from_full(full[fc2_w], full[fc2_b], group,
                                                   sequence_parallel=sp)

    def forward(self, x):
        x = x + self.proj(causal_attention(self.qkv(x), self.head_dim))
        return x + self.fc2(F.gelu(self.fc1(x)))


class Stage(torch.nn.Module):
    """Pipeline stage `stage` of cfg.pp: its blocks; the embedding on the first stage, the
    output layer and the loss on the last."""

    def __init__(self, cfg, group, stage):
        super().__init__()
        from ccl_torch import tensor_parallel as tpl
        full = full_parameters(cfg)
        sp = cfg.sequence_parallel
        per_stage = cfg.blocks // cfg.pp
        self.first, self.last = stage == 0, stage == cfg.pp - 1
        self.block_ids = list(range(stage * per_stage, (stage + 1) * per_stage))
        self.embed = (tpl.VocabParallelEmbedding.from_full(full["embed.weight"], group,
                                                           sequence_parallel=sp)
                      if self.first else None)
        self.blocks = torch.nn.ModuleList(ParallelBlock(cfg, group, full, i)
                                          for i in self.block_ids)
        self.head = (tpl.ColumnParallelLinear.from_full(full["head.weight"], full["head.bias"],
                                                        group, gather_output=True,
                                                        sequence_parallel=sp)
                     if self.last else None)

    def forward(self, x):
        """x: token ids [seq, batch] on the first stage, else the previous stage's activation."""
        if self.first:
            x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return x

    def loss(self, x, targets):
        logits = self.head(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))

    def full_parameters(self):
        """This stage's unsplit parameters by their FullModel names (collective over tp)."""
        out = {}
        if self.embed is not None:
            out["embed.weight"] = self.embed.full_parameters()[0]
        for i, block in zip(self.block_ids, self.blocks):
            names = iter(block_names(i))
            for layer in (block.qkv, block.proj, block.fc1, block.fc2):
                w, b = layer.full_parameters()
                out[next(names)], out[next(names)] = w, b
        if self.head is not None:
            out["head.weight"], out["head.bias"] = self.head.full_parameters()
        return out


class Trainer:
    """One rank's share of the 3D training, on a DeviceMesh of the default group."""

    def __init__(self, cfg, mesh):
        import torch.distributed as dist
        from ccl_torch import _training
        cfg.check()
        self.cfg, self.mesh, self.dist = cfg, mesh, dist
        self.stage_index = mesh.coord.pp
        self.stage = Stage(cfg, mesh.tp_group, self.stage_index)
        self.schedule = _training.pipeline_schedule(cfg.schedule, cfg.pp, cfg.microbatches,
                                                    self.stage_index)
        pp_ranks = mesh.pp_ranks
        self.prev = pp_ranks[self.stage_index - 1] if not self.stage.first else None
        self.next = pp_ranks[self.stage_index + 1] if not self.stage.last else None
        local_seq = cfg.seq // cfg.tp if cfg.sequence_parallel else cfg.seq
        self.activation_shape = (local_seq, cfg.micro_batch_size, cfg.dim)

    def step(self, step):
        """One training step: the pipeline over the micro-batches, the dp average of the
        gradients, SGD. Returns the global batch's mean loss (the same on every rank)."""
        cfg, dist, stage = self.cfg, self.dist, self.stage
        group = self.mesh.pp_group
        batch = global_batch(cfg, step)
        stage.zero_grad(set_to_none=True)
        inputs, outputs, sends, loss_sum = {}, {}, [], 0.0
        for kind, m, _ in self.schedule:
            ids, targets = microbatch(cfg, batch, self.mesh.coord.dp, m)
            if kind == "forward":
                if stage.first:
                    x = ids
                else:
                    x = torch.empty(self.activation_shape)
                    dist.recv(x, src=self.prev, group=group)
                    x.requires_grad_()
                y = stage(x)
                if stage.last:
                    loss = stage.loss(y, targets)
                    loss_sum += loss.item()
                    y = loss / cfg.microbatches  # the step's loss is the micro-batches' mean
                else:
                    # Sends never block the schedule: each is posted with the next receive.
                    out = y.detach().contiguous()
                    sends.append((dist.isend(out, dst=self.next, group=group), out))
                inputs[m], outputs[m] = x, y
            else:
                x, y = inputs.pop(m), outputs.pop(m)
                if stage.last:
                    y.backward()
                else:
                    grad = torch.empty(self.activation_shape)
                    dist.recv(grad, src=self.next, group=group)
                    y.backward(grad)
                if not stage.first:
                    g = x.grad.contiguous()
                    sends.append((dist.isend(g, dst=self.prev, group=group), g))
        for work, _ in sends:
            work.wait()
        self.average_gradients()
        with torch.no_grad():
            for p in stage.parameters():
                p -= cfg.lr * p.grad
        return self.step_loss(loss_sum / cfg.microbatches)

    def average_gradients(self):
        """The mean of the gradients over the dp group: one all-reduce of them packed."""
        dp = self.cfg.dp
        if dp == 1:
            return
        grads = [p.grad for p in self.stage.parameters()]
        flat = torch.cat([g.reshape(-1) for g in grads])
        self.dist.all_reduce(flat, group=self.mesh.dp_group)
        flat /= dp
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()

    def step_loss(self, local):
        """The last stage's loss averaged over dp, then handed to every stage."""
        dist, mesh = self.dist, self.mesh
        t = torch.tensor([local if self.stage.last else 0.0], dtype=torch.float64)
        if self.stage.last and self.cfg.dp > 1:
            dist.all_reduce(t, group=mesh.dp_group)
            t /= self.cfg.dp
        if self.cfg.pp > 1:
            dist.broadcast(t, src=mesh.pp_ranks[-1], group=mesh.pp_group)
        return t.item()

    def full_parameters(self):
        """The whole model's unsplit parameters by name, on every rank (collective)."""
        mine = self.stage.full_parameters()
        parts = [None] * self.dist.get_world_size()
        self.dist.all_gather_object(parts, mine if self.mesh.coord.dp == 0 else {})
        full = {}
        for part in parts:
            full.update(part)
        return full


def train(cfg, mesh=None, log=None):
    """The 3D training on the default group (init_process_group first): (loss per step, final
    unsplit parameters by name). `log(text)` gets the mesh description and each step's loss."""
    from ccl_torch.mesh import DeviceMesh
    cfg.check()
    mesh = mesh or DeviceMesh(cfg.tp, cfg.pp, cfg.dp)
    if log:
        log(mesh.describe())
    trainer = Trainer(cfg, mesh)
    losses = []
    for step in range(cfg.steps):
        started = time.perf_counter()
        losses.append(trainer.step(step))
        if log:
            log(f"step {step:3d}  loss {losses[-1]:.6f}  ({time.perf_counter() - started:.3f} s)")
    return losses, trainer.full_parameters()


# ------------------------------------------------------------------------------------- the CLI

def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    defaults = Config()
    for f in fields(Config):
        flag = "--" + f.name.replace("_", "-")
        if f.type is bool or f.type == "bool":
            parser.add_argument(flag, action="store_true")
        else:
            parser.add_argument(flag, type=type(getattr(defaults, f.name)),
                                default=getattr(defaults, f.name))
    parser.add_argument("--reference", action="store_true",
                        help="train the unsplit model in this process (no parallelism)")
    args = parser.parse_args(argv)
    return Config(**{f.name: getattr(args, f.name) for f in fields(Config)}), args.reference


def main(argv=None):
    cfg, ref = parse_args(argv)
    if ref:
        print(f"reference: the unsplit model in one process, global batch "
              f"{cfg.global_batch} x {cfg.seq} tokens", flush=True)
        losses, _ = reference(cfg)
        for step, loss in enumerate(losses):
            print(f"step {step:3d}  loss {loss:.6f}", flush=True)
        return 0
    import torch.distributed as dist
    import ccl_torch  # registers ccl_torch.BACKEND
    dist.init_process_group(ccl_torch.BACKEND, timeout=datetime.timedelta(seconds=120))
    rank = dist.get_rank()

    def log(text):
        if rank == 0:
            print(text, flush=True)
    log(f"train_3d: tp {cfg.tp} x pp {cfg.pp} x dp {cfg.dp}, {cfg.schedule} over "
        f"{cfg.microbatches} micro-batches of {cfg.micro_batch_size}, global batch "
        f"{cfg.global_batch} x {cfg.seq} tokens"
        f"{', sequence parallel' if cfg.sequence_parallel else ''}")
    train(cfg, log=log)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
