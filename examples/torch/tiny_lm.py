"""The small language model every example in this folder trains, its data and its one-process
reference.

The model is shaped for torch's parallelisms: a token embedding (no position embedding, so that
the sequence can be split: the causal mask tells the positions apart), blocks of pre-norm
multi-head causal attention (separate q, k, v and output projections, so that tensor
parallelism can give each rank whole heads) and a pre-norm MLP, each with a residual, then a
norm and the output layer. The data are sequences that count by their own stride from their own
start (mod the vocabulary): deterministic, so every run of an example, parallel or not, sees the
same global batches.
"""
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class Config:
    vocab: int = 32
    width: int = 32
    heads: int = 4
    blocks: int = 2
    seq: int = 12          # tokens a sequence feeds the model (it predicts the next of each)
    batch: int = 8         # sequences a step, over all data-parallel ranks
    seed: int = 0


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.heads = cfg.heads
        self.q = nn.Linear(cfg.width, cfg.width, bias=False)
        self.k = nn.Linear(cfg.width, cfg.width, bias=False)
        self.v = nn.Linear(cfg.width, cfg.width, bias=False)
        self.o = nn.Linear(cfg.width, cfg.width)

    def forward(self, x):
        b, s, _ = x.shape
        # -1 heads: under tensor parallelism a rank holds heads / tp of them.
        q, k, v = (p(x).view(b, s, -1, self.width_per_head).transpose(1, 2)
                   for p in (self.q, self.k, self.v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(out.transpose(1, 2).reshape(b, s, -1))

    @property
    def width_per_head(self):
        return self.o.out_features // self.heads


class Mlp(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.up = nn.Linear(cfg.width, 4 * cfg.width)
        self.down = nn.Linear(4 * cfg.width, cfg.width)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attn_norm = nn.LayerNorm(cfg.width)
        self.attn = Attention(cfg)
        self.mlp_norm = nn.LayerNorm(cfg.width)
        self.mlp = Mlp(cfg)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


class TinyLM(nn.Module):
    def __init__(self, cfg=Config()):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.width)
        # A ModuleDict with string keys: pipelining deletes the blocks a stage does not hold
        # and keeps the others' names (and so their state_dict keys).
        self.blocks = nn.ModuleDict({str(i): Block(cfg) for i in range(cfg.blocks)})
        self.norm = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.vocab)

    def forward(self, tokens):
        x = self.embed(tokens) if self.embed is not None else tokens
        for block in self.blocks.values():
            x = block(x)
        if self.head is None:
            return x
        return self.head(self.norm(x))


def build(cfg=Config()):
    """The model with the same initial weights in every process."""
    torch.manual_seed(cfg.seed)
    return TinyLM(cfg)


def batch(step, cfg=Config()):
    """The global batch of a step: (inputs, targets), each [batch, seq] int64."""
    gen = torch.Generator().manual_seed(1000 + step)
    start = torch.randint(0, cfg.vocab, (cfg.batch, 1), generator=gen)
    stride = torch.randint(1, 5, (cfg.batch, 1), generator=gen)
    seq = (start + stride * torch.arange(cfg.seq + 1)) % cfg.vocab
    return seq[:, :-1], seq[:, 1:]


def shard(tensor, index, count):
    """This data-parallel rank's rows of a global batch tensor."""
    if tensor.shape[0] % count:
        raise SystemExit(f"a batch of {tensor.shape[0]} does not split over {count} ranks")
    n = tensor.shape[0] // count
    return tensor[index * n:(index + 1) * n]


def loss_fn(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def optimizer(params):
    # SGD with momentum: Adam divides by the root of tiny second moments, which turns
    # reduction-order rounding into full-size steps and hides real differences in noise.
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def train_reference(steps, cfg=Config(), accumulate=1):
    """One process, the whole batch: the parameters (name -> tensor) after `steps` steps and
    the loss of each step. `accumulate` splits each batch into that many micro-batches whose
    gradients add up (what gradient accumulation computes)."""
    model = build(cfg)
    opt = optimizer(model.parameters())
    losses = []
    for step in range(steps):
        inputs, targets = batch(step, cfg)
        total = 0.0
        for x, y in zip(inputs.chunk(accumulate), targets.chunk(accumulate)):
            loss = loss_fn(model(x), y) / accumulate
            loss.backward()
            total += loss.item()
        opt.step()
        opt.zero_grad()
        losses.append(total)
    return {k: v.detach().clone() for k, v in model.named_parameters()}, losses


def full_parameters(model):
    """name -> whole tensor of a model whose parameters may be DTensors (FSDP2, TP)."""
    out = {}
    for name, p in model.named_parameters():
        t = p.full_tensor() if hasattr(p, "full_tensor") else p
        out[name] = t.detach().clone()
    return out


def max_difference(got, want):
    """The largest absolute difference between two name -> tensor maps (same names)."""
    if set(got) != set(want):
        raise AssertionError(f"parameter names differ: {sorted(set(got) ^ set(want))}")
    return max((got[k].float() - want[k].float()).abs().max().item() for k in want)


def report_against_reference(params, steps, cfg=Config(), accumulate=1):
    """On rank 0: trains the one-process reference and prints the largest difference of `params`
    (whole parameters) from it, the line the tests read."""
    import torch.distributed as dist
    if dist.get_rank() == 0:
        want, _ = train_reference(steps, cfg, accumulate)
        print(f"largest difference from one process: {max_difference(params, want):.3g}",
              flush=True)


def run_on_ccl(train, steps, accumulate=1):
    """The examples' main: the default group on ccl, train() -> (whole parameters, ...), then
    report_against_reference."""
    import torch.distributed as dist
    import ccl_torch
    dist.init_process_group(ccl_torch.BACKEND)
    try:
        result = train()
        report_against_reference(result[0], steps, accumulate=accumulate)
        return result
    finally:
        dist.destroy_process_group()
