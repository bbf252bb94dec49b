"""Render a terminal capture (`tmux capture-pane -e -p`: text with SGR colour
escapes) to a PNG, one monospace cell per character.

    python ansi2png.py capture.ansi out.png [--cols 120] [--rows 32]

Needs Pillow (`pip install pillow`) and a monospace TrueType font (DejaVu Sans
Mono: Debian's fonts-dejavu-core).
"""

from __future__ import annotations

import argparse
import re
import unicodedata
from dataclasses import dataclass, replace
from pathlib import Path

FONT_PATHS = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf",
    "/usr/share/fonts/TTF/DejaVuSansMono.ttf",
)
BOLD_PATHS = tuple(p.replace("Mono.ttf", "Mono-Bold.ttf") for p in FONT_PATHS)
DEFAULT_FG = (224, 226, 234)
DEFAULT_BG = (20, 22, 27)
# xterm's 16 colours
BASIC = [
    (0, 0, 0), (205, 49, 49), (13, 188, 121), (229, 229, 16), (36, 114, 200), (188, 63, 188),
    (17, 168, 205), (229, 229, 229), (102, 102, 102), (241, 76, 76), (35, 209, 139),
    (245, 245, 67), (59, 142, 234), (214, 112, 214), (41, 184, 219), (255, 255, 255),
]
SGR = re.compile(r"\x1b\[([0-9;:]*)m")
OTHER_ESCAPE = re.compile(r"\x1b(\[[0-9;?]*[A-Za-ln-z]|\][^\x07]*\x07|[()][A-Z0-9])")


@dataclass(frozen=True)
class Style:
    fg: tuple[int, int, int] | None = None
    bg: tuple[int, int, int] | None = None
    bold: bool = False
    underline: bool = False
    reverse: bool = False


def xterm256(n: int) -> tuple[int, int, int]:
    if n < 16:
        return BASIC[n]
    if n < 232:
        n -= 16
        levels = [0, 95, 135, 175, 215, 255]
        return levels[n // 36], levels[(n // 6) % 6], levels[n % 6]
    gray = 8 + (n - 232) * 10
    return gray, gray, gray


def apply_sgr(style: Style, params: str) -> Style:
    codes = [int(c) if c else 0 for c in re.split("[;:]", params)] if params else [0]
    i = 0
    while i < len(codes):
        c = codes[i]
        if c == 0:
            style = Style()
        elif c == 1:
            style = replace(style, bold=True)
        elif c == 22:
            style = replace(style, bold=False)
        elif c == 4:
            style = replace(style, underline=True)
        elif c == 24:
            style = replace(style, underline=False)
        elif c == 7:
            style = replace(style, reverse=True)
        elif c == 27:
            style = replace(style, reverse=False)
        elif 30 <= c <= 37:
            style = replace(style, fg=BASIC[c - 30])
        elif 90 <= c <= 97:
            style = replace(style, fg=BASIC[c - 90 + 8])
        elif 40 <= c <= 47:
            style = replace(style, bg=BASIC[c - 40])
        elif 100 <= c <= 107:
            style = replace(style, bg=BASIC[c - 100 + 8])
        elif c == 39:
            style = replace(style, fg=None)
        elif c == 49:
            style = replace(style, bg=None)
        elif c in (38, 48) and i + 1 < len(codes):
            if codes[i + 1] == 5 and i + 2 < len(codes):
                color = xterm256(codes[i + 2])
                i += 2
            elif codes[i + 1] == 2 and i + 4 < len(codes):
                color = (codes[i + 2], codes[i + 3], codes[i + 4])
                i += 4
            else:
                color = None
            style = replace(style, fg=color) if c == 38 else replace(style, bg=color)
        i += 1
    return style


def parse(text: str) -> list[list[tuple[str, Style]]]:
    rows: list[list[tuple[str, Style]]] = []
    style = Style()
    for line in text.split("\n"):
        line = OTHER_ESCAPE.sub("", line)
        cells: list[tuple[str, Style]] = []
        pos = 0
        for match in SGR.finditer(line):
            for ch in line[pos:match.start()]:
                cells.append((ch, style))
                if unicodedata.east_asian_width(ch) in ("W", "F"):
                    cells.append(("", style))
            style = apply_sgr(style, match.group(1))
            pos = match.end()
        for ch in line[pos:]:
            cells.append((ch, style))
            if unicodedata.east_asian_width(ch) in ("W", "F"):
                cells.append(("", style))
        rows.append(cells)
    return rows


def font(paths: tuple[str, ...], size: int):  # type: ignore[no-untyped-def]
    from PIL import ImageFont

    for path in paths:
        if Path(path).exists():
            return ImageFont.truetype(path, size)
    raise SystemExit("no DejaVu Sans Mono font found (apt-get install fonts-dejavu-core)")


def render(text: str, out: Path, cols: int, rows: int, size: int = 16) -> None:
    from PIL import Image, ImageDraw

    regular, bold = font(FONT_PATHS, size), font(BOLD_PATHS, size)
    cell_w = round(regular.getlength("M"))
    ascent, descent = regular.getmetrics()
    cell_h = ascent + descent + 2
    pad = 12
    image = Image.new("RGB", (cols * cell_w + 2 * pad, rows * cell_h + 2 * pad), DEFAULT_BG)
    draw = ImageDraw.Draw(image)
    for y, cells in enumerate(parse(text)[:rows]):
        for x, (ch, style) in enumerate(cells[:cols]):
            fg, bg = style.fg or DEFAULT_FG, style.bg or DEFAULT_BG
            if style.reverse:
                fg, bg = bg, fg
            left, top = pad + x * cell_w, pad + y * cell_h
            if bg != DEFAULT_BG:
                draw.rectangle([left, top, left + cell_w - 1, top + cell_h - 1], fill=bg)
            if ch and ch != " ":
                draw.text((left, top + 1), ch, font=bold if style.bold else regular, fill=fg)
            if style.underline:
                draw.line([left, top + cell_h - 2, left + cell_w, top + cell_h - 2], fill=fg)
    image.save(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("capture", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--cols", type=int, default=120)
    parser.add_argument("--rows", type=int, default=32)
    args = parser.parse_args()
    render(args.capture.read_text(), args.out, args.cols, args.rows)


if __name__ == "__main__":
    main()
