/**
 * "On N ranks" in the load form: how `tdview.distributed.load_shard` splits the
 * selection's rows across the ranks of a torchrun job, the rows and bytes each rank
 * reads, and the script that does it (code, Copy).
 *
 * Rank `r` of `W` gets rows `[r*n//W, (r+1)*n//W)` of the first batch dim, as
 * `tdview.distributed.rows_of_rank` says; its bytes are the subtree's bytes times its
 * share of the rows (leaves below a lazy stack are read whole by each rank: the table
 * says "about").
 */

import { CopyButton } from "./clipboard";
import { el } from "./dom";
import { formatCount, humanBytes } from "./format";
import type { NodeDetails, Path } from "./protocol";
import { keyTuple, pyString, subpathLiteral } from "./python-code";

/** The most ranks the form takes (torchrun's own limit is the machines). */
export const MAX_RANKS = 4096;
/** Ranks listed one by one; more are summed up by the first and the last. */
const LISTED = 8;

export interface RankShare {
  rank: number;
  start: number;
  stop: number;
  /** About how many bytes the rank reads; null when the subtree's size is unknown. */
  bytes: number | null;
}

/**
 * Each rank's rows of `rows` and its share of `bytes` (as `rows_of_rank` splits them).
 *
 * @example rankShares(10, 1000, 3).map((s) => [s.start, s.stop]) → [[0, 3], [3, 6], [6, 10]]
 */
export function rankShares(rows: number, bytes: number | null, ranks: number): RankShare[] {
  const shares: RankShare[] = [];
  for (let rank = 0; rank < ranks; rank++) {
    const start = Math.floor((rank * rows) / ranks);
    const stop = Math.floor(((rank + 1) * rows) / ranks);
    const part = bytes === null || rows === 0 ? null : Math.round((bytes * (stop - start)) / rows);
    shares.push({ rank, start, stop, bytes: part });
  }
  return shares;
}

/**
 * The torchrun script that loads each rank's rows of `path` in `source`.
 *
 * @example ranksScript("rb.tdz", ["storage"], 4) starts with
 *   "# torchrun --nproc_per_node=4 load_rows.py"
 */
export function ranksScript(source: string, path: Path, ranks: number): string {
  const where = path.length > 0 ? (subpathLiteral(path) ?? keyTuple(path)) : null;
  const args = [pyString(source), ...(where ? [where] : [])].join(", ");
  return [
    `# torchrun --nproc_per_node=${ranks} load_rows.py`,
    "import torch.distributed as dist",
    "import tdview.distributed",
    "",
    "# gloo on CPUs, nccl on GPUs",
    'dist.init_process_group("gloo")',
    `rows = tdview.distributed.load_shard(${args})`,
  ].join("\n");
}

/** The rows of the first batch dim of a node the form can split, else null. */
export function splittableRows(node: NodeDetails | null): number | null {
  if (node === null || node.kind === "leaf") return null;
  const first = node.batch_size?.[0];
  return first === undefined || first < 0 ? null : first;
}

export class RanksView {
  readonly element: HTMLElement;
  readonly #toggle: HTMLInputElement;
  readonly #count: HTMLInputElement;
  readonly #body: HTMLElement;
  readonly #table: HTMLTableElement;
  readonly #code: HTMLElement;
  readonly #copy: CopyButton;
  #script = "";
  #node: NodeDetails | null = null;
  #source = "";
  #path: Path = [];

  constructor() {
    this.element = el("div", "tdview-ranks");
    this.#toggle = el("input", "tdview-ranks-toggle");
    this.#toggle.type = "checkbox";
    this.#count = el("input", "tdview-input tdview-ranks-count");
    this.#count.type = "number";
    this.#count.min = "1";
    this.#count.max = String(MAX_RANKS);
    this.#count.value = "4";
    this.#count.setAttribute("aria-label", "Number of ranks");
    const field = el("label", "tdview-field tdview-ranks-field");
    field.append(this.#toggle, el("span", "", "On"), this.#count, el("span", "", "ranks"));
    field.title =
      "Split the rows of the first batch dim across the ranks of a torchrun job " +
      "(tdview.distributed.load_shard): each rank reads only its rows";
    this.#body = el("div", "tdview-ranks-body");
    this.#table = el("table", "tdview-ranks-table");
    this.#code = el("pre", "tdview-ranks-code");
    this.#copy = new CopyButton("Copy script", () => this.#script, {
      title: "Copy the torchrun script",
    });
    const codeRow = el("div", "tdview-ranks-code-row");
    codeRow.append(this.#code, this.#copy.element);
    this.#body.append(this.#table, codeRow);
    this.element.append(field, this.#body);
    this.#toggle.addEventListener("change", () => this.#render());
    this.#count.addEventListener("input", () => this.#render());
    this.#render();
  }

  /** The number of ranks asked for, within [1, MAX_RANKS]. */
  get ranks(): number {
    const n = Math.floor(Number(this.#count.value));
    return Number.isFinite(n) ? Math.min(Math.max(n, 1), MAX_RANKS) : 1;
  }

  get script(): string {
    return this.#script;
  }

  /** Points the view at the node on show (`source` and `path`: what the code loads). */
  setNode(node: NodeDetails | null, source: string, path: Path): void {
    this.#node = node;
    this.#source = source;
    this.#path = path;
    this.#render();
  }

  dispose(): void {
    this.#copy.dispose();
  }

  #render(): void {
    const rows = splittableRows(this.#node);
    this.element.hidden = rows === null;
    this.#body.hidden = rows === null || !this.#toggle.checked;
    if (rows === null || !this.#toggle.checked) return;
    const node = this.#node as NodeDetails;
    const bytes = node.rollup?.bytes ?? node.bytes;
    const ranks = this.ranks;
    const shares = rankShares(rows, bytes, ranks);
    const listed =
      shares.length <= LISTED ? shares : [...shares.slice(0, LISTED - 2), null, shares.at(-1)];
    const head = el("tr");
    for (const text of ["Rank", "Rows", "Reads about"]) head.append(el("th", "", text));
    const body = el("tbody");
    for (const share of listed) {
      const row = el("tr");
      if (!share) {
        const gap = el("td", "tdview-ranks-gap", `… ${formatCount(ranks - LISTED + 1)} more`);
        gap.colSpan = 3;
        row.append(gap);
      } else {
        const count = share.stop - share.start;
        row.append(
          el("td", "", String(share.rank)),
          el(
            "td",
            "",
            `${formatCount(share.start)}:${formatCount(share.stop)} (${formatCount(count)})`,
          ),
          el("td", "", share.bytes === null ? "?" : humanBytes(share.bytes)),
        );
      }
      body.append(row);
    }
    const thead = el("thead");
    thead.append(head);
    this.#table.replaceChildren(thead, body);
    this.#script = ranksScript(this.#source, this.#path, ranks);
    this.#code.textContent = this.#script;
  }
}
