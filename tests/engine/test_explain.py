"""engine.explain.findings: hand-made traces with answers worked out by hand, then real runs.

Hand-made traces give every step a few candidates whose probabilities, ranks and
entropies are written out here, so each expected finding can be checked on paper.
The real runs check properties that must hold whatever the model says (a flagged pick
really is below the threshold in the raw candidates; a loop's span really repeats; the
sequence equals greedy decoding up to the reported departure).
"""
from __future__ import annotations

import json
import math

import pytest

from engine import DecodeConfig, decode
from engine.explain.findings import (explain, find_loop, findings_of, flagged_steps, replay_greedy, replay_summary,
                                     timeline,
                            with_findings)
from engine.trace import Trace
from trace_builders import confident, loop_trace, low_pick_trace, make_step, make_trace, quiet_trace


# ---- the three traces of the issue ---------------------------------------------------
class TestLoop:
    def test_loop_starting_at_step_7(self):
        found = explain(loop_trace())["sequences"][0]
        assert found["loop"] == {"start": 7, "n": 2, "repeats": 3, "end": 13, "token_ids": [20, 21],
                                 "texts": [" w20", " w21"]}
        assert found["low_prob_picks"] == []
        assert found["greedy_departure"] is None
        assert found["entropy_events"] == []

    def test_the_timeline_has_the_loop_at_step_7(self):
        trace = loop_trace()
        events = timeline(explain(trace))
        assert [(e["step"], e["kind"]) for e in events] == [(7, "loop")]
        assert flagged_steps(explain(trace)) == {7}


class TestLowProbabilityPick:
    def test_a_0_005_pick_at_step_3(self):
        found = explain(low_pick_trace())["sequences"][0]
        (pick,) = found["low_prob_picks"]
        assert pick["step"] == 3 and pick["token_id"] == 4 and pick["text"] == " w4"
        assert pick["prob"] == pytest.approx(0.005)
        assert pick["rank"] == 4
        assert pick["mass_above"] == pytest.approx(0.6 + 0.3 + 0.05)
        assert pick["mass_above_exact"] is True
        assert pick["reasons"] == ["prob"]

    def test_the_pick_is_also_where_the_run_leaves_greedy(self):
        found = explain(low_pick_trace())["sequences"][0]
        departure = found["greedy_departure"]
        assert departure["step"] == 3 and departure["argmax_id"] == 1 and departure["argmax_prob"] == pytest.approx(0.6)
        assert found["off_argmax_steps"] == 1
        assert [(e["step"], e["kind"]) for e in timeline(explain(low_pick_trace()))] == [(3, "departure"),
                                                                                        (3, "low_prob")]

    def test_a_threshold_below_the_pick_hides_it(self):
        assert explain(low_pick_trace(), threshold=0.004)["sequences"][0]["low_prob_picks"] == []

    def test_a_pick_ranked_beyond_10_is_flagged_even_when_likely_enough(self):
        # top 10 recorded at 0.08 each (0.8), then the chosen token appended with its true rank 14
        ranked = [(100 + r, 0.08) for r in range(10)] + [(7, 0.03)]
        steps = [confident(0, 60), make_step(1, ranked, chosen=7, ranks={7: 14}), confident(2, 61)]
        (pick,) = explain(make_trace(steps))["sequences"][0]["low_prob_picks"]
        assert (pick["step"], pick["rank"], pick["reasons"]) == (1, 14, ["rank"])
        assert pick["mass_above"] == pytest.approx(0.8)
        assert pick["mass_above_exact"] is False          # ranks 11..13 were not recorded


class TestNoEvents:
    def test_a_quiet_greedy_run_has_no_findings(self):
        findings = explain(quiet_trace())
        found = findings["sequences"][0]
        assert found["low_prob_picks"] == [] and found["loop"] is None and found["entropy_events"] == []
        assert found["greedy_departure"] is None and found["off_argmax_steps"] == 0
        assert timeline(findings) == [] and flagged_steps(findings) == set()

    def test_an_empty_sequence(self):
        trace = make_trace([])
        found = explain(trace)["sequences"][0]
        assert found["length"] == 0 and found["loop"] is None and timeline(explain(trace)) == []


# ---- each rule on its own ------------------------------------------------------------
class TestFindLoop:
    @pytest.mark.parametrize("ids, expected", [
        ([5, 5, 5, 5, 5, 5], (0, 2, 3)),                        # one token six times: the 2-gram rule sees it
        ([1, 2, 1, 2, 1], None),                                # two and a half copies are not three
        ([9, 1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2], (1, 3, 3)),     # the trailing partial copy is not counted
        ([1, 2] * 4, (0, 2, 4)),
        (list(range(1, 10)) * 3, None),                         # a 9-gram is longer than 8
        ([4, 1, 2, 3, 1, 2, 3, 1, 2, 3, 8, 8, 8, 8, 8, 8], (1, 3, 3)),   # the earliest start wins
        ([], None),
    ])
    def test_cases(self, ids, expected):
        assert find_loop(ids) == expected

    def test_two_copies_count_when_asked(self):
        assert find_loop([1, 2, 1, 2], min_repeats=2) == (0, 2, 2)


