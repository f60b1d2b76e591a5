"""Data-parallel training on ``accelerate`` (torch DDP; FSDP through an accelerate config).

One process per device, started by a launcher that sets ``WORLD_SIZE`` / ``RANK`` (``torchrun``,
or ``accelerate launch --multi_gpu``):

    torchrun --nproc_per_node 2 -m trainers.train --config ...                # CPU (gloo) or GPUs
    accelerate launch --multi_gpu --num_processes 8 -m trainers.train --config ...

How an iteration is split (``trainers/train.py``): every rank draws the same task list (the same
seeded RNG) and rolls out the groups ``tasks[rank::world]``, so a GRPO group, its GiGPO step
groups and ProVer's verification continuations (which restore the group's snapshots) stay whole on
one rank. The learner (``trainers/learner.py``) deals the *global* groups to updates exactly as one
process would, normalises each update's loss by the global token (or trajectory) count, and lets
DDP average the gradients, so an update equals the single-process update up to float summation
order. Rank 0 writes metrics and checkpoints; each rank's RNG states are saved with it.

Without a launcher (``WORLD_SIZE`` unset or 1) nothing here touches ``torch.distributed``.
"""

from __future__ import annotations

import contextlib
import os


def launched_world_size() -> int:
    """The process count a launcher (torchrun, accelerate) started, from WORLD_SIZE; 1 without one."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


class Dist:
    """This process's place in the run, and the few collectives the trainer needs."""

    def __init__(self):
        self.accelerator = None
        self.world, self.rank = 1, 0
        for flag in ("ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_USE_MEGATRON_LM"):
            if os.environ.get(flag, "").lower() in ("1", "true", "yes"):
                raise NotImplementedError(
                    f"{flag} is set: sharded training is not built. The bundled generation runs the learner's own "
                    "model, which FSDP/DeepSpeed/Megatron would shard (its forward a collective that ranks generating "
                    "different lengths cannot keep in step). Use DDP (unset the flag; launch with torchrun or "
                    "`accelerate launch --multi_gpu`), see docs/training.md, 'Scale-out'"
                )
        if launched_world_size() > 1:
            import torch
            from accelerate import Accelerator

            # without a GPU accelerate needs cpu=True to start the gloo process group (else it runs alone)
            self.accelerator = Accelerator(cpu=not torch.cuda.is_available())
            if self.accelerator.num_processes != launched_world_size():
                raise RuntimeError(
                    f"WORLD_SIZE={launched_world_size()} but accelerate started "
                    f"{self.accelerator.num_processes} process(es); launch with torchrun or "
                    "accelerate launch"
                )
            self.world, self.rank = self.accelerator.num_processes, self.accelerator.process_index

    @property
    def enabled(self) -> bool:
        """Whether more than one process trains."""
        return self.world > 1

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0 (it writes metrics and checkpoints)."""
        return self.rank == 0

    @property
    def device(self):
        """This rank's device (the accelerator's, else CPU)."""
        import torch

        return self.accelerator.device if self.accelerator is not None else torch.device("cpu")

    def _launched(self):
        """The accelerator: there is one whenever more than one process trains (``enabled``)."""
        if self.accelerator is None:
            raise RuntimeError("no accelerator: a multi-process call on a single-process Dist")
        return self.accelerator

    def prepare(self, model):
        """The model the learner runs forward/backward through (DDP or FSDP under a launcher)."""
        return self._launched().prepare_model(model) if self.enabled else model

    def no_sync(self, model):
        """Accumulate gradients locally (no all-reduce) inside the block."""
        return self._launched().no_sync(model) if self.enabled else contextlib.nullcontext()

    def gather(self, obj) -> list:
        """Every rank's ``obj`` (picklable), in rank order, on every rank."""
        if not self.enabled:
            return [obj]
        import torch.distributed as td

        out = [None] * self.world
        td.all_gather_object(out, obj)
        return out

    def broadcast(self, obj):
        """Rank 0's ``obj`` on every rank."""
        if not self.enabled:
            return obj
        import torch.distributed as td

        box = [obj]
        td.broadcast_object_list(box, src=0)
        return box[0]

    def broadcast_parameters(self, model) -> None:
        """Rank 0's parameters and buffers on every rank (after a step that ran on each rank alone)."""
        if not self.enabled:
            return
        import torch.distributed as td

        for t in list(model.parameters()) + list(model.buffers()):
            td.broadcast(t.data, src=0)

    def barrier(self) -> None:
        """Wait for every rank (no-op alone)."""
        if self.enabled:
            self._launched().wait_for_everyone()

    def clip_grad_norm_(self, params, max_norm: float):
        """Clip the (already all-reduced) gradients; under FSDP accelerate clips the sharded norm."""
        import torch

        if self.enabled:
            return self._launched().clip_grad_norm_(params, max_norm)
        return torch.nn.utils.clip_grad_norm_(params, max_norm)

    def shard(self, items: list) -> list:
        """This rank's share of ``items`` (round robin), keeping their order."""
        return items[self.rank :: self.world]
