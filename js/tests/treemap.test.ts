import { describe, expect, it } from "vitest";
import { type Cell, neighbour, type Rect, squarify } from "../src/treemap";

const bounds: Rect = { x: 0, y: 0, w: 400, h: 250 };
const area = (r: Rect) => r.w * r.h;

function overlap(a: Rect, b: Rect): number {
  const w = Math.min(a.x + a.w, b.x + b.w) - Math.max(a.x, b.x);
  const h = Math.min(a.y + a.h, b.y + b.h) - Math.max(a.y, b.y);
  return w > 0 && h > 0 ? w * h : 0;
}

/** Every property a layout must have: areas proportional to values, within bounds, no
 * overlap, the whole area tiled. */
function checkLayout(values: number[], within: Rect): Cell<number>[] {
  const cells = squarify(values, (v) => v, within);
  const positive = values.filter((v) => v > 0);
  expect(cells.length).toBe(positive.length);
  const total = positive.reduce((a, b) => a + b, 0);
  const whole = area(within);
  for (const cell of cells) {
    expect(area(cell)).toBeCloseTo((cell.item / total) * whole, 6);
    expect(cell.x).toBeGreaterThanOrEqual(within.x - 1e-9);
    expect(cell.y).toBeGreaterThanOrEqual(within.y - 1e-9);
    expect(cell.x + cell.w).toBeLessThanOrEqual(within.x + within.w + 1e-9);
    expect(cell.y + cell.h).toBeLessThanOrEqual(within.y + within.h + 1e-9);
  }
  for (let i = 0; i < cells.length; i++) {
    for (let j = i + 1; j < cells.length; j++) {
      expect(overlap(cells[i] as Rect, cells[j] as Rect)).toBeLessThan(1e-6);
    }
  }
  expect(cells.reduce((a, c) => a + area(c), 0)).toBeCloseTo(whole, 6);
  return cells;
}

describe("squarify", () => {
  it("gives areas proportional to the values, within bounds, without overlap", () => {
    checkLayout([6, 6, 4, 3, 2, 2, 1], bounds); // the paper's example
    checkLayout([1325168, 662528, 75000, 596], bounds);
    checkLayout([1], bounds);
    checkLayout([5, 5, 5, 5, 5, 5, 5, 5, 5], { x: 10, y: 20, w: 90, h: 300 });
  });

  it("holds for random values, from one to two hundred cells", () => {
    let seed = 7;
    const random = () => {
      seed = (seed * 16807) % 2147483647;
      return seed / 2147483647;
    };
    for (const n of [2, 3, 10, 41, 200]) {
      const values = Array.from({ length: n }, () => Math.floor(random() ** 3 * 1e6) + 1);
      checkLayout(values, { x: 0, y: 0, w: 300 + n, h: 180 });
    }
  });

  it("gives the largest item the first cell, and keeps cells squarish", () => {
    const cells = checkLayout([6, 6, 4, 3, 2, 2, 1], { x: 0, y: 0, w: 600, h: 400 });
    expect(cells[0]?.item).toBe(6);
    for (const c of cells) expect(Math.max(c.w / c.h, c.h / c.w)).toBeLessThan(3);
  });

  it("gives items of no value no cell, and nothing for an empty space", () => {
    expect(squarify([0, 3, -1, 0], (v) => v, bounds).map((c) => c.item)).toEqual([3]);
    expect(squarify([1, 2], (v) => v, { x: 0, y: 0, w: 0, h: 10 })).toEqual([]);
    expect(squarify([], (v: number) => v, bounds)).toEqual([]);
  });
});

describe("neighbour", () => {
  // a b
  // c d e
  const grid: Rect[] = [
    { x: 0, y: 0, w: 100, h: 50 },
    { x: 100, y: 0, w: 100, h: 50 },
    { x: 0, y: 50, w: 60, h: 50 },
    { x: 60, y: 50, w: 70, h: 50 },
    { x: 130, y: 50, w: 70, h: 50 },
  ];

  it("moves to the cell beside, in the same band first", () => {
    expect(neighbour(grid, 0, "right")).toBe(1);
    expect(neighbour(grid, 1, "left")).toBe(0);
    expect(neighbour(grid, 0, "down")).toBe(2);
    expect(neighbour(grid, 1, "down")).toBe(4);
    expect(neighbour(grid, 3, "up")).toBe(0);
    expect(neighbour(grid, 2, "right")).toBe(3);
    expect(neighbour(grid, 3, "right")).toBe(4);
  });

  it("stays when nothing lies that way", () => {
    expect(neighbour(grid, 0, "left")).toBe(-1);
    expect(neighbour(grid, 0, "up")).toBe(-1);
    expect(neighbour(grid, 4, "right")).toBe(-1);
    expect(neighbour(grid, 4, "down")).toBe(-1);
    expect(neighbour([], 0, "down")).toBe(-1);
  });

  it("reaches every cell of a squarified layout", () => {
    const cells = squarify([9, 7, 5, 4, 3, 2, 2, 1, 1], (v) => v, bounds);
    const seen = new Set([0]);
    const queue = [0];
    while (queue.length) {
      const at = queue.shift() as number;
      for (const d of ["left", "right", "up", "down"] as const) {
        const next = neighbour(cells, at, d);
        if (next >= 0 && !seen.has(next)) {
          seen.add(next);
          queue.push(next);
        }
      }
    }
    expect(seen.size).toBe(cells.length);
  });
});
