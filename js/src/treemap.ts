/**
 * A squarified treemap layout (Bruls, Huizing and van Wijk, 2000) and the moves of the
 * arrow keys between its cells. Pure functions: render-sizes.ts draws what they give.
 *
 * `squarify` places the items, largest first, in rows along the shorter side of the
 * space left, adding an item to the row while that makes the row's worst aspect ratio
 * no worse; each cell's area is its value's share of the whole area.
 */

export interface Rect {
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface Cell<T> extends Rect {
  item: T;
}

/** The worst aspect ratio of a row of `areas` (summing to `sum`) laid along `side`. */
function worst(areas: readonly number[], sum: number, side: number): number {
  if (sum <= 0 || side <= 0) return Number.POSITIVE_INFINITY;
  const max = Math.max(...areas);
  const min = Math.min(...areas);
  const side2 = side * side;
  const sum2 = sum * sum;
  return Math.max((side2 * max) / sum2, sum2 / (side2 * min));
}

/** Lays `row` (areas, with their items) along the shorter side of `space`; returns the
 * space left. The last cell ends exactly at the row's end (no gap from rounding). */
function layRow<T>(row: Cell<T>[], areas: number[], space: Rect, out: Cell<T>[]): Rect {
  const sum = areas.reduce((a, b) => a + b, 0);
  const wide = space.w >= space.h; // the row is a column at the left, else a row on top
  const length = wide ? space.h : space.w;
  const thick = length > 0 ? Math.min(sum / length, wide ? space.w : space.h) : 0;
  let at = wide ? space.y : space.x;
  const end = at + length;
  row.forEach((cell, i) => {
    const size = i === row.length - 1 ? end - at : thick > 0 ? (areas[i] ?? 0) / thick : 0;
    if (wide) Object.assign(cell, { x: space.x, y: at, w: thick, h: size });
    else Object.assign(cell, { x: at, y: space.y, w: size, h: thick });
    at += size;
    out.push(cell);
  });
  return wide
    ? { x: space.x + thick, y: space.y, w: space.w - thick, h: space.h }
    : { x: space.x, y: space.y + thick, w: space.w, h: space.h - thick };
}

/**
 * Cells for `items` within `bounds`, each of an area proportional to `value(item)`,
 * tiling `bounds` without overlap. Items of no value get no cell; the order of the
 * cells is the items' by value, largest first.
 */
export function squarify<T>(
  items: readonly T[],
  value: (item: T) => number,
  bounds: Rect,
): Cell<T>[] {
  const sized = items
    .map((item) => ({ item, v: Math.max(0, value(item)) }))
    .filter((e) => e.v > 0 && Number.isFinite(e.v))
    .sort((a, b) => b.v - a.v);
  const total = sized.reduce((a, e) => a + e.v, 0);
  const out: Cell<T>[] = [];
  if (total <= 0 || bounds.w <= 0 || bounds.h <= 0) return out;
  const scale = (bounds.w * bounds.h) / total;
  let space: Rect = { ...bounds };
  let row: Cell<T>[] = [];
  let areas: number[] = [];
  let sum = 0;
  for (const { item, v } of sized) {
    const area = v * scale;
    const side = Math.min(space.w, space.h);
    if (row.length && worst([...areas, area], sum + area, side) > worst(areas, sum, side)) {
      space = layRow(row, areas, space, out);
      row = [];
      areas = [];
      sum = 0;
    }
    row.push({ item, x: 0, y: 0, w: 0, h: 0 });
    areas.push(area);
    sum += area;
  }
  if (row.length) layRow(row, areas, space, out);
  return out;
}

export type Direction = "left" | "right" | "up" | "down";

/**
 * The cell an arrow key moves to from `cells[from]`: of the cells past its edge in that
 * direction, the nearest by the gap between their edges: a cell beside it (their
 * sides overlap) before one offset sideways, whose offset weighs double; among cells
 * alike, the one whose centre is nearest sideways. -1 when there is none.
 */
export function neighbour(cells: readonly Rect[], from: number, direction: Direction): number {
  const here = cells[from];
  if (!here) return -1;
  const cx = here.x + here.w / 2;
  const cy = here.y + here.h / 2;
  const eps = 1e-6;
  let best = -1;
  let bestScore = Number.POSITIVE_INFINITY;
  cells.forEach((cell, i) => {
    if (i === from) return;
    const ox = cell.x + cell.w / 2;
    const oy = cell.y + cell.h / 2;
    let along: number;
    let across: number;
    switch (direction) {
      case "right":
        if (cell.x < here.x + here.w - eps) return;
        [along, across] = [
          cell.x - here.x - here.w,
          overlapGap(cell.y, cell.h, here.y, here.h, oy - cy),
        ];
        break;
      case "left":
        if (cell.x + cell.w > here.x + eps) return;
        [along, across] = [
          here.x - cell.x - cell.w,
          overlapGap(cell.y, cell.h, here.y, here.h, oy - cy),
        ];
        break;
      case "down":
        if (cell.y < here.y + here.h - eps) return;
        [along, across] = [
          cell.y - here.y - here.h,
          overlapGap(cell.x, cell.w, here.x, here.w, ox - cx),
        ];
        break;
      case "up":
        if (cell.y + cell.h > here.y + eps) return;
        [along, across] = [
          here.y - cell.y - cell.h,
          overlapGap(cell.x, cell.w, here.x, here.w, ox - cx),
        ];
        break;
    }
    // among cells alike, the one whose centre is nearest sideways
    const sideways = direction === "left" || direction === "right" ? oy - cy : ox - cx;
    const score = along + 2 * Math.abs(across) + 0.01 * Math.abs(sideways);
    if (score < bestScore) {
      bestScore = score;
      best = i;
    }
  });
  return best;
}

/** 0 when two spans overlap (a cell beside this one), else the offset of their centres. */
function overlapGap(a: number, aLen: number, b: number, bLen: number, centres: number): number {
  return a < b + bLen && b < a + aLen ? 0 : centres;
}
