#!/usr/bin/env python3
"""The LAMB step of perf/training/lamb_bench.cc written plainly in torch, for comparison.

The same update as ccl::training::Lamb (include/ccl/training/optim.hpp) with the same defaults
and sizes (1M and 16M float parameters, as one tensor and as 64), in torch ops, in place where
natural, on one thread. Prints the rate in parameter bytes (4 per float) per second, in GiB/s
as lamb_bench's bytes_per_second shows them (Google Benchmark's "G/s" are 2^30 bytes).

Usage (the torch of /usr/bin/python3):
  /usr/bin/python3 perf/training/lamb_torch.py [--min-time 0.5]
"""
import argparse
import time

import torch

LR, BETA1, BETA2, EPS, WEIGHT_DECAY, CLAMP = 1e-7, 0.9, 0.999, 1e-6, 0.01, 10.0


class Lamb:
    def __init__(self, params):
        self.params = params
        self.state = [(torch.zeros_like(x), torch.zeros_like(x)) for x, _ in params]
        self.t = 0

    def step(self):
        self.t += 1
        bias1 = 1 - BETA1 ** self.t
        bias2 = 1 - BETA2 ** self.t
        for (x, g), (m, v) in zip(self.params, self.state):
            m.mul_(BETA1).add_(g, alpha=1 - BETA1)
            v.mul_(BETA2).addcmul_(g, g, value=1 - BETA2)
            denom = (v / bias2).sqrt_().add_(EPS)
            u = (m / bias1).div_(denom).add_(x, alpha=WEIGHT_DECAY)
            x_norm, u_norm = x.norm().item(), u.norm().item()
            ratio = min(x_norm, CLAMP) / u_norm if x_norm > 0 and u_norm > 0 else 1.0
            x.add_(u, alpha=-LR * ratio)


def bench(total, tensors, min_time):
    count = total // tensors
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(total, generator=gen) * 2 - 1
    g = torch.rand(total, generator=gen) * 2 - 1
    params = [(x[i * count:(i + 1) * count], g[i * count:(i + 1) * count])
              for i in range(tensors)]
    lamb = Lamb(params)
    lamb.step()  # the first step allocates the moments
    steps, start = 0, time.perf_counter()
    while True:
        lamb.step()
        steps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time and steps >= 3:
            break
    per_step = elapsed / steps
    return per_step, total * 4 / per_step / 2**30


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds per size")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread")
    for total in (1 << 20, 16 << 20):
        for tensors in (1, 64):
            per_step, rate = bench(total, tensors, args.min_time)
            print(f"floats {total:>9} tensors {tensors:>3}: {per_step * 1e3:8.2f} ms/step "
                  f"{rate:6.2f} GiB/s of parameters")


if __name__ == "__main__":
    main()
