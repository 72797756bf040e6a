"""The fix each recommendation gives, chosen for the workload that ran.

Every analyzer names its fix through this module, from the one workload descriptor
(:mod:`tpuperf.workload`: framework, platform, training or inference), so that only fixes
that apply are given: a TensorFlow GPU profile gets no JAX or XLA-flag advice, an inference
run no ``jax.checkpoint``, FSDP or gradient-accumulation advice, an XLA:CPU run no CUDA graph
or host-callback advice. Where tpuperf knows no fix for a workload, the text says what to look
at instead. A fix is ``{platform: text}``, the platform key in lower case (``tpu``, ``gpu``,
``cpu``), one key: the fix for the platform that ran.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tpuperf.workload import FRAMEWORK_JAX, FRAMEWORK_TENSORFLOW, Workload, detect

if TYPE_CHECKING:
    from tpuperf.timeline import Timeline

Fix = dict[str, str]


def workload_of(tl: Timeline) -> Workload:
    """The timeline's workload; one built without it (an analyzer run on its own) gets what
    the profile alone says (training or inference unknown)."""
    if tl.workload is not None:
        return tl.workload
    if tl.profile is not None:
        return detect(tl.profile)
    return Workload(tl.platform)


def _fix(w: Workload, text: str) -> Fix:
    return {w.platform.lower(): text}


def for_platform(w: Workload, text: str) -> Fix:
    """``text`` as the fix of the platform that ran (an analyzer whose text is already
    specific to what it found)."""
    return _fix(w, text)


def _jax(w: Workload) -> bool:
    return w.framework == FRAMEWORK_JAX


def _tf(w: Workload) -> bool:
    return w.framework == FRAMEWORK_TENSORFLOW


def _graphs(w: Workload) -> str:
    return {"nvidia": "CUDA graphs", "amd": "HIP graphs"}.get(w.vendor, "CUDA/HIP graphs")


def _for_use(w: Workload, training: str | None, inference: str | None) -> list[str]:
    """The advice for how the workload ran: the training advice or the inference advice;
    where the profile does not say, each that exists, named (``in training, ...``)."""
    if w.training:
        return [training] if training else []
    if w.training is False:
        return [inference] if inference else []
    named = (("training", training), ("inference", inference))
    return [f"in {use}, {text}" for use, text in named if text]


def _host_syncs(w: Workload) -> str:
    loss = "`float(loss)`, " if w.training is not False else ""
    return f"{loss}`.block_until_ready()`, `jax.device_get`, logging every step"


# --------------------------------------------------------------------------- idle


def input_pipeline(w: Workload) -> Fix:
    """Devices wait for input before each step (host_bound, steps from markers or a line)."""
    if _tf(w):
        text = (
            "Feed the device ahead of time with tf.data: `.prefetch(tf.data.AUTOTUNE)` at the "
            "end of the pipeline, `num_parallel_calls=tf.data.AUTOTUNE` in `.map`, `.cache()` "
            "for data that fits, `tf.data.experimental.prefetch_to_device` for the last hop; "
            "and no `.numpy()` or Python-side logging of tensors inside the loop."
        )
    elif _jax(w) and w.platform == "CPU":
        text = (
            "On XLA:CPU the device is the host: prepare the next batch on other threads while "
            "this one runs (grain `worker_count`, tf.data `.prefetch(tf.data.AUTOTUNE)`) and "
            f"drop per-step host syncs ({_host_syncs(w)}); loader threads share the cores with "
            "the step's own thread pool, so watch the host's load."
        )
    elif _jax(w):
        text = (
            "Feed the device ahead of time: prefetch batches to device (e.g. "
            "`flax.jax_utils.prefetch_to_device`, or `jax.device_put` the next batch before "
            "the step"
            + (", from pinned host memory" if w.platform == "GPU" else "")
            + "), add loader workers (grain `worker_count`, tf.data "
            f"`.prefetch(tf.data.AUTOTUNE)`), and drop per-step host syncs ({_host_syncs(w)})."
        )
    else:
        text = (
            "Feed the device ahead of time: prefetch the next batch to the device while this "
            "step runs (PyTorch/XLA: `MpDeviceLoader`), add data-loader workers, and drop "
            "per-step host syncs (reading a loss or metric to the host every step); the host "
            "threads in the trace (`tpuperf export`) show what the host does in the gaps."
        )
    return _fix(w, text)


def fewer_calls(w: Workload) -> Fix:
    """Devices wait between calls of the dominant program (steps from module periods)."""
    if _tf(w):
        text = (
            "Make fewer, larger calls: run several steps per `tf.function` call (Keras "
            "`steps_per_execution`), keep `.numpy()` out of the loop, and mark steps with "
            "`tf.profiler.experimental.Trace('train', step_num=...)` for step-level numbers."
        )
    elif _jax(w):
        text = (
            "Make fewer, larger jit calls: put the Python-level loop inside one jit "
            "(`jax.lax.scan` / `jax.lax.fori_loop`), keep the host from syncing between calls "
            "(no `float(x)`, `.block_until_ready()` or `jax.device_get` between them), and let "
            "calls dispatch asynchronously; mark steps with `jax.profiler.StepTraceAnnotation` "
            "for step-level numbers."
        )
    else:
        text = (
            "Make fewer, larger compiled calls (the loop inside one compiled program) and "
            "avoid host syncs between them; the host threads in the trace (`tpuperf export`) "
            "show what the host does between calls."
        )
    return _fix(w, text)


def in_step_gaps(w: Workload) -> Fix:
    """Gaps between ops inside each step (idle_gaps)."""
    if w.platform == "CPU":
        text = (
            "tpuperf knows no fix for gaps between ops inside an XLA:CPU program. Look at what "
            "the host's threads do in the gaps (`tpuperf export`, then the `tf_XLAEigen` and "
            "`tf_XLAPjRtCpuClient` threads): ops waiting on one another (a serial chain of "
            "small ops), threads descheduled by other processes, or fewer threads than cores."
        )
    elif _tf(w):
        text = (
            "Cut launch overhead: compile the step with XLA (`tf.function(jit_compile=True)`) "
            "so the small kernels between the gaps fuse, give GPU launches their own threads "
            "(`TF_GPU_THREAD_MODE=gpu_private`), and keep Python-side work (`.numpy()`, Python "
            "control flow over tensors) out of the step."
        )
    elif _jax(w) and w.platform == "GPU":
        text = (
            f"Cut launch overhead: let XLA launch kernels as command buffers ({_graphs(w)}: "
            "`--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUSTOM_CALL`), fuse small kernels "
            "(`jax.lax.scan` instead of Python loops), and remove host callbacks "
            "(`jax.debug.print`, `jax.pure_callback`) inside the step."
        )
    elif _jax(w):
        text = (
            "Remove host round-trips inside the step: host callbacks (`jax.debug.print`, "
            "`jax.pure_callback`, `io_callback`), Python loops that dispatch many small "
            "jitted calls (use `jax.lax.scan`/`fori_loop` inside one jit), and data-"
            "dependent shapes that force recompiles or transfers."
        )
    else:
        text = (
            "Cut launch overhead: fewer, larger kernels (let the compiler fuse the small ones"
            + (
                f"; capture the step as {_graphs(w)} where the framework can"
                if w.platform == "GPU"
                else ""
            )
            + "), and no host round-trips inside the step; the host threads in the trace "
            "(`tpuperf export`) show whether the host is late to launch."
        )
    return _fix(w, text)


# --------------------------------------------------------------------------- collectives


def collectives(w: Workload, tpu_flags: str, gpu_flags: str, sync: list[str]) -> Fix:
    """Exposed collectives: ``tpu_flags``/``gpu_flags`` the XLA flags of their kinds, ``sync``
    the kinds that run synchronously."""
    if w.platform == "CPU":
        return _fix(
            w,
            "tpuperf knows no fix for collectives on XLA:CPU (they run through host memory). "
            "Look at how many bytes each moves (`tpuperf ops`) and whether the devices reach "
            "them at different times (a straggler makes the others wait inside them).",
        )
    if _tf(w):
        return _fix(
            w,
            "Combine small all-reduces into larger ones and let compute hide them: "
            "`tf.distribute.experimental.CommunicationOptions(bytes_per_pack=...)` with NCCL "
            "(`implementation=CommunicationImplementation.NCCL`), and compile the step with "
            "XLA (`jit_compile=True`) so its scheduler can overlap them"
            + (
                "; in training, accumulate gradients over several batches"
                if w.training is not False
                else ""
            )
            + ".",
        )
    sync_text = ""
    if sync:
        verb = "runs" if len(sync) == 1 else "run"
        ways = ["batch small reductions into one", "reduce their size (bf16)"]
        shard = (
            "shard so the reduction can be pipelined with compute (FSDP/ZeRO-style sharding, "
            "gradient accumulation)"
        )
        if w.training:
            ways.insert(0, shard)
        joined = f"{', '.join(ways[:-1])}, or {ways[-1]}"
        if w.training is None:
            joined += f"; in training, {shard}"
        sync_text = f". The {', '.join(sync)} {verb} synchronously: {joined}."
    if w.platform == "TPU":
        return _fix(
            w,
            "Let XLA overlap collectives with compute (LIBTPU_INIT_ARGS) — "
            + (tpu_flags or "--xla_tpu_enable_async_collective_fusion=true")
            + sync_text,
        )
    return _fix(
        w,
        "--xla_gpu_enable_latency_hiding_scheduler=true "
        + (gpu_flags + " " if gpu_flags else "")
        + "--xla_gpu_all_reduce_combine_threshold_bytes=134217728 (combine small "
        "collectives); make sure NCCL runs on its own stream "
        "(--xla_gpu_enable_highest_priority_async_stream=true)" + (sync_text or "."),
    )


def hide_copies(w: Workload) -> Fix:
    """Exposed copies: issue them earlier so compute covers them (exposed_async_copy)."""
    if w.platform == "TPU":
        offload = (
            "in the `jax.checkpoint` policy offload activations that are used much later "
            "(`offload_src`/`offload_dst`)"
        )
        fetch = (
            "fetch host-resident arrays (placed with `memory_kind='pinned_host'`) a layer "
            "ahead of their use"
        )
        ways = _for_use(w, offload, fetch)
        ways.append(
            "let the scheduler move copy-start up "
            "(`--xla_tpu_enable_latency_hiding_scheduler=true`)"
        )
        return _fix(
            w,
            "Start the transfers earlier so compute covers them: " + "; ".join(ways) + ".",
        )
    if w.platform == "CPU":
        return _fix(w, _CPU_COPIES)
    if _tf(w):
        return _fix(
            w,
            "Issue host<->device copies ahead of the step: prefetch input to the GPU "
            "(`tf.data.experimental.prefetch_to_device`), keep variables on the GPU, and no "
            "`.numpy()` inside the step.",
        )
    if _jax(w):
        return _fix(
            w,
            "Issue host<->device copies ahead of the step on their own stream: "
            "`jax.device_put` of the next batch before the current step, pinned host "
            "memory, and no `jax.device_get` or `.item()` inside the step.",
        )
    return _fix(
        w,
        "Issue host<->device copies ahead of the step on their own stream, from pinned host "
        "memory, and read nothing back to the host inside the step.",
    )


_CPU_COPIES = (
    "On XLA:CPU a copy moves host memory to host memory; tpuperf knows no fix to hide it. "
    "Look at which ops copy (`tpuperf ops`) and whether the program can keep the data where "
    "it is."
)


def reduce_copies(w: Workload) -> Fix:
    """Exposed copies: move fewer bytes, which removes the wait (reduce_copies)."""
    if w.platform == "TPU":
        policy = (
            "in the `jax.checkpoint` policy, move names from `offloadable`/`offload_src` back "
            "to saveable (or use `jax.checkpoint_policies.dots_with_no_batch_dims_saveable`)"
        )
        keep = (
            "keep the arrays you offload (weights, serving caches) in HBM when they fit "
            "(`memory_kind='device'` rather than `'pinned_host'` in their sharding)"
        )
        ways = [*_for_use(w, policy, keep), "offload in bf16 rather than f32"]
        return _fix(w, "Offload less: " + "; ".join(ways) + ".")
    if w.platform == "CPU":
        return _fix(w, _CPU_COPIES)
    return _fix(
        w,
        "Move fewer bytes between host and device: keep the data on the device across "
        "steps, transfer in bf16, and drop copies of results the step does not need on the "
        "host.",
    )


# --------------------------------------------------------------------------- roofline


def memory_bound(w: Workload) -> Fix:
    if w.platform == "CPU":
        text = (
            "Move fewer bytes: smaller dtypes, elementwise chains fused into their producers, "
            "and a larger batch to raise intensity; tpuperf knows no XLA:CPU flag for this: "
            "look at the HLO of the top ops for un-fused converts and transposes."
        )
    elif _tf(w):
        text = (
            "Move fewer bytes: mixed precision "
            "(`tf.keras.mixed_precision.set_global_policy('mixed_float16')`), compile the "
            "step with XLA (`jit_compile=True`) to fuse elementwise chains, the channels-last "
            "(NHWC) layout the GPU libraries prefer, and a larger batch to raise intensity."
        )
    elif w.platform == "TPU":
        text = (
            "Move fewer bytes: keep activations in bf16, fuse elementwise chains into "
            "their producers (check the HLO for un-fused converts, transposes and "
            "broadcasts), use layouts with a minor dimension that is a multiple of 128, and "
            "raise intensity with a larger per-chip batch"
            + ("; write hot loops as Pallas kernels." if _jax(w) else ".")
        )
    elif _jax(w):
        text = (
            "Move fewer bytes: bf16 activations, fuse elementwise chains (Triton/Pallas "
            "kernels for hot ones, `--xla_gpu_enable_triton_gemm=true` for GEMM epilogue "
            "fusion), avoid layout-changing transposes, larger batch to raise intensity."
        )
    else:
        text = (
            "Move fewer bytes: 16-bit activations, elementwise chains fused into their "
            "producers, no layout-changing transposes, and a larger batch to raise intensity."
        )
    return _fix(w, text)


def compute_bound(w: Workload) -> Fix:
    if w.platform == "CPU":
        text = (
            "tpuperf knows no XLA:CPU fix beyond a larger batch. Look at whether the top ops "
            "use every core (their threads in `tpuperf export`) and whether their dtype has a "
            "fast path on this CPU (bf16 needs AVX512-BF16 or AMX)."
        )
    elif _tf(w):
        text = (
            "Feed the tensor cores: mixed precision (`mixed_float16`), matmul and "
            "convolution dimensions that are multiples of 8, a larger batch, and XLA "
            "(`jit_compile=True`)."
        )
    elif w.platform == "TPU":
        text = (
            "Feed the MXU: matmul dimensions that are multiples of 128 (256 on v6e and "
            "later), bf16 inputs"
            + (" (`jnp.bfloat16`, not `precision=HIGHEST`)" if _jax(w) else "")
            + ", a larger per-chip batch, and fewer tiny matmuls"
            + (" (batch them with `vmap`/`einsum`)." if _jax(w) else " (batch them).")
        )
    elif _jax(w):
        text = (
            "Feed the tensor cores: bf16/fp16 inputs, GEMM dimensions that are multiples "
            "of 16 (64 is better), a larger batch, and "
            "`--xla_gpu_enable_triton_gemm=true` or "
            "cuBLASLt autotuning (`--xla_gpu_autotune_level=4`)."
        )
    else:
        text = (
            "Feed the tensor cores: bf16/fp16 inputs, GEMM dimensions that are multiples of "
            "16 (64 is better), and a larger batch."
        )
    return _fix(w, text)


# --------------------------------------------------------------------------- steps


def straggler(w: Workload, name: str) -> Fix:
    if w.platform == "TPU":
        text = (
            f"Check {name}'s chip and host: `tpu-info` for the chip's state, host CPU "
            "contention (other processes, data loading pinned to that host), and uneven "
            "shards (a batch or sequence split that gives that device more work); "
            "replace the VM if the chip itself is slow."
        )
    elif w.platform == "GPU":
        smi = {"nvidia": "`nvidia-smi -q -d PERFORMANCE,CLOCK`", "amd": "`rocm-smi`"}.get(
            w.vendor, "`nvidia-smi -q -d PERFORMANCE,CLOCK` (or `rocm-smi`)"
        )
        text = (
            f"Check {name}: {smi} for thermal or power throttling, other processes on the "
            "GPU, NUMA/PCIe placement of its host threads, and uneven shards of the batch."
        )
    else:
        text = (
            f"Check {name}: other processes on the host's cores, the threads it was given, "
            "and uneven shards of the batch (a device given more work)."
        )
    return _fix(w, text)


def collective_bytes(w: Workload) -> Fix:
    """Collectives move data slowly: send fewer bytes (collective_bytes)."""
    if w.platform == "CPU" or not _jax(w):
        return _fix(
            w,
            "Send fewer bytes: exchange 16-bit values, combine small collectives into "
            "larger ones, and fewer replicas per group; `tpuperf ops --by collective` shows "
            "the bytes and group size of each.",
        )
    grads = "Reduce gradients in bf16 (cast before the psum/all-reduce)"
    other = "Exchange bf16 rather than f32 (cast before the psum/all-gather)"
    first = grads if w.training else other if w.training is False else f"{other} (gradients too)"
    if w.platform == "TPU":
        rest = (
            "combine small collectives (--xla_tpu_enable_all_reduce_combine... / larger "
            "buckets), or shard so less is exchanged ("
            + ("FSDP's reduce-scatter instead of a full all-reduce, " if w.training else "")
            + "fewer replicas per group)."
        )
    else:
        rest = (
            "raise --xla_gpu_all_reduce_combine_threshold_bytes (fewer, larger NCCL calls), "
            "or shard so less is exchanged (reduce-scatter instead of a full all-reduce)."
        )
    return _fix(w, f"{first}, {rest}")


# --------------------------------------------------------------------------- memory


def near_oom(w: Workload) -> Fix:
    """A program near the device's memory capacity (near_oom)."""
    shard = "Shard the largest buffers across devices (jax.sharding.NamedSharding on their "
    shard += "batch or model axis)"
    remat = (
        "rematerialize activations (jax.checkpoint(f, policy="
        "jax.checkpoint_policies.dots_with_no_batch_dims_saveable)) or offload them to host "
        "memory (policy=jax.checkpoint_policies.offload_dot_with_no_batch_dims('device', "
        "'pinned_host'))"
    )
    donate = "donate the inputs the step replaces (jax.jit(step, donate_argnums=0))"
    if not _jax(w):
        return _fix(
            w,
            "Shard the largest buffers across devices, reuse the buffers the step replaces, "
            "and a smaller batch; the buffers live at the peak are listed in `tpuperf memory`.",
        )
    parts = [shard, *_for_use(w, remat, None), donate]
    if w.platform == "GPU":
        parts.append(
            "raise XLA_PYTHON_CLIENT_MEM_FRACTION (default 0.75) to let JAX use more of the GPU"
        )
    return _fix(w, "; ".join(parts))


def keep_offloaded(w: Workload) -> Fix:
    """Buffers offloaded to host memory while device memory is free (offload_headroom)."""
    policy = (
        "drop the offload from their checkpoint policy "
        "(jax.checkpoint_policies.save_and_offload_only_these_names: move their names from "
        "names_which_can_be_offloaded to names_which_can_be_saved)"
    )
    kind = "put them in memory_kind='device' (jax.device_put / out_shardings)"
    if w.training:
        how = f"{policy}, or {kind}"
    elif w.training is False:
        how = kind
    else:
        how = f"{kind}; in training, {policy}"
    return _fix(w, f"Keep these buffers in device memory: {how}")
