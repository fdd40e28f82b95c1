"""Two runs of the Step-by-step page at once on one Stepper (Streamlit's fast reruns start the new run
while the old one is still decoding): the stepper must come out whole, its cursor on a decoded step."""
from __future__ import annotations

import threading
import time

from engine import DecodeConfig
from engine.decoding.decoder import Decoder
from engine.decoding.stepper import Stepper


def test_overlapping_reconfigures_leave_a_consistent_stepper(llama, monkeypatch):
    greedy = DecodeConfig(strategy="greedy", max_new_tokens=12, top_n=5)
    stepper = Stepper(llama, "The capital of", greedy)
    stepper.go(7)
    assert stepper.cursor == 7

    original = Decoder.step

    def slow_step(self):               # a forward pass on a busy machine: long enough for runs to overlap
        time.sleep(0.005)
        return original(self)

    monkeypatch.setattr(Decoder, "step", slow_step)
    configs = [greedy.replace(strategy="sample", temperature=t, seed=1) for t in (0.7, 0.75, 0.8, 0.85)]
    threads = [threading.Thread(target=stepper.reconfigure, args=(c,)) for c in configs]
    for thread in threads:
        thread.start()
        time.sleep(0.01)               # the user nudges the slider while the previous run is still going
    for thread in threads:
        thread.join()

    steps = stepper.steps()
    assert stepper.cursor == 7 and len(steps) >= 8
    assert [s.index for s in steps] == list(range(len(steps)))        # no step lost, none twice
    # the decode on screen is the decode of the config the stepper says it has
    fresh = Decoder(llama, "The capital of", stepper.config)
    for _ in range(len(steps)):
        fresh.step()
    assert [s.chosen_ids[0] for s in steps] == [s.chosen_ids[0] for s in fresh.steps[:len(steps)]]
