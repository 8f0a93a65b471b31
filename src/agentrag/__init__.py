"""agentrag: agentic retrieval-augmented generation toolkit.

Public names are listed in ``__all__`` and imported lazily from their modules (so
``import agentrag`` stays cheap and pulls in no model libraries). ``PUBLIC_MODULES`` names the
modules whose own ``__all__`` is re-exported here; a test keeps the two in step.
"""

from __future__ import annotations

import importlib
from typing import Any

from agentrag._version import __version__

PUBLIC_MODULES: list[str] = [
    "agentrag.errors",
    "agentrag.records",
    "agentrag.config",
    "agentrag.runs",
    "agentrag.llm.base",
    "agentrag.llm",
    "agentrag.kb.base",
    "agentrag.kb.store",
    "agentrag.kb.multi",
    "agentrag.kb.remote",
    "agentrag.kb.reference",
    "agentrag.kb.build",
    "agentrag.progress",
    "agentrag.kb.serving",
    "agentrag.kb.routing",
    "agentrag.protocols",
    "agentrag.protocol",
    "agentrag.exec",
    "agentrag.synth.driver",
    "agentrag.agents.base",
    "agentrag.agents",
    "agentrag.eval",
    "agentrag.report",
    "agentrag.export",
    "agentrag.train",
    "agentrag.synth.ragshaper",
    "agentrag.synth.tracer",
    "agentrag.synth.evipath",
    "agentrag.synth.reasonrag",
    "agentrag.synth.annotated",
]