class TestEntropyEvents:
    def test_collapse_then_jump_against_the_running_median(self):
        # by hand: step 4 sees median(2.0, 2.1, 1.9, 2.0) = 2.0 and 0.3 <= 1.0, 2.0 - 0.3 >= 1: collapse;
        # step 5 (0.2) continues it; step 6 sees median 1.95, 2.0 is ordinary; step 7 sees median 2.0 and
        # 5.0 >= 4.0, 5.0 - 2.0 >= 1: jump; step 8 (4.9, median 2.0) continues it.
        entropies = [2.0, 2.1, 1.9, 2.0, 0.3, 0.2, 2.0, 5.0, 4.9]
        trace = make_trace([confident(i, 70 + i, entropy=h) for i, h in enumerate(entropies)])
        events = explain(trace)["sequences"][0]["entropy_events"]
        assert [(e["step"], e["kind"], e["steps"]) for e in events] == [(4, "collapse", 2), (7, "jump", 2)]
        assert events[0]["median"] == pytest.approx(2.0) and events[1]["median"] == pytest.approx(2.0)
        assert events[0]["entropy"] == pytest.approx(0.3)

    def test_tiny_entropies_do_not_jump(self):
        trace = make_trace([confident(i, 70 + i, entropy=h) for i, h in enumerate([0.01, 0.01, 0.01, 0.05])])
        assert explain(trace)["sequences"][0]["entropy_events"] == []

    def test_nothing_is_judged_before_three_earlier_steps(self):
        trace = make_trace([confident(i, 70 + i, entropy=h) for i, h in enumerate([0.1, 3.0, 3.0, 0.1])])
        events = explain(trace)["sequences"][0]["entropy_events"]
        assert [(e["step"], e["kind"]) for e in events] == [(3, "collapse")]   # median(0.1, 3, 3) = 3


class TestGreedyDeparture:
    def test_a_forced_token_leaves_the_greedy_path(self):
        steps = [confident(0, 80), make_step(1, [(81, 0.7), (82, 0.2)], chosen=82), confident(2, 83)]
        departure = explain(make_trace(steps, strategy="greedy", forced={1: 82}))["sequences"][0]["greedy_departure"]
        assert departure["step"] == 1 and departure["forced"] is True and departure["argmax_id"] == 81

    def test_later_off_argmax_steps_are_counted_not_reported(self):
        steps = [confident(0, 80), make_step(1, [(81, 0.6), (82, 0.3)], chosen=82), confident(2, 83),
                 make_step(3, [(84, 0.5), (85, 0.4)], chosen=85)]
        found = explain(make_trace(steps))["sequences"][0]
        assert found["greedy_departure"]["step"] == 1 and found["off_argmax_steps"] == 2

    def test_with_a_repetition_penalty_greedy_takes_the_penalised_argmax(self):
        # raw: w1 0.6 > w2 0.3; after the penalty w2 leads (0.6 vs 0.3), and the run chose w2
        step = make_step(0, [(1, 0.6), (2, 0.3)], chosen=2, shaped={1: 0.3, 2: 0.6})
        assert explain(make_trace([step], repetition_penalty=1.3))["sequences"][0]["greedy_departure"] is None
        assert explain(make_trace([step]))["sequences"][0]["greedy_departure"]["step"] == 0


class TestArguments:
    @pytest.mark.parametrize("rule", [dict(threshold=0), dict(threshold=1.5), dict(max_rank=0),
                                      dict(min_n=3, max_n=2), dict(min_repeats=1), dict(entropy_ratio=1.0)])
    def test_bad_rules_raise_value_error(self, rule):
        with pytest.raises(ValueError):
            explain(quiet_trace(), **rule)


