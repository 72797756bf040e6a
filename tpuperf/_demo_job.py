"""The example training job that ``tpuperf demo`` profiles (also ``examples/train_job.py``).

A small JAX model trained on synthetic data: an embedding, one attention block and an MLP
(a few matmuls), a softmax cross-entropy loss (a reduction) and an Adam update, about
20-100 ms a step on two CPU cores. Its layers are named with ``jax.named_scope`` as Flax names
its modules (``Transformer/Block_0/Attention``, ...), and the update ``adam``, so ``tpuperf tree``
and ``tpuperf ops --by scope`` show time per layer, forward and backward. It serves the
profiler on ``--port``, marks every step with ``jax.profiler.StepTraceAnnotation("train",
step_num=i)``, prints ``READY port=N`` once the server is up and the step is compiled, and
stops cleanly on SIGTERM or SIGINT.

Run it::

    python -m tpuperf._demo_job --port 9012 --steps 0     # until killed
    tpuperf capture localhost:9012 --duration 2s            # from another shell
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from typing import Any

BATCH = 32
SEQ = 64
D_MODEL = 128
D_FF = 512
VOCAB = 512


def _init_params(key: Any) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp

    keys = jax.random.split(key, 6)

    def dense(k: Any, n_in: int, n_out: int) -> Any:
        return jax.random.normal(k, (n_in, n_out), jnp.float32) / jnp.sqrt(n_in)

    return {
        "embed": dense(keys[0], VOCAB, D_MODEL),
        "qkv": dense(keys[1], D_MODEL, 3 * D_MODEL),
        "proj": dense(keys[2], D_MODEL, D_MODEL),
        "ff_in": dense(keys[3], D_MODEL, D_FF),
        "ff_out": dense(keys[4], D_FF, D_MODEL),
        "unembed": dense(keys[5], D_MODEL, VOCAB),
    }


def _loss(params: dict[str, Any], tokens: Any, targets: Any) -> Any:
    import jax
    import jax.numpy as jnp

    with jax.named_scope("Transformer"):
        with jax.named_scope("Embed"):
            x = params["embed"][tokens]  # (B, S, D)
        with jax.named_scope("Block_0"):
            with jax.named_scope("Attention"):
                q, k, v = jnp.split(x @ params["qkv"], 3, axis=-1)
                scores = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(D_MODEL)
                mask = jnp.tril(jnp.ones((SEQ, SEQ), bool))
                scores = jnp.where(mask, scores, -1e9)
                attended = jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(scores, axis=-1), v)
                x = x + attended @ params["proj"]
            with jax.named_scope("LayerNorm"):
                x = x / (jnp.linalg.norm(x, axis=-1, keepdims=True) + 1e-6)
            with jax.named_scope("MLP"):
                x = x + jax.nn.gelu(x @ params["ff_in"]) @ params["ff_out"]
        with jax.named_scope("Head"):
            logits = x @ params["unembed"]
    with jax.named_scope("loss"):
        log_probs = jax.nn.log_softmax(logits, axis=-1)
        return -jnp.mean(jnp.take_along_axis(log_probs, targets[..., None], axis=-1))


def _make_train_step() -> Any:
    import jax
    import jax.numpy as jnp

    lr, b1, b2, eps = 1e-3, 0.9, 0.999, 1e-8

    def train_step(state: dict[str, Any], tokens: Any, targets: Any) -> tuple[Any, Any]:
        params, m, v, t = state["params"], state["m"], state["v"], state["t"] + 1
        loss, grads = jax.value_and_grad(_loss)(params, tokens, targets)
        with jax.named_scope("adam"):
            m = jax.tree.map(lambda m_, g: b1 * m_ + (1 - b1) * g, m, grads)
            v = jax.tree.map(lambda v_, g: b2 * v_ + (1 - b2) * g * g, v, grads)
            params = jax.tree.map(
                lambda p, m_, v_: p - lr * (m_ / (1 - b1**t)) / (jnp.sqrt(v_ / (1 - b2**t)) + eps),
                params,
                m,
                v,
            )
        return {"params": params, "m": m, "v": v, "t": t}, loss

    return jax.jit(train_step, donate_argnums=0)


def run(port: int, steps: int = 0, log_every: int = 0, stop_with_parent: bool = False) -> int:
    """Serve the profiler on ``port`` and train for ``steps`` steps (0: until stopped).

    ``stop_with_parent``: also stop when the process that started this one is gone (so a
    ``tpuperf demo`` that is killed outright does not leave the job running).
    """
    import jax
    import jax.numpy as jnp

    stop = {"requested": False}
    parent = os.getppid()

    def request_stop(signum: int, frame: Any) -> None:
        stop["requested"] = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    jax.profiler.start_server(port)
    key = jax.random.PRNGKey(0)
    params = _init_params(key)
    zeros = jax.tree.map(jnp.zeros_like, params)
    state = {"params": params, "m": zeros, "v": jax.tree.map(jnp.zeros_like, params), "t": 0}
    # The fixed synthetic batch: next-token prediction of a repeating pattern.
    tokens = jax.random.randint(key, (BATCH, SEQ + 1), 0, VOCAB)
    inputs, targets = tokens[:, :-1], tokens[:, 1:]
    train_step = _make_train_step()

    # Compile before saying READY, so a capture that starts then sees steady steps.
    state, loss = train_step(state, inputs, targets)
    loss.block_until_ready()
    print(f"READY port={port}", flush=True)

    step = 1
    started = time.perf_counter()
    while not stop["requested"] and (steps == 0 or step < steps):
        if stop_with_parent and os.getppid() != parent:
            break
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            state, loss = train_step(state, inputs, targets)
            loss.block_until_ready()
        if log_every and step % log_every == 0:
            elapsed_ms = (time.perf_counter() - started) * 1000 / step
            print(f"step {step} loss {float(loss):.4f} {elapsed_ms:.1f} ms/step", flush=True)
        step += 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--port", type=int, default=9012, help="profiler server port")
    parser.add_argument("--steps", type=int, default=0, help="steps to run; 0 = until killed")
    parser.add_argument("--log-every", type=int, default=0, help="print loss every N steps")
    parser.add_argument(
        "--stop-with-parent", action="store_true", help="stop when the parent process exits"
    )
    args = parser.parse_args(argv)
    code = run(args.port, args.steps, args.log_every, args.stop_with_parent)
    # Leave without running destructors: jaxlib's profiler server waits, in its destructor
    # and with the GIL held, for a capture that is still under way, and that capture needs
    # the GIL to finish; stopping during a capture would hang (seen with jaxlib 0.10).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
