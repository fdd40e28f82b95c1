"""The Step-by-step page's state (engine.decoding.stepper.Stepper) on the tiny Llama: cursor, branches, reconfigure.

References are independent of the stepper: transformers' `generate` from the same ids, and a
count of the model's forward passes taken by a forward hook.
"""
from __future__ import annotations

import pytest
import torch

from engine import DecodeConfig, decode
from engine.decoding.stepper import Stepper

PROMPT = "The capital of France is"
GREEDY = DecodeConfig(strategy="greedy", max_new_tokens=10)


def generate_greedy(lm, ids: list, n: int) -> list:
    """n greedy tokens after `ids`, by transformers (EOS is switched off so the length is n)."""
    out = lm.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                            do_sample=False, max_new_tokens=n, min_new_tokens=n,
                            pad_token_id=lm.model.generation_config.pad_token_id)
    return out[0, len(ids):].tolist()


def chosen(stepper, index=None) -> list:
    return [s.chosen_ids[0] for s in stepper.steps(index)]


class ForwardCount:
    def __init__(self, model):
        self.calls = 0
        self._hook = model.register_forward_hook(self._count)

    def _count(self, *_):
        self.calls += 1

    def close(self):
        self._hook.remove()


@pytest.fixture
def stepper(llama):
    # no EOS in reach: the tiny model's EOS id 0 is removed from the end set, so every branch runs its full length
    return Stepper(llama, PROMPT, GREEDY)


@pytest.fixture(autouse=True)
def no_eos(llama, monkeypatch):
    monkeypatch.setattr(llama, "eos_token_ids", ())


def test_opens_on_the_first_step_which_is_generates_first_token(stepper, llama):
    assert len(stepper.steps()) == 1 and stepper.cursor == 0
    prompt_ids = stepper.runner().prompt_ids
    assert chosen(stepper) == generate_greedy(llama, prompt_ids, 1)


def test_next_on_the_newest_step_is_one_forward_pass_and_back_then_next_is_none(stepper, llama):
    count = ForwardCount(llama.model)
    try:
        for _ in range(4):
            assert stepper.next()
        assert count.calls == 4
        stepper.back()
        stepper.back()
        assert stepper.cursor == 2
        stepper.next()
        assert count.calls == 4 and stepper.cursor == 3     # the step was already decoded: only the cursor moved
    finally:
        count.close()
    assert chosen(stepper) == generate_greedy(llama, stepper.runner().prompt_ids, 5)


def test_next_stops_at_the_end_and_back_stops_at_the_start(llama):
    s = Stepper(llama, PROMPT, GREEDY.replace(max_new_tokens=3))
    assert [s.next(), s.next(), s.next()] == [True, True, False]
    assert s.cursor == 2 and s.finished()
    for _ in range(5):
        s.back()
    assert s.cursor == 0


def test_go_decodes_up_to_the_step_and_clamps(stepper):
    stepper.go(6)
    assert stepper.cursor == 6 and len(stepper.steps()) == 7
    stepper.go(50)
    assert stepper.cursor == GREEDY.max_new_tokens - 1
    stepper.go(-3)
    assert stepper.cursor == 0


def test_branch_forces_the_token_and_continues_greedily_from_it(stepper, llama):
    stepper.go(5)
    main = chosen(stepper)
    stepper.go(2)
    other = stepper.current.candidates[1].token_id        # the runner-up at step 2
    assert other != main[2]
    index = stepper.branch(other)
    assert index == 1 and stepper.active == 1 and stepper.cursor == 2
    assert stepper.branches[1].forced == {2: other}
    stepper.go(6)
    tokens = chosen(stepper)
    prefix = main[:2] + [other]
    assert tokens[:3] == prefix
    assert tokens[3:] == generate_greedy(llama, stepper.runner().prompt_ids + prefix, len(tokens) - 3)
    assert stepper.branches[1].part_step == 2
    # the main line is untouched
    assert chosen(stepper, 0)[:6] == main


