"""Training-data synthesizers, one subpackage per paper: ``ragshaper`` (InfoCurator trees,
distractors, constrained navigation), and the EviPath, ReasonRAG and Tracer builders as they land.

Subpackages are imported on use (``from agentrag.synth.ragshaper import run_ragshaper``)."""
