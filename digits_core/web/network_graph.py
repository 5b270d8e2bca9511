"""The network page's layer graph, drawn as SVG from a network summary (no TensorFlow, no Graphviz).

Input is the ``layers`` list of :func:`digits_core.engine.network_summary.summarize_model`
(each layer names the layers feeding it). Layers are placed top to bottom by
depth (longest path from an input), side by side within a depth; an edge to
the next row is a short curve, an edge skipping rows (a U-Net skip connection,
a residual) bends out to the right so it does not run through the boxes it
passes (it leaves and enters the boxes on their right side).
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

NODE_W, NODE_H, H_GAP, V_GAP, MARGIN = 210, 42, 26, 26, 12
#: A skip edge bulges SKIP_OUT px right of the boxes, SKIP_STEP px more per longer skip length in the graph.
SKIP_OUT, SKIP_STEP = 24, 14

#: Fill colour per kind of layer (SVG presentation attributes: not subject to the page's style CSP).
FILLS = (
    ("Input", "#e5e7eb"),
    ("Conv", "#dbeafe"),
    ("Dense", "#dcfce7"),
    ("Pool", "#fef3c7"),
    ("Norm", "#f3e8ff"),
    ("Activation", "#f3e8ff"),
    ("ReLU", "#f3e8ff"),
    ("Softmax", "#f3e8ff"),
    ("Concatenate", "#fee2e2"),
    ("Add", "#fee2e2"),
    ("Multiply", "#fee2e2"),
    ("Dropout", "#f1f5f9"),
)


def format_shape(shape: Any) -> str:
    """``[None, 24, 24, 20]`` → ``"24 × 24 × 20"`` (batch axis dropped); lists of shapes joined by ``, ``."""
    if shape is None:
        return ""
    if isinstance(shape, str):
        return shape
    if isinstance(shape, dict):
        return ", ".join(f"{k}: {format_shape(v)}" for k, v in shape.items())
    if shape and isinstance(shape[0], (list, tuple, dict)):
        return ", ".join(format_shape(s) for s in shape)
    dims = list(shape[1:]) if shape and shape[0] is None else list(shape)
    return " × ".join("?" if d is None else str(d) for d in dims) or "scalar"


def _fill(layer_type: str) -> str:
    return next((colour for key, colour in FILLS if key in layer_type), "#f8fafc")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def layout(layers: list[dict]) -> dict[str, tuple[int, int]]:
    """``{layer name: (row, column)}``: row = depth from the inputs, column = order within the row."""
    depth: dict[str, int] = {}
    for layer in layers:  # Keras lists layers in a topological order
        feeds = [depth[name] for name in layer.get("inbound") or () if name in depth]
        depth[layer["name"]] = max(feeds) + 1 if feeds else 0
    columns: dict[int, int] = {}
    place = {}
    for layer in layers:
        row = depth[layer["name"]]
        place[layer["name"]] = (row, columns.get(row, 0))
        columns[row] = columns.get(row, 0) + 1
    return place


def render_svg(layers: list[dict]) -> Markup:
    """The layer graph as an inline ``<svg>`` (one ``<g class="layer" data-name=...>`` per layer)."""
    place = layout(layers)
    if not place:
        return Markup("")
    widths: dict[int, int] = {}
    for row, col in place.values():
        widths[row] = max(widths.get(row, 0), col + 1)
    most = max(widths.values())
    rows = max(widths) + 1
    # Longer skips bulge further out, so nested ones (a U-Net's) stay apart: one lane per distinct length.
    spans = sorted(
        {
            place[layer["name"]][0] - place[source][0]
            for layer in layers
            for source in layer.get("inbound") or ()
            if source in place
        }
        - {0, 1}
    )
    lanes = {span: lane for lane, span in enumerate(spans)}
    width = most * NODE_W + (most - 1) * H_GAP + 2 * MARGIN + SKIP_OUT + SKIP_STEP * len(spans) + 4
    height = rows * NODE_H + (rows - 1) * V_GAP + 2 * MARGIN

    def corner(name: str) -> tuple[float, float]:
        row, col = place[name]
        row_width = widths[row] * NODE_W + (widths[row] - 1) * H_GAP
        x0 = MARGIN + ((most * NODE_W + (most - 1) * H_GAP) - row_width) / 2
        return x0 + col * (NODE_W + H_GAP), MARGIN + row * (NODE_H + V_GAP)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="network-graph" id="network-graph" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="Layer graph">',
        '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0,0 L8,4 L0,8 z" fill="#64748b"/></marker></defs>',
    ]
    for layer in layers:
        x2, y2 = corner(layer["name"])
        for source in layer.get("inbound") or ():
            if source not in place:
                continue
            x1, y1 = corner(source)
            ax, ay, bx, by = x1 + NODE_W / 2, y1 + NODE_H, x2 + NODE_W / 2, y2
            span = place[layer["name"]][0] - place[source][0]
            if span > 1:  # skips rows: from right side to right side, bulging out beside the boxes it passes
                ax, ay, bx, by = x1 + NODE_W, y1 + NODE_H / 2, x2 + NODE_W, y2 + NODE_H / 2
                side = max(ax, bx) + SKIP_OUT + SKIP_STEP * lanes[span]
                d = f"M{ax:.1f},{ay:.1f} C{side:.1f},{ay:.1f} {side:.1f},{by:.1f} {bx:.1f},{by:.1f}"
            else:
                mid = (ay + by) / 2
                d = f"M{ax:.1f},{ay:.1f} C{ax:.1f},{mid:.1f} {bx:.1f},{mid:.1f} {bx:.1f},{by:.1f}"
            parts.append(
                f'<path class="edge" data-from="{escape(source)}" data-to="{escape(layer["name"])}" '
                f'd="{d}" fill="none" stroke="#64748b" stroke-width="1.3" marker-end="url(#arrow)"/>'
            )
    for layer in layers:
        x, y = corner(layer["name"])
        name, kind = str(layer["name"]), str(layer.get("type") or "")
        detail = f"{kind} · {format_shape(layer.get('output_shape'))}"
        tip = (
            f"{name} ({kind}): output {format_shape(layer.get('output_shape'))}, {layer.get('params', 0):,} parameters"
        )
        parts.append(
            f'<g class="layer" data-name="{escape(name)}"><title>{escape(tip)}</title>'
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{NODE_W}" height="{NODE_H}" rx="6" fill="{_fill(kind)}" '
            f'stroke="#94a3b8"/>'
            f'<text x="{x + NODE_W / 2:.1f}" y="{y + 17:.1f}" text-anchor="middle" font-size="12" '
            f'font-weight="600" fill="#0f172a">{escape(_clip(name, 30))}</text>'
            f'<text x="{x + NODE_W / 2:.1f}" y="{y + 33:.1f}" text-anchor="middle" font-size="11" '
            f'fill="#334155">{escape(_clip(detail, 34))}</text></g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))