def test_branching_to_the_chosen_token_or_an_existing_branch_adds_nothing(stepper):
    stepper.go(3)
    assert stepper.branch(stepper.current.chosen_ids[0]) == 0 and len(stepper.branches) == 1
    other = stepper.current.candidates[1].token_id
    first = stepper.branch(other)
    stepper.switch(0)
    stepper.go(3)
    again = stepper.branch(other)
    assert again == first and len(stepper.branches) == 2


def test_a_branch_of_a_branch_keeps_the_earlier_forced_tokens(stepper):
    stepper.go(1)
    a = stepper.current.candidates[1].token_id
    stepper.branch(a)
    stepper.go(4)
    b = stepper.current.candidates[2].token_id
    stepper.branch(b)
    assert stepper.branches[stepper.active].forced == {1: a, 4: b}
    tokens = chosen(stepper)
    assert tokens[1] == a and tokens[4] == b


def test_switch_keeps_the_cursor_where_the_other_branch_has_it(stepper):
    stepper.go(2)
    stepper.branch(stepper.current.candidates[1].token_id)
    stepper.go(7)
    stepper.switch(0)
    assert stepper.active == 0 and stepper.cursor == 7 and len(stepper.steps()) >= 8
    stepper.switch(99)
    assert stepper.active == 1


def test_reset_drops_the_branches(stepper):
    stepper.go(2)
    stepper.branch(stepper.current.candidates[1].token_id)
    stepper.reset()
    assert len(stepper.branches) == 1 and stepper.active == 0 and stepper.cursor == 0 and len(stepper.steps()) == 1


def test_reconfigure_to_sampling_replays_every_branch_under_the_new_config(stepper, llama):
    stepper.go(2)
    other = stepper.current.candidates[1].token_id
    stepper.branch(other)
    stepper.go(5)
    sample = DecodeConfig(strategy="sample", max_new_tokens=10, temperature=0.8, seed=3)
    stepper.reconfigure(sample)
    assert stepper.config == sample and stepper.cursor == 5 and len(stepper.branches) == 2
    # each branch equals a fresh decode under the new config with the same forced tokens
    assert chosen(stepper, 1) == decode(llama, PROMPT, sample.replace(max_new_tokens=6),
                                        forced={2: other}).best.token_ids
    stepper.switch(0)
    expected = decode(llama, PROMPT, sample.replace(max_new_tokens=6)).best.token_ids
    assert chosen(stepper, 0)[:6] == expected
    # and the main line equals transformers' own sampling with that seed
    torch.manual_seed(3)
    ids = stepper.runner(0).prompt_ids
    out = llama.model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                               do_sample=True, temperature=0.8, top_k=0, max_new_tokens=6, min_new_tokens=6,
                               pad_token_id=0)
    assert expected == out[0, len(ids):].tolist()


def test_reconfigure_with_the_same_config_replays_nothing(stepper):
    stepper.go(3)
    runner = stepper.runner()
    stepper.reconfigure(GREEDY.replace())
    assert stepper.runner() is runner


def test_reconfigure_to_beam_keeps_one_line_and_branching_is_off(stepper):
    stepper.go(2)
    stepper.branch(stepper.current.candidates[1].token_id)
    beam = DecodeConfig(strategy="beam", num_beams=3, max_new_tokens=10)
    stepper.reconfigure(beam)
    assert len(stepper.branches) == 1 and stepper.active == 0 and not stepper.can_branch
    before = len(stepper.branches)
    assert stepper.branch(stepper.current.candidates[1].token_id) == 0 and len(stepper.branches) == before
    assert len(stepper.current.chosen_ids) == 3               # one chosen token per running beam


def test_viewing_a_recorded_trace_needs_no_model(llama):
    trace = decode(llama, PROMPT, GREEDY.replace(max_new_tokens=4))
    s = Stepper.viewing(trace)
    assert s.lm is None and s.finished() and not s.can_branch
    assert s.steps() == trace.steps and s.trace() is trace
    moves = [s.next() for _ in range(5)]
    assert moves == [True, True, True, False, False] and s.cursor == 3
    assert s.branch(trace.steps[3].candidates[1].token_id) == 0


