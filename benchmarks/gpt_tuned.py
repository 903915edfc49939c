"""The GPT training step of backprop_lessons.gpt, rewritten for speed: the
tuned variant that benchmarks/gpt_step.py times beside the book's layers.

Not the book's code.  Chapter 6 shows `backprop_lessons.gpt.layers`: one
forward/backward pair per layer, each a few lines of its formula, fresh
arrays for every result, gradients *added* into zeroed buffers.  This file
computes the same numbers (up to rounding: it folds constants together and
adds in other orders), laid out as llm.c's train_gpt2.c is for speed:

  - one flat array holds every parameter, one every gradient, one each of
    AdamW's moments (llm.c's `params_memory`, `grads_memory`, `m_memory`,
    `v_memory`), so the update is a few passes over one array instead of a
    Python loop over sixteen tensors;
  - every activation and every activation gradient is allocated once, in
    the constructor (llm.c's `ActivationTensors`), and written with NumPy's
    `out=` arguments: a step asks the C library for no fresh memory, so it
    takes no page faults;
  - a gradient with one producer is *written* by it (`out=`), not added
    into zeros: no zeroing, no temporary per matrix product; only wte,
    used twice (embedding and LM head), takes a second contribution;
  - the residual stream's gradient is one array that flows down the
    network: `x + f(x)` passes it on unchanged, so f's branch reads it in
    place and only the layernorms' input gradients are added into it;
  - elementwise chains (GELU, the attention softmax, AdamW) run block by
    block, over pieces small enough to stay in the core's L2 cache between
    their passes, instead of each pass streaming a whole array from memory;
  - sums over a short last axis (layernorm's means, the softmax's row sums,
    the bias gradients) are matrix-vector products with a vector of ones,
    which BLAS does several times faster than NumPy's reductions;
  - attention's scale 1/sqrt(hs) multiplies q, (B, T, C) numbers, instead of
    the (B, NH, T, T) scores; the embedding's scatter-add is one matrix
    product with a one-hot matrix.

The matrix products are the same calls to NumPy's BLAS as in the book's
step and take the same time: everything this layout saves is outside them.

What it is not: general.  One config and one batch shape, fixed when it is
made; the tied LM head, no dropout, no sampling.
tests/conventions/test_gpt_tuned.py checks it against `gpt_forward`,
`gpt_backward` and `train.AdamW`: the same loss, gradients and parameters,
step after step, in float64.
"""

from __future__ import annotations

import math

import numpy as np

from backprop_lessons.gpt.layers import GELU_CUBIC, GELU_SCALE, LAYERNORM_EPS
from backprop_lessons.gpt.model import parameter_shapes
from backprop_lessons.gpt.train import DECAYED

BLOCK_BYTES = 256 * 1024  # one piece of an elementwise chain: fits in L2


