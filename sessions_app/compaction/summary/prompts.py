"""The fixed texts of a safeguard summary: the prompts, instructions and labels the model is sent.

Pure module, text only. The required headings, the identifier-policy lines and the merge and
split-turn instructions are OpenClaw's (src/agents/compaction.ts,
src/agents/pi-hooks/compaction-*.ts); the system, summarisation and update prompts are Pi's
(compaction/utils.ts, compaction/compaction.ts). A text changed here changes what the model sees
and, for the headings, what `offline.py` writes and `identifiers.py` looks for.
"""

from __future__ import annotations

# The summary's fixed text: the headings the model must write, the split-turn block, the fallback.
REQUIRED_SUMMARY_SECTIONS = (
    "## Decisions",
    "## Open TODOs",
    "## Constraints/Rules",
    "## Pending user asks",
    "## Exact identifiers",
)
EXACT_IDENTIFIERS_HEADING = "## Exact identifiers"
SPLIT_TURN_HEADER = "**Turn Context (split turn):**"
DEFAULT_SUMMARY_FALLBACK = "No prior history."

# OpenClaw's instructions and the labels of the untrusted blocks that carry operator text.
DEFAULT_COMPACTION_INSTRUCTIONS = (
    "Write the summary body in the primary language used in the conversation.\n"
    "Focus on factual content: what was discussed, decisions made, and current state.\n"
    "Keep the required summary structure and section headers unchanged.\n"
    "Do not translate or alter code, file paths, identifiers, or error messages."
)
STRICT_EXACT_IDENTIFIERS_INSTRUCTION = (
    "For ## Exact identifiers, preserve literal values exactly as seen "
    "(IDs, URLs, file paths, ports, hashes, dates, times)."
)
POLICY_OFF_EXACT_IDENTIFIERS_INSTRUCTION = (
    "For ## Exact identifiers, include identifiers only when needed for continuity; "
    "do not enforce literal-preservation rules."
)
CUSTOM_IDENTIFIER_POLICY_LABEL = "For ## Exact identifiers, apply this operator-defined policy text"
COMPACT_CONTEXT_LABEL = "Additional context from /compact"
# The text at the OpenClaw commit we reproduce (8f8492d); later upstream dropped "tokens, API keys".
IDENTIFIER_PRESERVATION_INSTRUCTIONS = (
    "Preserve all opaque identifiers exactly as written (no shortening or reconstruction), "
    "including UUIDs, hashes, IDs, tokens, API keys, hostnames, IPs, ports, URLs, and file names."
)
TURN_PREFIX_INSTRUCTIONS = (
    "This summary covers the prefix of a split turn. Focus on the original request,"
    " early progress, and any details needed to understand the retained suffix."
)
MERGE_SUMMARIES_INSTRUCTIONS = "\n".join(
    [
        "Merge these partial summaries into a single cohesive summary.",
        "",
        "MUST PRESERVE:",
        "- Active tasks and their current status (in-progress, blocked, pending)",
        "- Batch operation progress (e.g., '5/17 items completed')",
        "- The last thing the user requested and what was being done about it",
        "- Decisions made and their rationale",
        "- TODOs, open questions, and constraints",
        "- Any commitments or follow-ups promised",
        "",
        "PRIORITIZE recent context over older history. The agent needs to know",
        "what it was doing, not just what was discussed.",
    ]
)

# Pi `compaction/utils.ts` SUMMARIZATION_SYSTEM_PROMPT.
SUMMARIZATION_SYSTEM_PROMPT = (
    "You are a context summarization assistant. Your task is to read a conversation between a "
    "user and an AI coding assistant, then produce a structured summary following the exact "
    "format specified.\n\n"
    "Do NOT continue the conversation. Do NOT respond to any questions in the conversation. "
    "ONLY output the structured summary."
)
# Pi `compaction/compaction.ts` SUMMARIZATION_PROMPT.
SUMMARIZATION_PROMPT = """The messages above are a conversation to summarize. Create a structured context checkpoint summary that another LLM will use to continue the work.

Use this EXACT format:

## Goal
[What is the user trying to accomplish? Can be multiple items if the session covers different tasks.]

## Constraints & Preferences
- [Any constraints, preferences, or requirements mentioned by user]
- [Or "(none)" if none were mentioned]

## Progress
### Done
- [x] [Completed tasks/changes]

### In Progress
- [ ] [Current work]

### Blocked
- [Issues preventing progress, if any]

## Key Decisions
- **[Decision]**: [Brief rationale]

## Next Steps
1. [Ordered list of what should happen next]

## Critical Context
- [Any data, examples, or references needed to continue]
- [Or "(none)" if not applicable]

Keep each section concise. Preserve exact file paths, function names, and error messages."""
# Pi `compaction/compaction.ts` UPDATE_SUMMARIZATION_PROMPT.
UPDATE_SUMMARIZATION_PROMPT = """The messages above are NEW conversation messages to incorporate into the existing summary provided in <previous-summary> tags.

Update the existing structured summary with new information. RULES:
- PRESERVE all existing information from the previous summary
- ADD new progress, decisions, and context from the new messages
- UPDATE the Progress section: move items from "In Progress" to "Done" when completed
- UPDATE "Next Steps" based on what was accomplished
- PRESERVE exact file paths, function names, and error messages
- If something is no longer relevant, you may remove it

Use this EXACT format:

## Goal
[Preserve existing goals, add new ones if the task expanded]

## Constraints & Preferences
- [Preserve existing, add new ones discovered]

## Progress
### Done
- [x] [Include previously done items AND newly completed items]

### In Progress
- [ ] [Current work - update based on progress]

### Blocked
- [Current blockers - remove if resolved]

## Key Decisions
- **[Decision]**: [Brief rationale] (preserve all previous, add new)

## Next Steps
1. [Update based on current state]

## Critical Context
- [Preserve important context, add new if needed]

Keep each section concise. Preserve exact file paths, function names, and error messages."""