@pytest.mark.parametrize("config", [GREEDY, DecodeConfig(strategy="sample", max_new_tokens=10, temperature=0.9, seed=4),
                                    DecodeConfig(strategy="soft", max_new_tokens=10)])
def test_a_branch_costs_one_forward_pass_and_equals_a_fresh_decode(llama, config):
    s = Stepper(llama, PROMPT, config)
    s.go(7)
    s.go(4)
    other = s.current.candidates[1].token_id
    count = ForwardCount(llama.model)
    try:
        s.branch(other)
        assert count.calls == 1                              # step 4 itself; steps 0-3 are shared, not replayed
    finally:
        count.close()
    s.go(9)
    fresh = decode(llama, PROMPT, config, forced={4: other})
    assert chosen(s) == fresh.best.token_ids
    for mine, ref in zip(s.steps(), fresh.steps):
        assert [c.prob for c in mine.candidates] == pytest.approx([c.prob for c in ref.candidates], abs=1e-6)


def test_a_longer_run_or_an_ignored_setting_does_not_replay(stepper, llama):
    stepper.go(5)
    before = chosen(stepper)
    count = ForwardCount(llama.model)
    try:
        stepper.reconfigure(GREEDY.replace(max_new_tokens=20))            # only the length
        stepper.reconfigure(GREEDY.replace(max_new_tokens=20, temperature=0.5, top_k=3))   # greedy ignores these
        assert count.calls == 0
        stepper.go(12)
        assert count.calls == 7                                         # steps 6-12, each once
    finally:
        count.close()
    assert chosen(stepper)[:6] == before
    assert chosen(stepper) == generate_greedy(llama, stepper.runner().prompt_ids, 13)


def test_a_setting_that_changes_the_steps_replays_them(stepper, llama):
    stepper.go(3)
    count = ForwardCount(llama.model)
    try:
        stepper.reconfigure(GREEDY.replace(top_n=5))
        assert count.calls == 4                                         # the records change: steps 0-3 again
    finally:
        count.close()
    assert all(len(s.candidates) <= 6 for s in stepper.steps())


def test_a_second_opening_of_the_same_decode_starts_from_the_first_without_a_forward_pass(llama):
    config = DecodeConfig(strategy="sample", temperature=1.3, top_p=0.95, seed=7, max_new_tokens=8)
    first = Stepper(llama, PROMPT, config)
    count = ForwardCount(llama.model)
    try:
        second = Stepper(llama, PROMPT, config)
        assert count.calls == 0                          # the first step came from the first opening
        assert len(second.steps()) == 1 and second.cursor == 0
        for _ in range(5):
            assert second.next()
        assert count.calls == 5                          # then one forward pass per Next, on its own KV cache
    finally:
        count.close()
    fresh = decode(llama, PROMPT, config)
    assert chosen(second) == [s.chosen_ids[0] for s in fresh.steps[:6]]    # the same draws as a fresh decode
    assert [s.candidates for s in second.steps()] == [s.candidates for s in fresh.steps[:6]]
    assert len(first.steps()) == 1                       # the first opening did not move
    first.go(5)
    assert chosen(first) == chosen(second)


def test_an_opening_under_other_settings_or_another_prompt_decodes_its_own_first_step(llama):
    Stepper(llama, PROMPT, GREEDY)
    count = ForwardCount(llama.model)
    try:
        other = Stepper(llama, PROMPT + " and", GREEDY)
        sampled = Stepper(llama, PROMPT, GREEDY.replace(strategy="sample", seed=3))
        assert count.calls == 2
    finally:
        count.close()
    assert chosen(other) == [decode(llama, PROMPT + " and", GREEDY).steps[0].chosen_ids[0]]
    assert chosen(sampled) == [decode(llama, PROMPT, sampled.config).steps[0].chosen_ids[0]]