def _blocks(n_rows: int, row_bytes: int):
    """Slices of rows, each about BLOCK_BYTES long."""
    step = max(1, BLOCK_BYTES // row_bytes)
    return [slice(i, min(i + step, n_rows)) for i in range(0, n_rows, step)]


def _view(flat, shape):
    """The first prod(shape) entries of a flat scratch array, as `shape`."""
    return flat[: math.prod(shape)].reshape(shape)


def _flat(shapes: dict, dtype) -> tuple[np.ndarray, dict]:
    """One zeroed array for every tensor of `shapes`, and a view per name."""
    memory = np.zeros(sum(math.prod(s) for s in shapes.values()), dtype)
    views, at = {}, 0
    for name, shape in shapes.items():
        views[name] = memory[at : at + math.prod(shape)].reshape(shape)
        at += math.prod(shape)
    return memory, views


class TunedGPT:
    """A GPT of `config` that trains on batches of shape (B, T) with AdamW.

    `params` (the dict of `init_params`) is copied into one flat array;
    `self.params` and `self.grads` are views of the flat arrays by name.
    `step(idx, targets)` runs forward, backward and the AdamW update and
    returns the loss.
    """

    def __init__(self, params, config, B, T, lr, betas, eps, weight_decay):
        shapes = parameter_shapes(config)
        # the decayed matrices first: weight decay is then one slice
        order = sorted(shapes, key=lambda name: name not in DECAYED)
        shapes = {name: shapes[name] for name in order}
        dtype = params["wte"].dtype
        self.flat, self.params = _flat(shapes, dtype)
        for name, p in params.items():
            self.params[name][...] = p
        self.grads_flat, self.grads = _flat(shapes, dtype)
        self.m = np.zeros_like(self.flat)
        self.v = np.zeros_like(self.flat)
        self.n_decayed = sum(self.params[n].size for n in DECAYED)
        self.lr, (self.beta1, self.beta2) = lr, betas
        self.eps, self.weight_decay, self.t = eps, weight_decay, 0
        self.config, self.B, self.T = config, B, T
        L, C, V = config.n_layer, config.n_embd, config.vocab_size
        NH, N = config.n_head, B * T
        # llm.c's ActivationTensors: what the backward reads.  Every layernorm
        # keeps its output, its xhat and its rstd.
        a = {"x": (L + 1, N, C)}  # the residual stream entering each block
        a["x_mid"] = (L, N, C)  # ... and after the block's attention
        for name, shape in [("ln1", (L, N)), ("ln2", (L, N)), ("lnf", (N,))]:
            a |= {name: (*shape, C), name + "_xhat": (*shape, C)}
            a[name + "_rstd"] = (*shape, 1)
        a |= {"qkv": (L, N, 3 * C), "att": (L, B, NH, T, T), "atty": (L, N, C)}
        a |= {"fch": (L, N, 4 * C), "tanh_u": (L, N, 4 * C)}
        a |= {"fch_gelu": (L, N, 4 * C), "probs": (N, V)}
        # activation gradients and scratch, shared by every block
        g = {"dx": (N, C), "dln": (N, C), "datty": (N, C), "dqkv": (N, 3 * C)}
        g |= {"dfch": (N, 4 * C), "dfch_gelu": (N, 4 * C), "datt": (B, NH, T, T)}
        g |= {"scratch": (N * 4 * C,), "scratch2": (N * 4 * C,), "means": (N, 2)}
        g |= {"onehot": (N, V), "dwte": (V, C)}
        itemsize = np.dtype(dtype).itemsize
        self.adam_blocks = _blocks(self.flat.size, itemsize)
        g["adam"] = (self.adam_blocks[0].stop,)  # AdamW's scratch, one block
        self.a = {k: np.empty(s, dtype) for k, s in a.items()}
        self.g = {k: np.empty(s, dtype) for k, s in g.items()}
        self.mask = np.triu(np.full((T, T), -np.inf, dtype), k=1)
        self.rows = np.arange(N)
        # sums and means over an axis as matrix-vector products (see
        # _layernorm_forward): vectors of ones, and of 1/C
        self.ones = {n: np.ones(n, dtype) for n in {N, T, V}}
        self.mean_of_c = np.full(C, 1.0 / C, dtype)
        self.mlp_blocks = _blocks(N, 4 * C * itemsize)
        self.att_blocks = _blocks(B, NH * T * T * itemsize)

    def buffer_bytes(self) -> int:
        """The memory a step works in, all of it made by the constructor: the
        activations, the activation gradients and scratch, the gradients."""
        arrays = [*self.a.values(), *self.g.values(), self.grads_flat]
        return sum(x.nbytes for x in arrays)

    def _heads(self, x):
        """(N, k C) -> k views (B, NH, T, hs) of it, never copies."""
        NH, C = self.config.n_head, self.config.n_embd
        x = x.reshape(self.B, self.T, -1, NH, C // NH)
        return [x[:, :, i].transpose(0, 2, 1, 3) for i in range(x.shape[2])]

    # ---- layernorm, with xhat kept for the backward ----------------------------

    def _layernorm(self, name, l):
        """The arrays of layernorm `name` ("ln1", "ln2" of layer l; "lnf" with
        l None): output, xhat, rstd, weight, bias, dweight, dbias."""
        a, p, gr = self.a, self.params, self.grads
        arrays = [a[name], a[name + "_xhat"], a[name + "_rstd"]]
        arrays += [p[name + "w"], p[name + "b"], gr[name + "w"], gr[name + "b"]]
        return arrays if l is None else [x[l] for x in arrays]

    def _layernorm_forward(self, name, l, inp):
        """out = xhat * weight + bias, xhat = (inp - mean) * rstd; all (N, C)
        but rstd (N, 1).  The means over the last axis are matrix-vector
        products with a vector of 1/C, which BLAS does several times faster
        than NumPy reduces a short axis."""
        out, xhat, rstd, weight, bias, _, _ = self._layernorm(name, l)
        np.matmul(inp, self.mean_of_c, out=rstd[:, 0])  # the mean, for now
        np.subtract(inp, rstd, out=xhat)
        np.einsum("nc,nc->n", xhat, xhat, out=rstd[:, 0])
        rstd /= inp.shape[-1]
        rstd += LAYERNORM_EPS
        np.sqrt(rstd, out=rstd)
        np.divide(1.0, rstd, out=rstd)
        xhat *= rstd
        np.multiply(xhat, weight, out=out)
        out += bias

    def _layernorm_backward(self, name, l, dout):
        """dx += rstd (g - mean(g) - xhat mean(g xhat)), g = dout * weight;
        dweight and dbias written."""
        _, xhat, rstd, weight, _, dweight, dbias = self._layernorm(name, l)
        N, C = dout.shape
        g, t = _view(self.g["scratch"], (N, C)), _view(self.g["scratch2"], (N, C))
        mean_g, mean_gx = self.g["means"][:, :1], self.g["means"][:, 1:]
        np.einsum("nc,nc->c", dout, xhat, out=dweight)
        np.matmul(self.ones[N], dout, out=dbias)
        np.multiply(dout, weight, out=g)
        np.matmul(g, self.mean_of_c, out=mean_g[:, 0])
        np.einsum("nc,nc->n", g, xhat, out=mean_gx[:, 0])
        mean_gx /= C
        g -= mean_g
        np.multiply(xhat, mean_gx, out=t)
        g -= t
        g *= rstd
        self.g["dx"] += g

    # ---- forward ---------------------------------------------------------------

    def forward(self, idx, targets) -> float:
        p, a, s = self.params, self.a, self.g["scratch"]
        C, T, N = self.config.n_embd, self.T, self.B * self.T
        tmp, row = _view(s, (N, C)), self.g["means"][:, :1]
        x = a["x"][0]
        np.take(p["wte"], idx.reshape(-1), axis=0, out=x)
        x.reshape(self.B, T, C)[...] += p["wpe"][:T]
        for l in range(self.config.n_layer):
            x = a["x"][l]
            self._layernorm_forward("ln1", l, x)
            np.matmul(a["ln1"][l], p["qkvw"][l].T, out=a["qkv"][l])
            a["qkv"][l] += p["qkvb"][l]
            self._attention_forward(l)
            np.matmul(a["atty"][l], p["attprojw"][l].T, out=tmp)
            tmp += p["attprojb"][l]
            np.add(x, tmp, out=a["x_mid"][l])
            self._layernorm_forward("ln2", l, a["x_mid"][l])
            np.matmul(a["ln2"][l], p["fcw"][l].T, out=a["fch"][l])
            a["fch"][l] += p["fcb"][l]
            self._gelu_forward(l)
            np.matmul(a["fch_gelu"][l], p["fcprojw"][l].T, out=tmp)
            tmp += p["fcprojb"][l]
            np.add(a["x_mid"][l], tmp, out=a["x"][l + 1])
        self._layernorm_forward("lnf", None, a["x"][-1])
        probs = a["probs"]
        np.matmul(a["lnf"], p["wte"].T, out=probs)  # the logits
        np.max(probs, axis=-1, keepdims=True, out=row)
        probs -= row
        z_target = probs[self.rows, targets.reshape(-1)]
        np.exp(probs, out=probs)
        np.matmul(probs, self.ones[probs.shape[1]], out=row[:, 0])
        probs /= row
        return float(np.mean(np.log(row[:, 0]) - z_target))

    def _attention_forward(self, l):
        """The scale 1/sqrt(hs) goes on q, in place in qkv ((B, T, C) numbers
        instead of (B, NH, T, T) scores): the backward knows q is scaled."""
        a, C, NH = self.a, self.config.n_embd, self.config.n_head
        a["qkv"][l][:, :C] *= 1.0 / math.sqrt(C // NH)
        q, k, v = self._heads(a["qkv"][l])
        att, row, ones = a["att"][l], self.g["scratch"], self.ones[self.T]
        for b in self.att_blocks:
            s = att[b]  # (b, NH, T, T)
            np.matmul(q[b], k[b].swapaxes(-1, -2), out=s)
            s += self.mask
            m = row[: s[..., 0].size].reshape(s.shape[:-1] + (1,))
            np.max(s, axis=-1, keepdims=True, out=m)
            s -= m
            np.exp(s, out=s)
            np.matmul(s, ones, out=m[..., 0])  # the row sums
            s /= m
        (y,) = self._heads(a["atty"][l])
        np.matmul(att, v, out=y)

    def _gelu_forward(self, l):
        a = self.a
        for r in self.mlp_blocks:
            x, t, out = a["fch"][l][r], a["tanh_u"][l][r], a["fch_gelu"][l][r]
            np.multiply(x, x, out=t)
            t *= GELU_SCALE * GELU_CUBIC
            t += GELU_SCALE
            t *= x  # u = sqrt(2/pi) (x + 0.044715 x^3)
            np.tanh(t, out=t)  # tanh u
            np.add(t, 1.0, out=out)
            out *= x
            out *= 0.5

    # ---- backward --------------------------------------------------------------

    def backward(self, idx, targets) -> None:
        p, a, gr, g = self.params, self.a, self.grads, self.g
        C, B, T, N = self.config.n_embd, self.B, self.T, self.B * self.T
        dlogits = a["probs"]  # overwritten in place: probs are not needed again
        dlogits /= N
        dlogits[self.rows, targets.reshape(-1)] -= 1.0 / N
        dln, dx = g["dln"], g["dx"]
        np.matmul(dlogits, p["wte"], out=dln)
        np.matmul(dlogits.T, a["lnf"], out=gr["wte"])  # wte's first half
        dx.fill(0)
        self._layernorm_backward("lnf", None, dln)
        for l in reversed(range(self.config.n_layer)):
            # x_out = x_mid + fcproj: dx is also fcproj's gradient
            self._matmul_backward(
                g["dfch_gelu"], "fcproj", l, dx, a["fch_gelu"][l]
            )
            self._gelu_backward(l)
            self._matmul_backward(dln, "fc", l, g["dfch"], a["ln2"][l])
            self._layernorm_backward("ln2", l, dln)
            # x_mid = x + attproj: the same again for the attention branch
            self._matmul_backward(g["datty"], "attproj", l, dx, a["atty"][l])
            self._attention_backward(l)
            self._matmul_backward(dln, "qkv", l, g["dqkv"], a["ln1"][l])
            self._layernorm_backward("ln1", l, dln)
        # wte's second half, the scatter-add of dx into the rows idx names, as
        # one matrix product: onehot(idx)^T (V, N) @ dx (N, C)
        onehot = g["onehot"]
        onehot.fill(0)
        onehot[self.rows, idx.reshape(-1)] = 1
        np.matmul(onehot.T, dx, out=g["dwte"])
        gr["wte"] += g["dwte"]
        np.sum(dx.reshape(B, T, C), axis=0, out=gr["wpe"][:T])
        gr["wpe"][T:] = 0

    def _matmul_backward(self, dinp, name, l, dout, inp):
        """dinp = dout @ w, dw = dout^T @ inp, db = sum of dout: written."""
        w = self.params[name + "w"][l]
        np.matmul(dout, w, out=dinp)
        np.matmul(dout.T, inp, out=self.grads[name + "w"][l])
        np.matmul(self.ones[dout.shape[0]], dout, out=self.grads[name + "b"][l])

    def _attention_backward(self, l):
        a, g, hs = self.a, self.g, self.config.n_embd // self.config.n_head
        q, k, v = self._heads(a["qkv"][l])
        dq, dk, dv = self._heads(g["dqkv"])
        (dy,) = self._heads(g["datty"])
        att, datt, row = a["att"][l], g["datt"], g["scratch"]
        np.matmul(att.swapaxes(-1, -2), dy, out=dv)
        np.matmul(dy, v.swapaxes(-1, -2), out=datt)
        for b in self.att_blocks:
            ds, p = datt[b], att[b]
            m = row[: ds[..., 0].size].reshape(ds.shape[:-1])
            np.einsum("...j,...j->...", ds, p, out=m)
            ds -= m[..., None]
            ds *= p
        np.matmul(datt, k, out=dq)
        g["dqkv"][:, : self.config.n_embd] *= 1.0 / math.sqrt(hs)  # q's scale
        np.matmul(datt.swapaxes(-1, -2), q, out=dk)  # q is scaled already

    def _gelu_backward(self, l):
        a, g = self.a, self.g
        for r in self.mlp_blocks:
            x, th = a["fch"][l][r], a["tanh_u"][l][r]
            t, t2 = _view(g["scratch"], x.shape), _view(g["scratch2"], x.shape)
            # d gelu/dx = 0.5 (1 + tanh u) + t (1 - tanh^2 u), t = 0.5 x du/dx,
            # computed as 0.5 + t + tanh u (0.5 - t tanh u): ten passes
            np.multiply(x, x, out=t)
            t *= 1.5 * GELU_SCALE * GELU_CUBIC
            t += 0.5 * GELU_SCALE
            t *= x  # t = 0.5 x sqrt(2/pi) (1 + 3 * 0.044715 x^2)
            np.multiply(t, th, out=t2)
            np.subtract(0.5, t2, out=t2)
            t2 *= th
            t2 += t
            t2 += 0.5
            np.multiply(t2, g["dfch_gelu"][r], out=g["dfch"][r])

    # ---- AdamW -----------------------------------------------------------------

    def update(self) -> None:
        """train.AdamW's formula on the flat arrays, block by block; weight
        decay on the first n_decayed entries (the matrices of DECAYED)."""
        self.t += 1
        b1, b2, lr = self.beta1, self.beta2, self.lr
        step_size = lr / (1 - b1**self.t)
        v_correction = math.sqrt(1 - b2**self.t)
        decay = 1 - lr * self.weight_decay
        t_all = self.g["adam"]
        for r in self.adam_blocks:
            p, g, m, v = self.flat[r], self.grads_flat[r], self.m[r], self.v[r]
            t = t_all[: p.size]
            m *= b1
            np.multiply(g, 1 - b1, out=t)
            m += t
            v *= b2
            np.multiply(g, g, out=t)
            t *= 1 - b2
            v += t
            n = min(max(self.n_decayed - r.start, 0), p.size)
            if n and self.weight_decay:
                p[:n] *= decay
            # step_size m / (sqrt(v) / vc + eps), with both sides times vc
            np.sqrt(v, out=t)
            t += self.eps * v_correction
            np.divide(m, t, out=t)
            t *= step_size * v_correction
            p -= t

    def step(self, idx, targets) -> float:
        shape = (self.B, self.T)
        if np.shape(idx) != shape or np.shape(targets) != shape:
            raise ValueError(
                f"TunedGPT.step: idx and targets must have the shape {shape} "
                f"it was made for, got {np.shape(idx)} and {np.shape(targets)}"
            )
        loss = self.forward(idx, targets)
        self.backward(idx, targets)
        self.update()
        return loss
