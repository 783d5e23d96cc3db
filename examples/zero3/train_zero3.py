"""A small transformer-like language model trained with ZeRO stage 3 (ccl_torch.zero), each
rank on its slice of the global batch; with --reference, the same model in one process on the
whole batch with torch.optim.Adam, for comparison.

    PYTHONPATH=<build>/bindings/torch torchrun --standalone --nproc_per_node 4 \\
        --redirects 1 --tee 1 examples/zero3/train_zero3.py
    PYTHONPATH=<build>/bindings/torch python3 examples/zero3/train_zero3.py --reference

Both print the loss of each step (ZeRO's: the mean over the global batch) and a checksum of
the final parameters; the ZeRO run then prints what each rank holds against what one
unsharded replica (DDP with Adam) holds.
"""
import argparse
import math

import torch
from torch import nn
from torch.nn import functional as F

VOCAB = 32
WIDTH = 32
SEQ = 12           # tokens per sequence (inputs: the first SEQ - 1, targets: the last SEQ - 1)
BLOCKS = 2
GLOBAL_BATCH = 8   # sequences per step, over all ranks
LR = 3e-3
SEED = 0


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = nn.Embedding(VOCAB, WIDTH)
        self.positions = nn.Embedding(SEQ, WIDTH)

    def forward(self, tokens):
        where = torch.arange(tokens.shape[1])
        return self.tokens(tokens) + self.positions(where)


class Attention(nn.Module):
    """Single-head causal self-attention with a residual connection (pre-norm)."""

    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        # No bias: a bias of the keys moves every score of a query alike, so its gradient is 0 up
        # to rounding, noise that Adam would scale up to full-size steps.
        self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
        self.proj = nn.Linear(WIDTH, WIDTH)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(WIDTH)
        later = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool).triu(1)
        weights = scores.masked_fill(later, float("-inf")).softmax(dim=-1)
        return x + self.proj(weights @ v)


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.up = nn.Linear(WIDTH, 2 * WIDTH)
        self.down = nn.Linear(2 * WIDTH, WIDTH)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = Attention()
        self.mlp = Mlp()

    def forward(self, x):
        return self.mlp(self.attention(x))


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(WIDTH)
        self.out = nn.Linear(WIDTH, VOCAB)

    def forward(self, x):
        return self.out(self.norm(x))


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = Embed()
        self.blocks = nn.ModuleList(Block() for _ in range(BLOCKS))
        self.head = Head()

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build_model():
    torch.manual_seed(SEED)
    return TinyLM()


def units_of(model):
    """ZeRO-3's units: the embedding, each attention and MLP part, the head."""
    units = [model.embed]
    for block in model.blocks:
        units += [block.attention, block.mlp]
    return units + [model.head]


def global_batch():
    """GLOBAL_BATCH sequences, each counting by its own stride from its own start (mod VOCAB):
    the model learns to continue them. Returns (inputs, targets), each [GLOBAL_BATCH, SEQ-1]."""
    gen = torch.Generator().manual_seed(1234)
    start = torch.randint(0, VOCAB, (GLOBAL_BATCH, 1), generator=gen)
    stride = torch.randint(1, 5, (GLOBAL_BATCH, 1), generator=gen)
    seq = (start + stride * torch.arange(SEQ)) % VOCAB
    return seq[:, :-1], seq[:, 1:]


def loss_of(model, inputs, targets):
    logits = model(inputs)
    return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))


def checksum(params):
    return sum(p.double().pow(2).sum().item() for p in params.values())


def unsharded_bytes(params):
    """What one replica holds with DDP and Adam: parameters, gradients, two moments (float32)."""
    p = sum(q.numel() for q in params.values()) * 4
    return {"parameters": p, "gradients": p, "optimizer": 2 * p, "total": 4 * p}


def fmt(mem):
    return ", ".join(f"{k} {v:,} B" for k, v in mem.items())


def train_zero3(steps, verbose=True, prefetch=1):
    """ZeRO-3 on the default process group (ccl's): this rank's slice of the global batch.
    Returns (whole parameters, losses over the global batch, this rank's memory())."""
    import torch.distributed as dist
    import ccl_torch.zero as zero

    rank, world = dist.get_rank(), dist.get_world_size()
    if GLOBAL_BATCH % world:
        raise SystemExit(f"the global batch of {GLOBAL_BATCH} does not split over {world} ranks")
    model = build_model()
    zdp = zero.ZeroDataParallel(model, stage=3, optimizer=zero.Adam(lr=LR), units=units_of(model),
                                prefetch=prefetch)
    inputs, targets = global_batch()
    n = GLOBAL_BATCH // world
    inputs, targets = inputs[rank * n:(rank + 1) * n], targets[rank * n:(rank + 1) * n]
    losses = []
    for step in range(steps):
        zdp.zero_grad()
        loss = loss_of(zdp, inputs, targets)
        loss.backward()
        zdp.step()
        mean = loss.detach().clone()
        dist.all_reduce(mean, op=dist.ReduceOp.AVG)   # equal slices: the global batch's mean
        losses.append(mean.item())
        if verbose and rank == 0:
            print(f"step {step}: loss {mean.item():.6f}", flush=True)
    memory, peak = zdp.memory(), zdp.peak_memory()
    full = zdp.full_state_dict()
    if verbose:
        if rank == 0:
            print(f"final parameters: checksum {checksum(full):.6f}", flush=True)
        print(f"rank {rank} of {world} holds after step(): {fmt(memory)}", flush=True)
        print(f"rank {rank} of {world} peak: {fmt(peak)}", flush=True)
        if rank == 0:
            whole = unsharded_bytes(full)   # (the model's own parameters are empty here)
            print(f"unsharded (DDP + Adam) per rank: {fmt(whole)}; ZeRO-3 holds "
                  f"{memory['total'] / whole['total']:.3f} of it after step(), "
                  f"{peak['total'] / whole['total']:.3f} at its peak", flush=True)
    return full, losses, memory


def train_reference(steps, verbose=True):
    """The same model, batch and Adam, in one process on the whole batch."""
    model = build_model()
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    inputs, targets = global_batch()
    losses = []
    for step in range(steps):
        opt.zero_grad()
        loss = loss_of(model, inputs, targets)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if verbose:
            print(f"step {step}: loss {loss.item():.6f}", flush=True)
    params = {name: p.detach().clone() for name, p in model.named_parameters()}
    if verbose:
        print(f"final parameters: checksum {checksum(params):.6f}", flush=True)
        print(f"one process (Adam) holds: {fmt(unsharded_bytes(params))}", flush=True)
    return params, losses


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--prefetch", type=int, default=1, help="units gathered ahead")
    parser.add_argument("--reference", action="store_true",
                        help="train in one process on the whole batch (torch.optim.Adam)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.reference:
        train_reference(args.steps)
        return
    import torch.distributed as dist
    import ccl_torch  # registers ccl_torch.BACKEND

    dist.init_process_group(ccl_torch.BACKEND, init_method="env://")
    try:
        train_zero3(args.steps, prefetch=args.prefetch)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