# ---- the trace JSON ------------------------------------------------------------------
class TestJson:
    def test_round_trip_keeps_the_findings(self):
        trace = with_findings(low_pick_trace())
        restored = Trace.from_json(trace.to_json())
        assert restored.schema == "decodescope.trace/1"
        assert restored.findings == trace.findings
        assert restored.findings["explain"] == explain(restored)
        assert findings_of(restored) == restored.findings["explain"]

    def test_other_findings_are_kept(self):
        trace = with_findings(Trace(**{**low_pick_trace().__dict__, "findings": {"other": [1, 2]}}))
        assert trace.findings["other"] == [1, 2] and "explain" in trace.findings

    def test_a_trace_saved_without_findings_still_reads(self):
        data = json.loads(low_pick_trace().to_json())
        del data["findings"]
        restored = Trace.from_json(json.dumps(data))
        assert restored.findings == {}
        assert findings_of(restored)["sequences"][0]["low_prob_picks"][0]["step"] == 3

    def test_stored_findings_are_not_trusted(self):
        data = json.loads(with_findings(low_pick_trace(), threshold=0.001).to_json())
        data["findings"]["explain"]["sequences"] = [{"edited": True}]
        restored = Trace.from_json(json.dumps(data))
        assert findings_of(restored)["sequences"][0]["low_prob_picks"][0]["step"] == 3


# ---- real runs -----------------------------------------------------------------------
def brute_force_first_loop(ids: list):
    """The earliest (start, n) with ids[start:start+3n] three copies of ids[start:start+n]; n = 2..8."""
    for start in range(len(ids)):
        for n in range(2, 9):
            if len(ids) >= start + 3 * n and ids[start:start + 3 * n] == ids[start:start + n] * 3:
                return start, n
    return None


def check_properties(trace: Trace, findings: dict, sequence: int = 0):
    """What must hold of the findings of a greedy/sample run, checked against the raw candidates."""
    found = findings["sequences"][sequence]
    ids = trace.sequences[sequence].token_ids
    picked = {p["step"]: p for p in found["low_prob_picks"]}
    for i, step in enumerate(trace.steps):
        chosen = next(c for c in step.candidates if c.token_id == ids[i])
        low = chosen.prob < 0.02 or chosen.rank > 10
        assert (i in picked) == low, f"step {i}: prob {chosen.prob}, rank {chosen.rank}"
        if low:
            assert picked[i]["prob"] == chosen.prob and picked[i]["rank"] == chosen.rank
            above = sum(c.prob for c in step.candidates if c.rank < chosen.rank)
            assert picked[i]["mass_above"] == pytest.approx(above)
    loop = found["loop"]
    expected = brute_force_first_loop(ids)
    assert (None if loop is None else (loop["start"], loop["n"])) == expected
    if loop is not None:
        s, n, r = loop["start"], loop["n"], loop["repeats"]
        assert ids[s:s + n * r] == loop["token_ids"] * r and ids[s + n * r:s + n * (r + 1)] != loop["token_ids"]


class TestTinyModel:
    def test_sampled_run_properties(self, llama):
        trace = decode(llama, "The capital of", DecodeConfig(strategy="sample", max_new_tokens=24, seed=3))
        check_properties(trace, explain(trace))

    def test_beam_sequences_follow_greedy_until_their_departure(self, llama):
        config = DecodeConfig(strategy="beam", num_beams=3, num_return_sequences=3, max_new_tokens=10)
        beam = decode(llama, "The capital of", config)
        greedy = decode(llama, "The capital of", config.replace(strategy="greedy")).sequences[0].token_ids
        findings = explain(beam)
        for index, sequence in enumerate(beam.sequences):
            ids, departure = sequence.token_ids, findings["sequences"][index]["greedy_departure"]
            d = len(ids) if departure is None else departure["step"]
            assert ids[:d] == greedy[:d]
            if departure is not None and d < len(greedy):
                assert ids[d] != greedy[d] and departure["argmax_id"] == greedy[d]

    def test_beam_probabilities_agree_with_the_tree(self, llama):
        config = DecodeConfig(strategy="beam", num_beams=3, num_return_sequences=2, max_new_tokens=8)
        beam = decode(llama, "The capital of", config)
        nodes = {n.id: n for n in beam.nodes}
        found = explain(beam, threshold=0.999)      # flag (almost) everything to see every known prob
        for index, sequence in enumerate(beam.sequences):
            path, node = [], nodes[sequence.node_id]
            while node.parent is not None:
                path.append(node)
                node = nodes[node.parent]
            path.reverse()
            assert [n.token_id for n in path] == sequence.token_ids
            for pick in found["sequences"][index]["low_prob_picks"]:
                assert pick["prob"] == pytest.approx(math.exp(path[pick["step"]].logprob), rel=1e-4)


