"""A decode's trace: its records (records.py), the Trace with JSON in and out (schema.py), the reader
that parses a file field by field (reader.py), a grammar's allowed set as compressed bits (mask.py), and the
check of a file whole (check.py)."""
from .reader import MAX_TRACE_BYTES
from .records import (Candidate, DraftCheck, FedInput, FeedBack, GrammarStep, KVStep, Neighbour, Node, PairProb, Round,
                      Sequence, Stage, StageToken, Step)
from .schema import SCHEMA, Trace

__all__ = ["MAX_TRACE_BYTES", "SCHEMA", "Candidate", "DraftCheck", "FedInput", "FeedBack", "GrammarStep", "KVStep",
           "Neighbour", "Node", "PairProb", "Round", "Sequence", "Stage", "StageToken", "Step", "Trace"]
