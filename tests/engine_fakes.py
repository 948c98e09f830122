"""A stand-in for the llama.cpp engine inside a shared-engine daemon started by the tests
(`DEBATEKIT_ENGINE_BACKEND=tests.engine_fakes:make`): it answers in milliseconds and can be told,
by the request's last message, to be slow (`slow N`: N seconds, stopping early when its client
goes away), to stall, to wedge a slot, or to kill its whole daemon mid-call (`die`)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path


class FakeEngine:
    """Two slots: a call beyond them waits for one (as llama.cpp queues it). While it holds a slot a
    `slow` call adds to `work` each tick (its tokens); `stall` takes a slot, starts and never makes
    progress; `hold N` takes a slot for N seconds without starting or making progress (a wedged
    engine)."""

    slots = 2
    threads = 1

    def __init__(self, model: str):
        self.model = model
        self.work = 0
        self.free = threading.Semaphore(self.slots)

    def chat(self, request: dict, cancelled=None, started=None) -> dict:
        said = request["messages"][-1]["content"]
        if said == "die":
            os._exit(3)
        finish = "stop"
        with self.free:
            if not said.startswith("hold") and started is not None:
                started()
            if said.startswith(("slow", "hold")) or said == "stall":
                seconds = float(said.split()[1]) if " " in said else 3600.0
                end = time.monotonic() + seconds
                while time.monotonic() < end:
                    if cancelled is not None and cancelled.is_set():
                        Path(os.environ["FAKE_ENGINE_CANCELLED"]).write_text(said)
                        finish = None  # as llama.cpp's stream left before its last chunk
                        break
                    if said.startswith("slow"):
                        self.work += 1
                    time.sleep(0.02)
        text = f"{self.model} pid {os.getpid()} heard: {said}\nAnswer: 4"
        return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
                "usage": {"prompt_tokens": 5, "completion_tokens": 7}}


def make(model: str) -> FakeEngine:
    return FakeEngine(model)