def test_a_model_the_server_lets_go_leaves_no_first_steps_behind(llama):
    from engine.decoding.stepper import OPENINGS

    Stepper(llama, PROMPT, GREEDY)
    OPENINGS.forget(llama)
    count = ForwardCount(llama.model)
    try:
        Stepper(llama, PROMPT, GREEDY)
        assert count.calls == 1                          # decoded afresh: nothing was kept for this model
    finally:
        count.close()


# ---- looking ahead: the step after the newest, decoded on a copy for the next Next to take ------------------
@pytest.mark.parametrize("config", [GREEDY, DecodeConfig(strategy="sample", max_new_tokens=10, temperature=0.9, seed=4),
                                    DecodeConfig(strategy="soft", max_new_tokens=10)])
def test_looking_ahead_at_every_step_gives_the_same_decode_and_next_takes_no_forward_pass(llama, config):
    s = Stepper(llama, PROMPT, config)
    count = ForwardCount(llama.model)
    try:
        while True:
            before = count.calls
            ready = s.look_ahead()
            assert count.calls - before == (1 if ready else 0)       # one step, on the copy
            assert s.look_ahead() == ready and count.calls - before == (1 if ready else 0)     # once per step
            before = count.calls
            moved = s.next()
            assert count.calls == before                             # the looked-ahead step: no forward pass
            assert moved == ready
            if not moved:
                break
    finally:
        count.close()
    fresh = decode(llama, PROMPT, config)
    assert chosen(s) == fresh.best.token_ids and len(s.steps()) == 10 and s.finished()
    for mine, ref in zip(s.steps(), fresh.steps):
        assert [c.prob for c in mine.candidates] == pytest.approx([c.prob for c in ref.candidates], abs=1e-6)
    if config == GREEDY:
        assert chosen(s) == generate_greedy(llama, s.runner().prompt_ids, 10)


def test_a_step_looked_ahead_is_not_shown_before_next(stepper):
    stepper.look_ahead()
    assert len(stepper.steps()) == 1 and len(stepper.trace().steps) == 1 and stepper.cursor == 0


def test_a_look_ahead_is_left_unused_after_new_settings_a_branch_or_another_step(stepper, llama):
    # new settings: the step decoded ahead under greedy is not taken under sampling
    stepper.go(2)
    stepper.look_ahead()
    sample = DecodeConfig(strategy="sample", max_new_tokens=10, temperature=0.8, seed=3)
    stepper.reconfigure(sample)
    stepper.next()
    fresh = decode(llama, PROMPT, sample.replace(max_new_tokens=4))
    assert chosen(stepper) == fresh.best.token_ids
    assert [c.prob for c in stepper.current.candidates] == pytest.approx([c.prob for c in fresh.steps[3].candidates])
    # a step taken another way (go) first: the copy made before it is stale and dropped
    stepper.look_ahead()
    stepper.go(5)
    stepper.next()
    assert chosen(stepper) == decode(llama, PROMPT, sample.replace(max_new_tokens=7)).best.token_ids
    # a branch made at an earlier step looks ahead on its own (the main line's copy is dropped); back on the main
    # line, Next decodes the step itself
    stepper.look_ahead()
    stepper.back()
    other = stepper.current.candidates[1].token_id
    stepper.branch(other)
    stepper.look_ahead()                       # on the new branch: the main line's copy is dropped
    stepper.switch(0)
    stepper.go(6)
    stepper.next()
    assert chosen(stepper, 0) == decode(llama, PROMPT, sample.replace(max_new_tokens=8)).best.token_ids
    assert chosen(stepper, 1) == decode(llama, PROMPT, sample.replace(max_new_tokens=6),
                                        forced={5: other}).best.token_ids


