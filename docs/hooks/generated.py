"""mkdocs hook: pages whose content is generated from the repository at build time.

Two markers, each an HTML comment on a line of its own in a page's Markdown:

    <!-- generated: scenario-reference -->
        replaced by one table per object of the scenario JSON schema (the file the package
        ships, `heterps_sim.inputs.scenario.SCHEMA_PATH`, which a test keeps equal to the
        pydantic model's), so the reference cannot drift from what the loader validates;
    <!-- generated: modules PACKAGE -->
        replaced by one mkdocstrings block (`::: PACKAGE.module`) per top-level module file of
        PACKAGE (subpackages have pages of their own), so a module added later is documented
        without editing the page and a module moved away does not break the build.

Docstrings are written for the terminal first, so text such as `oct_s[i][j]` or
`[F0][stage]` in them reads to Markdown as a reference link. Such a "link" found in a
docstring on an API page is logged as INFO, not as a warning that would fail the strict
build; an unresolved link in a hand-written page still fails it.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^<!-- generated: (?P<what>[\w-]+)(?: (?P<arg>[\w.]+))? -->$", re.M)


class _DocstringBrackets(logging.Filter):
    """Downgrade autorefs' "Could not find cross-reference target" from API docstrings to INFO."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if (record.levelno == logging.WARNING and text.startswith(("api/", "mkdocs_autorefs: api/"))
                and " from " in text and "Could not find cross-reference target" in text):
            record.levelno, record.levelname = logging.INFO, "INFO"
            record.msg, record.args = f"{text} (docstring brackets, not a link)", ()
        return True


for _name in ("mkdocs.plugins.mkdocs_autorefs._internal.plugin", "mkdocs.plugins.mkdocs_autorefs.plugin"):
    logging.getLogger(_name).addFilter(_DocstringBrackets())


def on_page_markdown(markdown: str, page, config, files) -> str:
    return MARKER.sub(lambda m: _expand(m["what"], m["arg"]), markdown)


def _expand(what: str, arg: str | None) -> str:
    if what == "scenario-reference":
        return scenario_reference(json.loads(_schema_path().read_text()))
    if what == "modules" and arg:
        return module_blocks(arg)
    raise ValueError(f"unknown generated-content marker: {what} {arg or ''}".strip())


def _schema_path() -> Path:
    from heterps_sim.inputs.scenario import SCHEMA_PATH  # import-light: pydantic + numpy

    return Path(SCHEMA_PATH)


def module_blocks(package: str) -> str:
    folder = ROOT.joinpath(*package.split("."))
    names = sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))
    blocks = [f"::: {package}.{name}\n    options:\n      show_submodules: false\n"
              for name in names]
    return "\n".join(blocks) or f"(`{package}` has no top-level modules besides its subpackages.)"


# --- the scenario reference ------------------------------------------------------------------

def scenario_reference(schema: dict) -> str:
    defs = schema.get("$defs", {})
    out = [_object_section("Scenario file (top level)", "scenario", schema)]
    for name in _order(schema, defs):
        out.append(_object_section(f"`{name}`", _anchor(name), defs[name]))
    return "\n".join(out)


def _order(schema: dict, defs: dict) -> list[str]:
    """Definitions in the order a reader meets them: depth first from the top-level fields."""
    seen: list[str] = []

    def visit(node):
        for ref in _refs(node):
            if ref in defs and ref not in seen:
                seen.append(ref)
                visit(defs[ref])

    visit(schema)
    return seen + sorted(set(defs) - set(seen))


def _refs(node) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"].rsplit("/", 1)[-1]] if "$ref" in node else []
        for value in node.values():
            found += _refs(value)
        return found
    if isinstance(node, list):
        return [r for item in node for r in _refs(item)]
    return []


def _object_section(title: str, anchor: str, obj: dict) -> str:
    required = set(obj.get("required", []))
    lines = [f"### {title} {{#{anchor}}}", ""]
    if obj.get("additionalProperties") is False:
        lines += ["Unknown keys are errors (the message names the dotted path).", ""]
    lines += ["| key | type | required | default | meaning |", "|---|---|---|---|---|"]
    for key, prop in obj.get("properties", {}).items():
        lines.append("| `{}` | {} | {} | {} | {} |".format(
            key, _type(prop), "yes" if key in required else "", _default(prop),
            _cell(prop.get("description", ""))))
    lines.append("")
    return "\n".join(lines)


def _type(prop: dict) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    if "anyOf" in prop:
        return " or ".join(_type(p) for p in prop["anyOf"])
    if "const" in prop:
        return f"`{json.dumps(prop['const'])}`"
    if "enum" in prop:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in prop["enum"])
    kind = prop.get("type", "any")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if kind == "object":
        extra = prop.get("additionalProperties")
        return f"map of name to {_type(extra)}" if isinstance(extra, dict) else "mapping"
    if kind == "null":
        return "`null`"
    bounds = [f"> {prop['exclusiveMinimum']}" if "exclusiveMinimum" in prop else "",
              f">= {prop['minimum']}" if "minimum" in prop else ""]
    bound = "".join(b for b in bounds if b)
    return f"{kind} ({bound})" if bound else kind


def _default(prop: dict) -> str:
    return f"`{json.dumps(prop['default'])}`" if "default" in prop else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _anchor(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()
