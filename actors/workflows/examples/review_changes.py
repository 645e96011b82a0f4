"""Review the working tree's changes: each dimension audited in parallel by a read-only
teammate, every finding verified by another, duplicates merged, sorted by severity.

``args``: ``{"dimensions": [...]}`` (default: correctness, security, tests).
"""

from __future__ import annotations

from typing import Any

META = {
    "name": "review_changes",
    "description": "Audit the uncommitted changes along several dimensions, verify each finding",
    "phases": ["audit", "verify", "merge"],
}

FINDINGS = {
    "type": "object",
    "properties": {
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "file": {"type": "string"},
                    "line": {"type": "integer"},
                    "severity": {"enum": ["high", "medium", "low"]},
                    "text": {"type": "string"},
                },
                "required": ["file", "severity", "text"],
            },
        }
    },
    "required": ["findings"],
}
VERDICT = {
    "type": "object",
    "properties": {"real": {"type": "boolean"}, "why": {"type": "string"}},
    "required": ["real"],
}
_ORDER = {"high": 0, "medium": 1, "low": 2}


async def run(ctx: Any, args: Any) -> Any:
    dimensions = (args or {}).get("dimensions") or ["correctness", "security", "tests"]
    ctx.phase("audit")
    audits = await ctx.parallel(
        [
            ctx.agent(
                f"Review the uncommitted changes (`git diff`) for {dim} problems only. "
                "Report each finding with its file, line, severity and one sentence.",
                schema=FINDINGS,
                label=f"audit {dim}",
            )
            for dim in dimensions
        ]
    )
    findings = [f for audit in audits for f in audit["findings"]]
    ctx.phase("verify")

    async def verify(finding: dict[str, Any]) -> dict[str, Any] | None:
        verdict = await ctx.agent(
            f"Is this review finding real? Check the code. Finding: {finding}",
            schema=VERDICT,
            label=f"verify {finding['file']}:{finding.get('line', '?')}",
        )
        return finding if verdict["real"] else None

    checked = await ctx.pipeline(findings, verify)
    ctx.phase("merge")
    unique: dict[tuple[str, Any, str], dict[str, Any]] = {}
    for finding in checked:
        if finding is not None:
            unique.setdefault((finding["file"], finding.get("line"), finding["text"]), finding)
    merged = sorted(unique.values(), key=lambda f: (_ORDER[f["severity"]], f["file"]))
    ctx.log(f"{len(merged)} findings kept of {len(findings)}")
    return {"findings": merged}