def test_no_look_ahead_off_the_newest_step_at_the_end_or_for_a_recorded_trace(stepper, llama):
    stepper.go(3)
    stepper.back()
    assert stepper.look_ahead() is False                          # the cursor is not on the newest step
    stepper.go(9)
    assert stepper.finished() and stepper.look_ahead() is False   # the run has ended
    viewer = Stepper.viewing(decode(llama, PROMPT, GREEDY.replace(max_new_tokens=3)))
    assert viewer.look_ahead() is False


def test_a_shorter_run_set_after_looking_ahead_still_ends_at_its_length(stepper):
    """The copy was decoded under the old length; the decode kept under the new one (its steps cannot change)
    must end where the new length says, not where the copy's settings would."""
    stepper.go(2)
    assert stepper.look_ahead()
    stepper.reconfigure(GREEDY.replace(max_new_tokens=4))
    assert [stepper.next() for _ in range(3)] == [True, False, False]
    assert len(stepper.steps()) == 4 and stepper.finished()


# ---- the step Next will show, known before the press (the page sends its figure ahead) -----------------------
SAMPLE = DecodeConfig(strategy="sample", max_new_tokens=10, temperature=0.9, seed=4)


@pytest.mark.parametrize("config", [GREEDY, SAMPLE])
def test_upcoming_is_the_step_next_then_shows_and_needs_no_forward_pass(llama, config):
    s = Stepper(llama, PROMPT, config)
    assert s.upcoming() is None                        # on the newest step, nothing looked ahead: Next decodes
    count = ForwardCount(llama.model)
    try:
        for _ in range(9):
            s.look_ahead()
            before = count.calls
            up = s.upcoming()
            assert up is not None and count.calls == before
            assert s.next() and s.current is up and count.calls == before
    finally:
        count.close()
    assert s.finished() and s.upcoming() is None and s.look_ahead() is False       # the run has ended
    fresh = decode(llama, PROMPT, config)
    assert chosen(s) == fresh.best.token_ids
    s.go(3)                                            # off the newest step: the next step already read
    assert s.upcoming() is s.steps()[4]
    assert [c.prob for c in s.upcoming().candidates] == pytest.approx([c.prob for c in fresh.steps[4].candidates])


def test_no_upcoming_from_a_look_ahead_made_before_new_settings(stepper):
    stepper.go(2)
    stepper.look_ahead()
    assert stepper.upcoming() is not None
    stepper.reconfigure(DecodeConfig(strategy="sample", max_new_tokens=10, temperature=0.8, seed=3))
    assert stepper.upcoming() is None


def test_upcoming_of_a_recorded_trace_is_its_next_step(llama):
    trace = decode(llama, PROMPT, GREEDY.replace(max_new_tokens=3))
    viewer = Stepper.viewing(trace)
    assert viewer.upcoming() is trace.steps[1]
    viewer.go(2)
    assert viewer.upcoming() is None


@pytest.mark.parametrize("config", [GREEDY.replace(max_new_tokens=20), SAMPLE.replace(max_new_tokens=20)])
def test_a_sliding_window_model_looks_ahead_too_past_its_window(config):
    """Gemma 3 keeps most layers' keys in a sliding window (16 positions in this tiny one): the copy is of the
    whole cache, and the decode, read through look-ahead copies past the window, equals a fresh one."""
    from tiny_models import tiny_gemma3

    lm = tiny_gemma3()
    lm.eos_token_ids = ()
    s = Stepper(lm, PROMPT, config)
    count = ForwardCount(lm.model)
    try:
        while s.look_ahead():
            before = count.calls
            assert s.upcoming() is not None and s.next() and count.calls == before
    finally:
        count.close()
    assert len(s.steps()) == 20 and s.finished() and len(s.runner().prompt_ids) + 20 > 16
    fresh = decode(lm, PROMPT, config)
    assert chosen(s) == fresh.best.token_ids
    for mine, ref in zip(s.steps(), fresh.steps):
        assert [c.prob for c in mine.candidates] == pytest.approx([c.prob for c in ref.candidates], abs=1e-5)
    if config.strategy == "greedy":
        assert chosen(s) == generate_greedy(lm, s.runner().prompt_ids, 20)
