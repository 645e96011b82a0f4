"""Review the working tree's changes: each dimension audited in parallel by a read-only
teammate, duplicates merged, every remaining finding verified by another read-only step, the
confirmed ones sorted by severity, file and line.

``args``: ``{"dimensions": [...]}`` (default: correctness, security, tests).

The result: ``{"findings": [...], "reported": N, "merged": M, "rejected": R}``: each finding
has ``file``, ``line``, ``severity``, ``text`` and the ``dimensions`` that reported it; ``N``
findings were reported, ``M`` of them were duplicates (the same file and line) merged into
another, ``R`` were not confirmed by their verification.
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
                "required": ["file", "line", "severity", "text"],
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


def merge(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One finding per (file, line): the most severe report's text and severity, every
    dimension that reported it; in the order first reported."""
    merged: dict[tuple[str, int], dict[str, Any]] = {}
    for finding in findings:
        key = (finding["file"], finding["line"])
        seen = merged.get(key)
        if seen is None:
            merged[key] = {**finding, "dimensions": [finding["dimension"]]}
            del merged[key]["dimension"]
            continue
        if finding["dimension"] not in seen["dimensions"]:
            seen["dimensions"].append(finding["dimension"])
        if _ORDER[finding["severity"]] < _ORDER[seen["severity"]]:
            seen["severity"], seen["text"] = finding["severity"], finding["text"]
    return list(merged.values())


def ordered(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Most severe first, then by file and line."""
    return sorted(findings, key=lambda f: (_ORDER[f["severity"]], f["file"], f["line"]))


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
    reported = [
        {**finding, "dimension": dim}
        for dim, audit in zip(dimensions, audits, strict=True)
        for finding in audit["findings"]
    ]
    unique = merge(reported)
    ctx.log(f"{len(reported)} findings reported, {len(unique)} after merging duplicates")
    ctx.phase("verify")

    async def verify(finding: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        verdict = await ctx.agent(
            "Is this review finding real? Read the code it points at. "
            f"{finding['file']}:{finding['line']} ({finding['severity']}): {finding['text']}",
            schema=VERDICT,
            label=f"verify {finding['file']}:{finding['line']}",
        )
        return finding, bool(verdict["real"])

    checked = await ctx.pipeline(unique, verify)
    ctx.phase("merge")
    kept = ordered([finding for finding, real in checked if real])
    ctx.log(f"{len(kept)} findings confirmed of {len(unique)}")
    return {
        "findings": kept,
        "reported": len(reported),
        "merged": len(reported) - len(unique),
        "rejected": len(unique) - len(kept),
    }
