"""The batch-invariant switch: every linear layer computed one row at a time.

A row's logits change with the batch because the matrix library picks another kernel for another number of rows:
on this CPU (MKL, AVX-512) float32 `F.linear` gives a row one set of bits alone, another when 2 or 3 rows share
the call, a third for 4 or more. Computing every row by itself makes each row's call the same whatever the batch,
so a row's result cannot depend on its neighbours: invariant by construction, on any matrix library. The price is
that the weights are read once per row instead of once per batch (the lm_head's 28 M multiply-adds for each row).

What it does not fix: attention. Left padding lengthens a row's softmax and value sums, and a chunked or stepwise
prefill reduces over the keys in other pieces than a whole one; those need attention kernels with one reduction
order for every split (servers use unpadded, paged attention with a fixed split size), not a per-row linear.
"""
from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F


class RowByRow(torch.overrides.TorchFunctionMode):
    """Inside it, `F.linear` on [..., rows, in] and `torch.addmm(bias, x, w)` on [rows, in] (GPT-2's Conv1D) run
    once per row, each as a [1, in] call."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is F.linear:
            x, weight = args[0], args[1]
            bias = args[2] if len(args) > 2 else kwargs.get("bias")
            flat = x.reshape(-1, x.shape[-1])
            if flat.shape[0] > 1:
                rows = [F.linear(flat[i:i + 1], weight, bias) for i in range(flat.shape[0])]
                return torch.cat(rows).reshape(*x.shape[:-1], weight.shape[0])
        elif func is torch.addmm and len(args) == 3 and not kwargs and args[1].dim() == 2 and args[1].shape[0] > 1:
            bias, x, weight = args
            return torch.cat([torch.addmm(bias, x[i:i + 1], weight) for i in range(x.shape[0])])
        return func(*args, **kwargs)


@contextlib.contextmanager
def batch_invariant(on: bool = True):
    """Every linear layer row by row while inside (when `on`); nothing changes otherwise."""
    if not on:
        yield
        return
    with RowByRow():
        yield