@pytest.mark.bundled
class TestBundledSampledRun:
    """The bundled model on a prompt that invites repetition, sampled at temperature 0.8 with seed 0."""
    PROMPT = "I like apples. I like apples. I like"
    CONFIG = DecodeConfig(strategy="sample", temperature=0.8, seed=0, max_new_tokens=24)

    @pytest.fixture(scope="class")
    def run(self, bundled):
        trace = with_findings(decode(bundled, self.PROMPT, self.CONFIG))
        greedy = decode(bundled, self.PROMPT, self.CONFIG.replace(strategy="greedy"))
        return trace, greedy

    def test_properties(self, run):
        trace, _ = run
        check_properties(trace, trace.findings["explain"])
        found = trace.findings["explain"]["sequences"][0]
        assert found["loop"] is not None and found["low_prob_picks"]    # this seed loops after a rare pick

    def test_the_run_is_greedy_until_its_departure(self, run):
        trace, greedy = run
        ids, g = trace.sequences[0].token_ids, greedy.sequences[0].token_ids
        d = trace.findings["explain"]["sequences"][0]["greedy_departure"]["step"]
        assert ids[:d] == g[:d] and ids[d] != g[d]

    def test_replay_without_the_pick_at_the_departure_is_the_greedy_run(self, run, bundled):
        trace, greedy = run
        d = trace.findings["explain"]["sequences"][0]["greedy_departure"]["step"]
        replay = replay_greedy(bundled, trace, d, keep_pick=False)
        assert replay.sequences[0].token_ids == greedy.sequences[0].token_ids
        assert replay.forced == {i: trace.sequences[0].token_ids[i] for i in range(d)}

    def test_replay_keeping_the_pick(self, run, bundled):
        trace, _ = run
        d = trace.findings["explain"]["sequences"][0]["greedy_departure"]["step"]
        replay = replay_greedy(bundled, trace, d, keep_pick=True)
        ids = trace.sequences[0].token_ids
        assert replay.sequences[0].token_ids[:d + 1] == ids[:d + 1]
        summary = replay_summary(trace, replay, d)
        assert summary["parts_at"] is None or summary["parts_at"] > d
        check_properties(replay, explain(replay))

    def test_json_round_trip_of_the_real_run(self, run):
        trace, _ = run
        assert Trace.from_json(trace.to_json()).findings == trace.findings


# ---- the CLI -------------------------------------------------------------------------
class TestCli:
    def test_explain_prints_the_findings_under_the_table_and_stores_them(self, llama, monkeypatch, capsys, tmp_path):
        import engine.model
        from engine.cli.main import main

        monkeypatch.setattr(engine.model, "load_model", lambda name=None, progress=None, **placement: llama)
        path = tmp_path / "run.json"
        code = main(["decode", "--prompt", "The capital of", "--strategy", "sample", "--seed", "3",
                     "--max-new-tokens", "16", "--explain", "--json", str(path)])
        out = capsys.readouterr().out
        assert code == 0
        table, _, below = out.partition("\nwhat happened")
        assert "step" in table and below
        trace = Trace.from_json(path.read_text(encoding="utf-8"))
        assert trace.findings["explain"] == explain(trace)
        events = timeline(trace.findings["explain"])
        lines = [line for line in below.splitlines() if line.startswith("  step")]
        assert [int(line.split()[1]) for line in lines] == [e["step"] + 1 for e in events]   # printed from 1

    def test_without_explain_nothing_is_added(self, llama, monkeypatch, capsys):
        import engine.model
        from engine.cli.main import main

        monkeypatch.setattr(engine.model, "load_model", lambda name=None, progress=None, **placement: llama)
        assert main(["decode", "--prompt", "The capital of", "--max-new-tokens", "4"]) == 0
        assert "what happened" not in capsys.readouterr().out


class TestMixtureRuns:
    def test_soft_leaves_the_greedy_prefix_after_its_first_mixture(self):
        steps = [confident(i, 90 + i) for i in range(4)]          # every token is the argmax
        departure = explain(make_trace(steps, strategy="soft"))["sequences"][0]["greedy_departure"]
        assert (departure["step"], departure["mixture"], departure["unknown"]) == (1, True, True)

    def test_hard_gumbel_feeds_tokens_so_the_usual_rule_holds(self):
        steps = [confident(i, 90 + i) for i in range(4)]
        assert explain(make_trace(steps, strategy="gumbel", hard=True))["sequences"][0]["greedy_departure"] is None

    def test_an_off_argmax_first_step_is_a_plain_departure(self):
        steps = [make_step(0, [(1, 0.6), (2, 0.3)], chosen=2), confident(1, 91)]
        departure = explain(make_trace(steps, strategy="gumbel"))["sequences"][0]["greedy_departure"]
        assert (departure["step"], departure["mixture"], departure["argmax_id"]) == (0, False, 1)

    def test_soft_run_on_the_tiny_model(self, llama):
        trace = decode(llama, "The capital of", DecodeConfig(strategy="soft", max_new_tokens=6))
        departure = explain(trace)["sequences"][0]["greedy_departure"]
        assert departure is not None and departure["step"] <= 1
