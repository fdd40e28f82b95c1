"""Explaining a run after the fact, from its trace alone (no model needed).

findings.py  where a run went wrong: a loop, a near-tie, a low-probability choice;
escape.py    the way out of a loop: how likely other sampler settings were to leave it.
"""