# name -> module it lives in. Add a line here when a PUBLIC_MODULES module grows its __all__.
_EXPORTS: dict[str, str] = {
    # the one protocol parser (model turns, text tool calls, control tokens)
    "CONTROL_TOKEN_RE": "agentrag.protocol", "PROTOCOL_TAGS": "agentrag.protocol", "MALFORMED": "agentrag.protocol", "neutralize_control_tokens": "agentrag.protocol",
    "neutralize_tags": "agentrag.protocol", "neutralize_messages": "agentrag.protocol", "Segment": "agentrag.protocol", "ParsedTurn": "agentrag.protocol",
    "parse_turn": "agentrag.protocol", "split_think": "agentrag.protocol", "json_objects": "agentrag.protocol", "ToolCallText": "agentrag.protocol", "parse_tool_calls": "agentrag.protocol",
    # synthesizers: human-annotation teacher
    "AnnotatedRunConfig": "agentrag.synth.annotated", "run_annotated": "agentrag.synth.annotated",
    "AnnotatedSynth": "agentrag.synth.annotated",
    # failure policy and executors
    "Executor": "agentrag.exec", "Progress": "agentrag.exec", "Outcome": "agentrag.exec", "ThreadExecutor": "agentrag.exec",
    "WorkerTask": "agentrag.exec", "resolve_executor": "agentrag.exec", "run_stage": "agentrag.exec", "run_flow": "agentrag.exec",
    "StageResult": "agentrag.exec", "item_key": "agentrag.exec", "ItemBugs": "agentrag.exec",
    # the synthesizer driver
    "Stage": "agentrag.synth.driver", "FunnelRow": "agentrag.synth.driver", "SynthMetrics": "agentrag.synth.driver",
    "SynthOutput": "agentrag.synth.driver", "SynthRun": "agentrag.synth.driver", "SynthBugs": "agentrag.synth.driver",
    "Synthesizer": "agentrag.synth.driver", "run_synthesizer": "agentrag.synth.driver",
    "funnel_rows": "agentrag.synth.driver", "finish_run": "agentrag.synth.driver",
    "run_sections": "agentrag.synth.driver", "Pipeline": "agentrag.synth.driver",
    "PendingStage": "agentrag.synth.driver", "PipelineStep": "agentrag.synth.driver", "run_pipeline": "agentrag.synth.driver",
    "run_or_reuse": "agentrag.synth.driver", "ids_key": "agentrag.synth.driver",
    "preflight_config": "agentrag.synth.driver",
    # knowledge-base build and serving
    "collect_gold": "agentrag.kb.build", "kb_config": "agentrag.kb.build", "PROGRESS_ENV": "agentrag.kb.build",
    "inputs_key": "agentrag.kb.build", "built_from": "agentrag.kb.build",
    # progress: the heartbeat of long calls (their progress= argument)
    "Heartbeat": "agentrag.progress", "ProgressArg": "agentrag.progress", "progress_for": "agentrag.progress",
    "HEARTBEAT_S": "agentrag.progress", "RATE_WINDOW_S": "agentrag.progress",
    "trajectory_navigation": "agentrag.kb.serving", "open_kb": "agentrag.kb.serving",
    "NAVIGATION_METHOD": "agentrag.kb.serving", "ErrorWatch": "agentrag.kb.routing",
    # synthesizers: RAGShaper
    "RagShaperConfig": "agentrag.synth.ragshaper", "DISTRACTOR_TYPES": "agentrag.synth.ragshaper",
    "InfoCurator": "agentrag.synth.ragshaper", "select_paths": "agentrag.synth.ragshaper",
    "path_score": "agentrag.synth.ragshaper", "RagShaperPipeline": "agentrag.synth.ragshaper",
    "RagShaperSynth": "agentrag.synth.ragshaper",
    "RagShaperComponents": "agentrag.synth.ragshaper", "RagShaperRunConfig": "agentrag.synth.ragshaper",
    "run_ragshaper": "agentrag.synth.ragshaper",
    # synthesizers: AgenticRAGTracer builder
    "TracerConfig": "agentrag.synth.tracer", "TracerRunConfig": "agentrag.synth.tracer",
    "read_label_file": "agentrag.synth.tracer", "apply_review": "agentrag.synth.tracer",
    "TracerSynth": "agentrag.synth.tracer", "TracerComponents": "agentrag.synth.tracer",
    "export_benchmark": "agentrag.synth.tracer", "audit_exports": "agentrag.synth.tracer",
    "fleiss_kappa": "agentrag.synth.tracer", "read_labels": "agentrag.synth.tracer",
    "write_review_sheet": "agentrag.synth.tracer", "run_tracer": "agentrag.synth.tracer",
    # synthesizers: EviPath
    "EviPathConfig": "agentrag.synth.evipath", "EviPathRunConfig": "agentrag.synth.evipath",
    "EviPathComponents": "agentrag.synth.evipath", "EviPathSynth": "agentrag.synth.evipath",
    "EviPathStages": "agentrag.synth.evipath", "EviPathRecipe": "agentrag.synth.evipath",
    "read_items": "agentrag.synth.evipath", "run_evipath": "agentrag.synth.evipath",
    # synthesizers: ReasonRAG
    "ReasonRagConfig": "agentrag.synth.reasonrag", "ReasonRagSynth": "agentrag.synth.reasonrag",
    "ReasonRagComponents": "agentrag.synth.reasonrag", "QuestionSearch": "agentrag.synth.reasonrag",
    "extract_pairs": "agentrag.synth.reasonrag", "Estimate": "agentrag.synth.reasonrag",
    "IterationEvent": "agentrag.synth.reasonrag", "SearchTree": "agentrag.synth.reasonrag",
    "TreeNode": "agentrag.synth.reasonrag", "q_value": "agentrag.synth.reasonrag",
    "ReasonRagRunConfig": "agentrag.synth.reasonrag", "run_reasonrag": "agentrag.synth.reasonrag",
    # export and training
    "to_trl_records": "agentrag.export", "to_sharegpt": "agentrag.export",
    "write_sft_export": "agentrag.export", "to_trl_dpo": "agentrag.export", "to_alpaca_dpo": "agentrag.export",
    "to_sharegpt_dpo": "agentrag.export",
    "AdaptiveLimit": "agentrag.llm", "link_request_limits": "agentrag.llm", "default_items_in_flight": "agentrag.llm",
    "write_dpo_export": "agentrag.export", "assistant_mask": "agentrag.export",
    "SFTTrainConfig": "agentrag.train", "DPOTrainConfig": "agentrag.train", "train_sft": "agentrag.train",
    "train_dpo": "agentrag.train",
    # evaluation and reports
    "load_dataset": "agentrag.eval", "diagnose": "agentrag.eval", "LLMJudge": "agentrag.eval",
    "JudgeVerdict": "agentrag.eval", "normalize_answer": "agentrag.eval", "EvalResult": "agentrag.eval",
    "EvalConfig": "agentrag.eval", "evaluate": "agentrag.eval", "score_item": "agentrag.eval",
    "summarize": "agentrag.eval", "run_eval": "agentrag.eval", "EvalBugs": "agentrag.eval",
    "SuiteConfig": "agentrag.eval", "run_suite": "agentrag.eval",
    "Section": "agentrag.report", "write_report": "agentrag.report", "bar_chart_svg": "agentrag.report",
    "eval_sections": "agentrag.report", "write_eval_report": "agentrag.report",
    "grouped_bar_chart_svg": "agentrag.report", "write_viewer": "agentrag.report",
    "build_payload": "agentrag.report", "detect_run_kind": "agentrag.report", "RUN_KINDS": "agentrag.report",
    "make_server": "agentrag.report",
    # errors
    "AgentRagError": "agentrag.errors", "UserError": "agentrag.errors", "RunError": "agentrag.errors",
    "LLMError": "agentrag.errors", "RetrievalError": "agentrag.errors", "ParseError": "agentrag.errors",
    "EndpointError": "agentrag.errors", "StorageError": "agentrag.errors", "RunLockedError": "agentrag.errors",
    "ContextLimitError": "agentrag.errors", "FailureKind": "agentrag.errors", "classify": "agentrag.errors",
    "storage_error": "agentrag.errors", "STORAGE_ERRNOS": "agentrag.errors", "EXIT_OK": "agentrag.errors",
    "is_disk_error": "agentrag.errors", "writing": "agentrag.errors", "DISK_ERRNOS": "agentrag.errors",
    "EXIT_BUG": "agentrag.errors", "EXIT_BAD_INPUT": "agentrag.errors", "EXIT_UNFINISHED": "agentrag.errors",
    "EXIT_INTERRUPTED": "agentrag.errors",
    # records
    "SCHEMA_VERSION": "agentrag.records", "Record": "agentrag.records", "Passage": "agentrag.records",
    "Hit": "agentrag.records", "ToolCall": "agentrag.records", "Message": "agentrag.records",
    "Usage": "agentrag.records", "Provenance": "agentrag.records", "Step": "agentrag.records",
    "Trajectory": "agentrag.records", "FinishReason": "agentrag.records", "QAItem": "agentrag.records",
    "PreferencePair": "agentrag.records", "parse_record": "agentrag.records",
    "iter_json_objects": "agentrag.records", "read_jsonl": "agentrag.records",
    "write_jsonl": "agentrag.records", "dump_record": "agentrag.records",
    # config
    "Config": "agentrag.config", "load_config": "agentrag.config", "config_source": "agentrag.config", "apply_overrides": "agentrag.config",
    "parse_override": "agentrag.config", "dump_config": "agentrag.config",
    # runs
    "JsonlStore": "agentrag.runs", "RunDir": "agentrag.runs", "LOCK_NAME": "agentrag.runs",
    "VOLATILE_FIELDS": "agentrag.runs", "read_records": "agentrag.runs",
    # llm protocol
    "LLM": "agentrag.llm.base", "Completion": "agentrag.llm.base",
    "resolve_llm": "agentrag.llm", "llm_usage": "agentrag.llm", "HFLLM": "agentrag.llm", "OpenAIBackend": "agentrag.llm", "EmbeddedLLM": "agentrag.llm",
    "CachedLLM": "agentrag.llm", "ResponseCache": "agentrag.llm", "LLMConfig": "agentrag.llm",
    "UsageMeter": "agentrag.llm", "parse_json_output": "agentrag.llm", "parse_text_tool_calls": "agentrag.llm",
    # retrieval protocol
    "Embedder": "agentrag.kb.base", "Retriever": "agentrag.kb.base", "EmbedKind": "agentrag.kb.base",
    "apply_threshold": "agentrag.kb.base",
    # knowledge base
    "KnowledgeBase": "agentrag.kb.store", "KBConfig": "agentrag.kb.store", "EmbedderConfig": "agentrag.kb.store",
    "IndexConfig": "agentrag.kb.store", "BM25Config": "agentrag.kb.store", "HybridConfig": "agentrag.kb.store",
    "METHODS": "agentrag.kb.store", "MultiRetriever": "agentrag.kb.multi", "RemoteRetriever": "agentrag.kb.remote",
    "resolve_retriever": "agentrag.kb.reference", "split_contents": "agentrag.kb.remote",
    "TOKEN_ENV": "agentrag.kb.remote", "check_retriever": "agentrag.kb.reference", "is_kb_url": "agentrag.kb.reference",
    "build_kb": "agentrag.kb.build", "serve_navigation": "agentrag.kb.serving", "navigation_app": "agentrag.kb.serving",
    "MethodRetriever": "agentrag.kb.routing",
    # agent seams
    "ToolResult": "agentrag.agents.base", "Tool": "agentrag.agents.base",
    "NavigationPolicy": "agentrag.agents.base", "Agent": "agentrag.agents.base",
    # agents
    "AgentConfig": "agentrag.agents", "ReactConfig": "agentrag.agents",
    "PlanStepConfig": "agentrag.agents", "ReasonGroundConfig": "agentrag.agents",
    "SearchR1Config": "agentrag.agents", "BaseAgent": "agentrag.agents",
    "trajectory_to_messages": "agentrag.agents", "messages_to_trajectory": "agentrag.agents",
    "PlainNavigation": "agentrag.agents", "ConstrainedNavigation": "agentrag.agents",
    "is_distractor": "agentrag.agents", "ReactAgent": "agentrag.agents",
    "PlanStepAgent": "agentrag.agents", "ReasonGroundAgent": "agentrag.agents",
    "SearchR1Agent": "agentrag.agents", "react_system_prompt": "agentrag.agents",
    "plan_step_tools": "agentrag.agents", "AGENTS": "agentrag.agents", "build_agent": "agentrag.agents",
    "agent_config": "agentrag.agents", "run_many": "agentrag.agents", "RetrievalTool": "agentrag.agents",
    "format_documents": "agentrag.agents", "search_tool_schema": "agentrag.agents",
    # the papers' non-agentic baselines
    "NaiveConfig": "agentrag.agents", "StandardRagConfig": "agentrag.agents", "IrcotConfig": "agentrag.agents",
    "IterRetGenConfig": "agentrag.agents", "NaiveAgent": "agentrag.agents", "StandardRagAgent": "agentrag.agents",
    "IrcotAgent": "agentrag.agents", "IterRetGenAgent": "agentrag.agents", "BASELINES": "agentrag.agents",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentrag' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
